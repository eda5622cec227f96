#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws which pkg/ module each program and module links, from the build itself.

CMake's --graphviz writes every target and link of a configured tree. This
keeps the project's own libraries (svc_*: pkg/, *_lib: a program's logic),
its programs, and the outside libraries they link directly (libpq, gRPC,
librdkafka, ...), reduces the edges to the ones not implied by others
(graphviz's tred), and renders a PNG with dot. Needs cmake and graphviz
(Debian: graphviz).

Usage: tools/pkg_graph.py OUT.png     (from anywhere in the repository)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = {"catalog", "order", "relay", "gateway", "notification", "notify-sink", "notify-dlq",
            "healthcheck"}
OUTSIDE = {"PkgConfig::LIBPQ": "libpq", "PkgConfig::GRPC": "gRPC C core",
           "PkgConfig::RDKAFKA": "librdkafka", "PkgConfig::RABBITMQ": "rabbitmq-c",
           "PkgConfig::LIBCURL": "libcurl", "PkgConfig::H2O": "h2o", "PkgConfig::LIBCRYPTO": "OpenSSL",
           "PkgConfig::PROTOBUFC": "protobuf-c"}
NODE = re.compile(r'^\s*"(node\d+)" \[ label = "([^"]+)"')
EDGE = re.compile(r'^\s*"(node\d+)" -> "(node\d+)"')


def kind(label):
    if label in PROGRAMS:
        return "program"
    if label in OUTSIDE:
        return "outside"
    if (label.startswith("svc_") and label != "svc_warnings") or label.endswith("_lib") \
            or label == "shopmicro_proto":
        return "module"
    return None


def read_graph(dot_path):
    labels, edges = {}, set()
    with open(dot_path, encoding="utf-8") as f:
        for line in f:
            m = NODE.match(line)
            if m:
                labels[m.group(1)] = m.group(2)
                continue
            m = EDGE.match(line)
            if m:
                edges.add((m.group(1), m.group(2)))
    return labels, edges


def to_dot(labels, edges):
    keep = {n: l for n, l in labels.items() if kind(l)}
    out = ["digraph pkg {", '  rankdir=LR; node [fontname="Helvetica", fontsize=11];']
    style = {"program": 'shape=box, style="rounded,filled", fillcolor="#cfe3ff"',
             "module": 'shape=box, style=filled, fillcolor="#e8f5e9"',
             "outside": 'shape=box, style="filled,dashed", fillcolor="#f2f2f2"'}
    for n, l in sorted(keep.items(), key=lambda x: x[1]):
        out.append('  "%s" [label="%s", %s];' % (l, OUTSIDE.get(l, l), style[kind(l)]))
    for a, b in sorted(edges):
        if a in keep and b in keep and kind(keep[a]) != "outside":
            out.append('  "%s" -> "%s";' % (keep[a], keep[b]))
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["cmake", "-S", ROOT, "-B", tmp, "-G", "Ninja", "-DSHOPMICRO_TESTS=OFF",
                        "--graphviz=" + os.path.join(tmp, "targets.dot")],
                       check=True, stdout=subprocess.DEVNULL)
        labels, edges = read_graph(os.path.join(tmp, "targets.dot"))
        reduced = subprocess.run(["tred"], input=to_dot(labels, edges), text=True,
                                 capture_output=True, check=True).stdout
        subprocess.run(["dot", "-Tpng", "-Gdpi=110", "-o", sys.argv[1]], input=reduced,
                       text=True, check=True)
    print("pkg_graph: %s" % sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
