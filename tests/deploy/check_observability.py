#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/observability against the code and the docs.

  * grafana/shopmicro.json is what dashboard.py writes, is valid dashboard JSON (unique panel
    ids, every query on the ${DS_PROMETHEUS} input, panels inside the 24-column grid);
  * prometheus.yml scrapes one job per service, on the default port docs/operations.md gives;
  * every metric name in the dashboard's queries is one that a service really exports: the real
    catalog, order, gateway, relay and notification binaries are started on free ports (fresh
    databases on the test Postgres, $SHOPMICRO_PG_PORT; Kafka and RabbitMQ pointed at a closed
    port, so the consumers exist and report, but connect to nothing), and each /metrics is read.

  check_observability.py --bin catalog=PATH --bin order=PATH --bin gateway=PATH \\
                         --bin relay=PATH --bin notification=PATH
Exit status 0: all checks passed; 1: a check failed (each is printed).
"""

import argparse
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OBS = os.path.join(ROOT, "deploy", "observability")
FAILS = []

# The job of each service in prometheus.yml and the variable whose default port it scrapes.
JOB_PORT_VARIABLE = {
    "gateway": "GATEWAY_ADMIN_LISTEN", "catalog": "CATALOG_ADMIN_LISTEN",
    "order": "ORDER_ADMIN_LISTEN", "relay": "RELAY_ADMIN_LISTEN",
    "relay-catalog": "SHOPMICRO_RELAY_CATALOG_ADMIN_PORT", "notification": "NOTIFY_ADMIN_LISTEN",
}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "bool", "offset", "le", "inf", "nan"}


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        FAILS.append(what)


# ---- the files ---------------------------------------------------------------------------

def check_dashboard_file():
    r = subprocess.run([sys.executable, os.path.join(OBS, "dashboard.py"), "--check"],
                       capture_output=True, text=True, check=False)
    check(r.returncode == 0, "grafana/shopmicro.json is what dashboard.py writes "
          + (r.stdout.strip() or r.stderr.strip()))
    with open(os.path.join(OBS, "grafana", "shopmicro.json"), encoding="utf-8") as f:
        dash = json.load(f)
    ids = [p["id"] for p in dash["panels"]]
    check(len(ids) == len(set(ids)), "panel ids are unique (%d panels)" % len(ids))
    check(all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in dash["panels"]),
          "every panel fits the 24-column grid")
    targets = [t for p in dash["panels"] for t in p.get("targets", [])]
    check(targets and all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" and t["expr"]
                          for t in targets), "%d queries, each on ${DS_PROMETHEUS}" % len(targets))
    check([i["name"] for i in dash["__inputs"]] == ["DS_PROMETHEUS"],
          "the datasource is an import input")
    return [t["expr"] for t in targets]


def documented_port(variable):
    """The port of `variable`'s default in docs/operations.md's tables."""
    with open(os.path.join(ROOT, "docs", "operations.md"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("|") and "`%s`" % variable in line:
                m = re.search(r"127\.0\.0\.1:(\d+)|\| `(\d{4,5})` \|", line)
                if m:
                    return int(m.group(1) or m.group(2))
    return None


def check_prometheus_file():
    with open(os.path.join(OBS, "prometheus.yml"), encoding="utf-8") as f:
        conf = yaml.safe_load(f)
    jobs = {j["job_name"]: j for j in conf["scrape_configs"]}
    check(sorted(jobs) == sorted(JOB_PORT_VARIABLE), "prometheus.yml has one job per service: "
          + ", ".join(sorted(jobs)))
    for job, var in sorted(JOB_PORT_VARIABLE.items()):
        targets = [t for sc in jobs.get(job, {}).get("static_configs", [])
                   for t in sc["targets"]]
        want = documented_port(var)
        check(want is not None and targets == ["127.0.0.1:%d" % want],
              "%s scrapes %s, the default of %s (%s)" % (job, targets, var, want))


def metric_names(expr):
    """The metric names a PromQL expression reads."""
    e = re.sub(r'"[^"]*"', "", expr)
    e = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", e)
    e = re.sub(r"\b(by|without)\s*\([^)]*\)", "", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if not rest.startswith("(") and m.group(0).lower() not in PROMQL_WORDS:
            names.add(m.group(0))
    return names


# ---- the services -------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """Fresh databases and the five services, each logging into the temp folder."""

    def __init__(self, bins):
        self.bins = bins
        self.pg_port = os.environ.get("SHOPMICRO_PG_PORT") or "25432"
        self.tmp = tempfile.mkdtemp(prefix="observability-")
        self.tag = "%d_%s" % (os.getpid(), uuid.uuid4().hex[:6])
        self.dbs, self.procs = [], {}

    def psql(self, sql):
        psql = shutil.which("psql") or "/usr/lib/postgresql/15/bin/psql"
        subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                        self.pg_port, "-U", "postgres", "-d", "postgres", "-c", sql],
                       check=True, capture_output=True, timeout=30)

    def database(self, name):
        db = "obs_%s_%s" % (name, self.tag)
        self.psql('CREATE DATABASE "%s"' % db)
        self.dbs.append(db)
        return "host=127.0.0.1 port=%s dbname=%s user=postgres" % (self.pg_port, db)

    def start(self, name, env, ready=r"admin port bound to \S+ \(port (\d+)\)"):
        """Starts service name; returns the port its log names in `ready`."""
        log = os.path.join(self.tmp, name + ".log")
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(  # pylint: disable=consider-using-with
                [self.bins[name]], env=dict(os.environ, **env), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self.log_port(name, ready)

    def log_port(self, name, pattern):
        """The port in the first match of pattern in name's log (None when the pattern has no
        group), waiting up to 20 s for the line: a service writes its lines in its own order."""
        log = os.path.join(self.tmp, name + ".log")
        until = time.monotonic() + 20
        while time.monotonic() < until:
            with open(log, encoding="utf-8", errors="replace") as f:
                m = re.search(pattern, f.read())
            if m:
                return int(m.group(1)) if m.groups() else None
            if self.procs[name].poll() is not None:
                break
            time.sleep(0.05)
        with open(log, encoding="utf-8", errors="replace") as f:
            raise RuntimeError("%s did not log %r:\n%s" % (name, pattern, f.read()[-3000:]))

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        for db in self.dbs:
            self.psql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % db)
        shutil.rmtree(self.tmp, ignore_errors=True)


def up(st):
    """Starts everything; returns {service: metrics URL}."""
    nowhere = "127.0.0.1:1"  # a closed port: the consumers exist, report, and connect to nothing
    cat_dsn, ord_dsn = st.database("catalog"), st.database("orders")
    urls = {"catalog": st.start("catalog", {
        "CATALOG_LISTEN": "127.0.0.1:0", "CATALOG_ADMIN_LISTEN": "127.0.0.1:0",
        "CATALOG_DB_DSN": cat_dsn, "CATALOG_KAFKA_BROKERS": nowhere})}
    cat_grpc = st.log_port("catalog", r'msg="listening on \S+ \(port (\d+)\)')
    urls["order"] = st.start("order", {
        "ORDER_LISTEN": "127.0.0.1:0", "ORDER_ADMIN_LISTEN": "127.0.0.1:0",
        "ORDER_DB_DSN": ord_dsn, "ORDER_CATALOG_ADDR": "127.0.0.1:%d" % cat_grpc,
        "ORDER_KAFKA_BROKERS": nowhere})
    ord_grpc = st.log_port("order", r'msg="listening on \S+ \(port (\d+)\)')
    gw, gw_admin = free_port(), free_port()
    st.start("gateway", {"GATEWAY_LISTEN": "127.0.0.1:%d" % gw, "GATEWAY_LOCK_DIR": st.tmp,
                         "GATEWAY_ADMIN_LISTEN": "127.0.0.1:%d" % gw_admin,
                         "GATEWAY_CATALOG_ADDR": "127.0.0.1:%d" % cat_grpc,
                         "GATEWAY_ORDER_ADDR": "127.0.0.1:%d" % ord_grpc},
             ready=r'msg="listening on')
    urls["gateway"] = gw_admin
    urls["relay"] = st.start("relay", {"RELAY_DB_DSN": ord_dsn, "RELAY_KAFKA_BROKERS": nowhere,
                                       "RELAY_ADMIN_LISTEN": "127.0.0.1:0"})
    urls["notification"] = st.start("notification", {
        "NOTIFY_KAFKA_BROKERS": nowhere, "NOTIFY_RABBITMQ_HOST": "127.0.0.1",
        "NOTIFY_RABBITMQ_PORT": "1", "NOTIFY_ADMIN_LISTEN": "127.0.0.1:0",
        # a secret of the run's own: the service refuses to start without one
        "NOTIFY_WEBHOOK_SECRET": "whsec_" + base64.b64encode(os.urandom(32)).decode()})
    return {k: "http://127.0.0.1:%d/metrics" % v for k, v in urls.items()}


def exported(url):
    """Every name a /metrics page declares: its samples, and each family of a "# TYPE" line
    (a family whose label values come with traffic, e.g. a route or a Kafka partition, has no
    sample yet on a quiet service; a histogram X also declares X_bucket, X_sum and X_count)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    names = {re.split(r"[{ ]", ln, 1)[0] for ln in text.splitlines() if ln and ln[0] != "#"}
    for fam, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(fam)
        if kind == "histogram":
            names.update(fam + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names


def check_metric_names(exprs, bins):
    st = Stack(bins)
    try:
        urls = up(st)
        names = {}
        for svc, url in urls.items():
            names[svc] = exported(url)
            check(len(names[svc]) > 0, "%s exports %d series names" % (svc, len(names[svc])))
        every = set().union(*names.values())
        for expr in exprs:
            for n in sorted(metric_names(expr)):
                where = sorted(s for s in names if n in names[s])
                check(bool(where), "dashboard metric %s is exported (by %s)"
                      % (n, ", ".join(where) or "nobody"))
        check(bool(every), "read %d distinct series names from %d services"
              % (len(every), len(urls)))
    finally:
        st.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH")
    args = ap.parse_args()
    bins = dict(b.split("=", 1) for b in args.bin)
    missing = sorted({"catalog", "order", "gateway", "relay", "notification"} - set(bins))
    if missing:
        ap.error("--bin missing for " + ", ".join(missing))
    exprs = check_dashboard_file()
    check_prometheus_file()
    check_metric_names(exprs, bins)
    print("%s: %d check(s) failed" % (os.path.basename(sys.argv[0]), len(FAILS)) if FAILS
          else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
