#!/usr/bin/python3
"""deploy_shopper: `stack.sh shop` (tools/shopper/locustfile.py, Locust from PyPI) against an
isolated stack (tests/lib/isolated_stack.py: own run folder, Postgres and ports; catalog, order
and the gateway on a build tree's binaries, its rate limits the defaults). The shoppers run
headless for --duration seconds at --rate requests a second; then Locust's statistics at the
end (<run folder>/shop/stats.json) must show every request of the shopper
(the catalog's pages, a product, an order, its replay with the same Idempotency-Key, the order
read back) made at least once, no failure at all, a rate within half of the one asked for either
way, and the shop still running. docs/operations.md, "A working shop on the dashboards".

usage: test_shopper.py --stack deploy/local/stack.sh --build-dir BUILD --venv VENV
                       [--rate R] [--duration S] [--keep]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from isolated_stack import IsolatedStack, wait_http_ok  # noqa: E402

SERVICES = ("catalog", "order", "gateway")
# Every request the shopper makes, by its name in Locust's statistics.
NAMES = ("GET /v1/products", "GET /v1/products?page_token", "GET /v1/products/{id}",
         "POST /v1/orders", "POST /v1/orders (replay)", "GET /v1/orders/{id}")


def log(msg):
    print(f"shopper-test: {msg}", flush=True)


def check_stats(path, rate, duration):
    """The failures found in the run's final statistics (the locustfile's SHOPPER_STATS_FILE:
    Locust's own figures), [] when there are none."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    total = doc["total"]
    log(f"Locust: {total['requests']} requests, {total['failures']} failures, p50 {total['p50_ms']} ms, "
        f"p95 {total['p95_ms']} ms, {total['requests_per_s']:.2f} requests/s, {total['users']} users")
    by_name = {e["name"]: e for e in doc["requests"]}
    bad = []
    for name in NAMES:
        e = by_name.get(name, {})
        log(f"  {name:30} {e.get('num_requests', 0):4} requests, {e.get('num_failures', 0)} failures")
        if e.get("num_requests", 0) < 1:
            bad.append(f"{name}: never made")
    unknown = sorted(set(by_name) - set(NAMES))
    if unknown:
        bad.append(f"requests of unknown names: {unknown}")
    for e in doc["errors"]:
        log(f"  failure: {e['occurrences']} x {e['method']} {e['name']}: {e['error']}")
    if total["failures"]:
        bad.append(f"{total['failures']} failed request(s)")
    orders = doc["orders"]
    log(f"  orders: {orders['placed']} placed, {orders['replayed_same']} replays answered with the "
        f"same order, {orders['read']} read back {orders['statuses']}")
    # The pace: the first actions are spread over one interval, so the band is wide.
    achieved = total["requests"] / duration
    if not 0.5 * rate <= achieved <= 1.5 * rate:
        bad.append(f"{achieved:.2f} requests/s over {duration} s, asked for {rate}")
    return bad


def run(st, args):
    for step in (("pg-up",), ("start", *SERVICES)):
        if st.run(*step).returncode != 0:
            return [f"stack.sh {' '.join(step)} failed"]
    if not wait_http_ok(f"http://127.0.0.1:{st.port('gateway')}/readyz", 30):
        return ["the gateway was not ready within 30 s"]
    st.env["SHOPMICRO_SHOP_VENV"] = os.path.abspath(args.venv)
    log(f"stack.sh shop --rate {args.rate} --duration {args.duration}")
    p = st.run("shop", "--rate", str(args.rate), "--duration", str(args.duration))
    bad = []
    stats = os.path.join(st.run_dir, "shop", "stats.json")
    if not os.path.exists(stats):
        return [f"stack.sh shop exited {p.returncode} and wrote no statistics"]
    bad += check_stats(stats, args.rate, args.duration)
    if p.returncode != 0:
        bad.append(f"stack.sh shop exited {p.returncode}")
    bad += [f"after the run: {b}" for b in st.not_running(SERVICES)]
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--venv", required=True, help="the shopper's venv (made by tests/tools/pyvenv.sh)")
    ap.add_argument("--rate", type=float, default=4)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    st = IsolatedStack(args.stack, args.build_dir, "shopmicro-shopper.", echo=lambda t: print(t, flush=True))
    log(f"run dir {st.run_dir}, gateway port {st.port('gateway')}")
    bad = []
    try:
        bad = run(st, args)
    except Exception as e:  # a broken step must still tear the stack down
        bad = [f"exception: {e!r}"]
    finally:
        down = st.teardown(bool(bad), SERVICES, args.keep, log)
        if down and not bad:
            bad = [down]
    for b in bad:
        log(f"FAIL {b}")
    if bad:
        return 1
    log("passed: every request of the shopper made, no failure, the shop still running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
