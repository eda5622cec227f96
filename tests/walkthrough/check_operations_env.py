#!/usr/bin/python3
"""Fail if docs/operations.md misses a variable that a binary's --help prints (or one of
the stack scripts' SHOPMICRO_* variables), or documents a different default.

usage: check_operations_env.py --doc docs/operations.md [--stack SCRIPT]... BINARY...
--stack names one script of the stack (deploy/local/stack.sh and every file it sources); repeat it.
A variable counts as documented when `NAME` (in backticks) appears in the doc; its default must
appear on the same line, in backticks, as --help prints it.
"""
import argparse
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--doc", required=True)
ap.add_argument("--stack", action="append", default=[])
ap.add_argument("binaries", nargs="+")
a = ap.parse_args()

doc = open(a.doc, encoding="utf-8").read()
lines = doc.splitlines()
bad = []
seen = 0
for b in a.binaries:
    p = subprocess.run([b, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
    if p.returncode != 0:
        bad.append(f"{b} --help exited {p.returncode}")
        continue
    found = re.findall(r"^  ([A-Z][A-Z0-9_]+) \(default: (.*?)(?:; range [^)]*)?\)$", p.stdout, re.M)
    if not found:
        bad.append(f"{b} --help printed no variables (format changed?)")
    for name, default in found:
        seen += 1
        rows = [l for l in lines if f"`{name}`" in l]
        if not rows:
            bad.append(f"{name} (from {b} --help) is not in {a.doc}")
        elif not any(f"`{default}`" in l for l in rows):
            bad.append(f"{name}: default `{default}` (from --help) is not on its line in {a.doc}")

for script in a.stack:
    for name in sorted(set(re.findall(r"\b(SHOPMICRO_[A-Z][A-Z0-9_]*)", open(script).read()))):
        seen += 1
        if f"`{name}`" not in doc:
            bad.append(f"{name} (from {script}) is not in {a.doc}")

for m in bad:
    print(f"docs_operations_env: {m}")
print(f"docs_operations_env: {seen} variables checked, {len(bad)} problem(s)")
sys.exit(1 if bad else 0)
