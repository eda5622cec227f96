#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/observability's alerting rules (alerts.yml) with promtool and against the code.

  * promtool is installed (Debian's prometheus package; deploy/local/packages.txt): a missing one
    is a failure, never a skip;
  * `promtool check rules alerts.yml`, `promtool check config prometheus.yml` (which must load
    alerts.yml through rule_files) and `promtool test rules tests/alerts_test.yml` pass;
  * every alert has a severity (critical or warning), a summary and a description, and the unit
    tests expect it to fire somewhere and to stay silent somewhere;
  * every metric name the rules read is one that a service really exports (the services started
    as check_observability.py starts them), or Prometheus's own `up`.

  check_alerts.py --bin catalog=PATH --bin order=PATH --bin gateway=PATH \\
                  --bin relay=PATH --bin notification=PATH
Exit status 0: all checks passed; 1: a check failed (each is printed).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

import yaml

import check_observability as obs

OBS = obs.OBS
RULES = os.path.join(OBS, "alerts.yml")
TESTS = os.path.join(OBS, "tests", "alerts_test.yml")
check = obs.check
PROMETHEUS_OWN = {"up"}


def promtool(*args):
    r = subprocess.run(["promtool", *args], cwd=OBS, capture_output=True, text=True, check=False)
    out = (r.stdout + r.stderr).strip()
    check(r.returncode == 0, "promtool %s\n%s" % (" ".join(args), "\n".join(
        "      " + ln for ln in out.splitlines())))


def alert_rules():
    with open(RULES, encoding="utf-8") as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"] if "alert" in r]


def check_rules_shape(rules):
    for r in rules:
        a, ann = r["alert"], r.get("annotations", {})
        check(r.get("labels", {}).get("severity") in ("critical", "warning"),
              "%s has severity %s" % (a, r.get("labels", {}).get("severity")))
        check(bool(ann.get("summary")) and bool(ann.get("description")),
              "%s has a summary and a description" % a)
    with open(TESTS, encoding="utf-8") as f:
        tests = yaml.safe_load(f)
    cases = [c for t in tests["tests"] for c in t.get("alert_rule_test", [])]
    for r in rules:
        a = r["alert"]
        fires = [c for c in cases if c["alertname"] == a and c.get("exp_alerts")]
        silent = [c for c in cases if c["alertname"] == a and not c.get("exp_alerts")]
        check(bool(fires) and bool(silent), "%s is tested firing (%d case(s)) and silent (%d)"
              % (a, len(fires), len(silent)))
    unknown = sorted({c["alertname"] for c in cases} - {r["alert"] for r in rules})
    check(not unknown, "every alert the tests name is in alerts.yml (%s)"
          % (", ".join(unknown) or "yes"))


def rule_metric_names(expr):
    """The metric names an expression reads: plain names, and the alternatives of a
    {__name__=~"a|b"} selector."""
    names = set()
    for m in re.finditer(r'__name__\s*=~?\s*"([^"]*)"', expr):
        names.update(m.group(1).split("|"))
    names.update(obs.metric_names(expr))
    names.discard("__name__")
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH")
    args = ap.parse_args()
    bins = dict(b.split("=", 1) for b in args.bin)
    missing = sorted({"catalog", "order", "gateway", "relay", "notification"} - set(bins))
    if missing:
        ap.error("--bin missing for " + ", ".join(missing))

    if shutil.which("promtool") is None:
        print("FAIL: promtool not found on PATH: it ships in Debian's prometheus package "
              "(deploy/local/packages.txt; install it with deploy/local/stack.sh deps)")
        return 1
    promtool("check", "rules", "alerts.yml")
    promtool("check", "config", "prometheus.yml")
    with open(os.path.join(OBS, "prometheus.yml"), encoding="utf-8") as f:
        check(yaml.safe_load(f).get("rule_files") == ["alerts.yml"],
              "prometheus.yml loads alerts.yml (rule_files)")
    promtool("test", "rules", os.path.join("tests", "alerts_test.yml"))

    rules = alert_rules()
    check(len(rules) > 0, "alerts.yml has %d alerts" % len(rules))
    check_rules_shape(rules)

    wanted = {}
    for r in rules:
        for n in rule_metric_names(r["expr"]):
            wanted.setdefault(n, []).append(r["alert"])
    st = obs.Stack(bins)
    try:
        urls = obs.up(st)
        names = {svc: obs.exported(url) for svc, url in urls.items()}
    finally:
        st.close()
    for n in sorted(wanted):
        where = sorted(s for s in names if n in names[s])
        check(bool(where) or n in PROMETHEUS_OWN, "alert metric %s (%s) is exported by %s"
              % (n, ", ".join(wanted[n]), ", ".join(where) or
                 ("Prometheus itself" if n in PROMETHEUS_OWN else "nobody")))

    print("%s: %d check(s) failed" % (os.path.basename(sys.argv[0]), len(obs.FAILS)) if obs.FAILS
          else "all checks passed")
    return 1 if obs.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
