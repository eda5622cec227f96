#!/usr/bin/python3
"""docs/walkthrough.md as a test: the documented steps against a stack started by
deploy/local/stack.sh, isolated from a user's stack (own run dir, own Postgres cluster, free
ports), checking the documented outcomes. Standard library only.

usage: walkthrough.py --stack deploy/local/stack.sh --build-dir BUILD [--keep]
The stack is always torn down (stack.sh down) and its run dir removed unless --keep or a failure
(then the logs are printed and the folder is kept for a post-mortem).
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from isolated_stack import IsolatedStack  # noqa: E402

ARGS = None
ST = None  # the IsolatedStack
GW_PORT = None
GW_ADMIN_PORT = None
TOKEN = None  # the local issuer's bearer token (stack.sh token), sent to the gateway's API port
FAILURES = []


def log(msg):
    print(f"walkthrough: {msg}", flush=True)


def scaled(seconds):
    """An upper bound in seconds, stretched by ctest's SVC_TEST_TIMEOUT_MULTIPLIER (1 here, 4 in a
    sanitizer tree). Lower bounds ("the retried orders took at least 20 ms") stay as they are: a
    slower build only makes them easier to meet."""
    return seconds * max(1.0, float(os.environ.get("SVC_TEST_TIMEOUT_MULTIPLIER", "1") or 1))


def check(cond, what):
    if cond:
        log(f"ok   {what}")
    else:
        log(f"FAIL {what}")
        FAILURES.append(what)
    return cond


def require(cond, what):
    if not check(cond, what):
        raise SystemExit(1)


def stack(*args, check_rc=True):
    p = ST.run(*args)
    if check_rc and p.returncode != 0:
        require(False, f"stack.sh {' '.join(args)} exited {p.returncode}")
    return p


def req(method, path, body=None, headers=None, timeout=30, port=None):
    """One request on a new connection (as curl does), to the gateway's API port unless port is
    given. Returns (status, headers, body, seconds)."""
    h = {"Content-Type": "application/json"} if body is not None else {}
    if TOKEN and port is None:
        h["Authorization"] = f"Bearer {TOKEN}"
    h.update(headers or {})
    data = json.dumps(body) if body is not None else None
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port or GW_PORT, timeout=timeout)
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        dt = time.monotonic() - t0
        try:
            js = json.loads(raw) if raw else None
        except ValueError:
            js = raw.decode(errors="replace")
        return r.status, dict(r.getheaders()), js, dt
    finally:
        c.close()


def psql(db, sql):
    pg_bin = os.environ.get("SHOPMICRO_PG_BIN", "/usr/lib/postgresql/15/bin")
    p = subprocess.run([f"{pg_bin}/psql", "-X", "-qtA", "-h", "127.0.0.1", "-p", str(ST.port("postgres")),
                        "-U", "postgres", "-d", db, "-c", sql],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        require(False, f"psql {db}: {sql} ({p.stdout.strip()})")
    return p.stdout.strip()


def counts():
    return tuple(int(psql("orders", f"SELECT count(*) FROM {t}")) for t in ("orders", "order_items", "outbox"))


def read_log(svc):
    return ST.read_log(svc)


def wait_for(pred, seconds, step=0.1):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def order_status(oid):
    return psql("orders", f"SELECT status FROM orders WHERE id = '{oid}'")


def wait_confirmed(oid, seconds):
    """Seconds until order oid is CONFIRMED (the saga: catalog reserved its stock), or None."""
    t0 = time.monotonic()
    if wait_for(lambda: order_status(oid) == "CONFIRMED", seconds, 0.05):
        return time.monotonic() - t0
    return None


def readyz():
    st, _, js, _ = req("GET", "/readyz", port=GW_ADMIN_PORT)  # the detailed one
    ups = {u["name"]: u for u in (js or {}).get("upstreams", [])} if isinstance(js, dict) else {}
    return st, ups


def walkthrough():
    t_start = time.monotonic()
    log("step 0: isolated stack: pg-up, start kafka catalog order relay relay-catalog gateway")
    stack("pg-up")
    # Kafka and both relays: the saga moves each order to CONFIRMED, so step 3 can show that a
    # catalog killed and started again decides orders at once.
    stack("start", "kafka", "catalog", "order", "relay", "relay-catalog", "gateway")
    require(wait_for(lambda: req("GET", "/healthz")[0] == 200, 10), "gateway /healthz 200")
    global TOKEN
    st, hdrs, _, _ = req("POST", "/v1/orders", {})
    check(st == 401 and hdrs.get("WWW-Authenticate") == 'Bearer realm="shopmicro"',
          f"POST /v1/orders without a token -> 401 with a Bearer challenge ({st} {hdrs.get('WWW-Authenticate')})")
    TOKEN = ST.token("catalog:write orders:write orders:read")
    require(TOKEN.count(".") == 2, "stack.sh token prints a JWT")

    # 1. create two products, list them, place a 2-item order (the headline scenario covers an
    #    order of several lines: it is priced by one BatchGetProducts call)
    log("step 1: create two products, list them, place a 2-item order")
    st, _, prod, _ = req("POST", "/v1/products",
                          {"name": "Walkthrough mug", "description": "350 ml", "priceCents": 1299,
                           "stock": 10})
    require(st == 200 and isinstance(prod, dict) and prod.get("id"), f"POST /v1/products -> 200 with an id ({st} {prod})")
    pid = prod["id"]
    check(prod.get("priceCents") == "1299", f"priceCents is the string \"1299\" ({prod.get('priceCents')!r})")
    st, _, lst, _ = req("GET", "/v1/products?page_size=50")
    check(st == 200 and any(p.get("id") == pid for p in (lst or {}).get("products", [])),
          f"GET /v1/products -> 200 and lists {pid}")
    st, _, got, _ = req("GET", f"/v1/products/{pid}")
    check(st == 200 and got.get("name") == "Walkthrough mug", f"GET /v1/products/{{id}} -> 200 ({st})")
    st, _, spoon, _ = req("POST", "/v1/products", {"name": "Walkthrough spoon", "priceCents": 450, "stock": 10})
    require(st == 200 and isinstance(spoon, dict) and spoon.get("id"), f"POST /v1/products (spoon) -> 200 ({st} {spoon})")
    order_body = {"customerId": "c1", "items": [{"productId": pid, "quantity": 2},
                                                {"productId": spoon["id"], "quantity": 1}]}
    st, _, order, _ = req("POST", "/v1/orders", order_body)
    require(st == 200 and order.get("id"), f"POST /v1/orders -> 200 ({st} {order})")
    check(order.get("status") == "ORDER_STATUS_PENDING" and order.get("totalCents") == "3048",
          f"order is PENDING with totalCents \"3048\" (2 x 1299 + 450) ({order})")
    # The first order also waits for the consumer groups to form.
    took = wait_confirmed(order["id"], 30)
    check(took is not None, f"the order becomes CONFIRMED (the saga) ({took and round(took, 2)} s)")
    st, _, o2, _ = req("GET", f"/v1/orders/{order['id']}")
    check(st == 200 and o2.get("status") == "ORDER_STATUS_CONFIRMED",
          f"GET /v1/orders/{{id}} -> 200 CONFIRMED ({st} {o2.get('status')})")
    before = counts()
    check(before == (1, 2, 2), f"orders/order_items/outbox rows = 1/2/2: OrderCreated, OrderConfirmed ({before})")

    # 2. kill catalog (SIGKILL: a crash), 8 orders in a row: slow (retries) then fast (breaker open)
    log("step 2: kill catalog; 8 orders in a row")
    stack("kill", "catalog")
    times, codes, bodies, waits = [], [], [], []
    for i in range(8):
        st, hdrs, js, dt = req("POST", "/v1/orders", order_body)
        waits.append(hdrs.get("Retry-After"))
        codes.append(st)
        times.append(dt)
        bodies.append(js)
        log(f"  order {i + 1}: {st} {dt * 1000:.1f} ms {json.dumps(js)[:120]}…{json.dumps(js)[-60:]}"
            f"{' Retry-After=' + hdrs['Retry-After'] if 'Retry-After' in hdrs else ''}")
    t_opened = time.monotonic()
    check(all(c == 503 for c in codes), f"all 8 orders -> 503 ({codes})")
    # Each order prices its two lines with one call, so each order is one failure for the breaker,
    # and the 5th (consecutive failures to open it) is order 5.
    texts = [json.dumps(b) for b in bodies]
    n_slow = next((i for i, t in enumerate(texts) if "circuit open" in t), len(texts))
    check(n_slow == 5, f"orders 1-{n_slow} were tried, then the breaker opened (5 such orders)")
    # What the client is told names the dependency and the request id, never gRPC's text with the
    # catalog's address or the attempts (those are in order.log: docs/gateway.md, "Security").
    check(all("order is unavailable (request " in t and "attempts=" not in t and "ipv4:" not in t
              and "127.0.0.1" not in t for t in texts),
          "all 8 name order and the request id, and nothing of the system")
    slow, fast = sorted(times[:n_slow]), times[n_slow:]
    # Full jitter draws each backoff from [0, window] (100 then 200 ms), so one order alone can be
    # quick: the median is checked, against the ~1 ms of a refusal.
    check(slow[len(slow) // 2] >= 0.020,
          f"median of the retried orders >= 20 ms ({slow[len(slow) // 2] * 1000:.1f} ms)")
    check(all(t < scaled(0.020) for t in fast),
          f"orders {n_slow + 1}-8 < {scaled(20):.0f} ms each ({[round(t * 1000, 1) for t in fast]} ms)")
    check(all("catalog unavailable: circuit open" in t for t in texts[n_slow:]),
          f"orders {n_slow + 1}-8 say \"catalog unavailable: circuit open\"")
    check(all("catalog unavailable" in t for t in texts), "all 8 say \"catalog unavailable\"")
    check(all(w is not None and 1 <= int(w) <= 10 for w in waits[n_slow:]),
          f"orders {n_slow + 1}-8 carry order's breaker cooldown as Retry-After 1-10 ({waits})")
    olog = read_log("order")
    n_retry = len(re.findall(r"BatchGetProducts failed \(attempt [12]/3\), retrying in \d+ms", olog))
    check(n_retry >= 2 * n_slow, f"order.log: >= {2 * n_slow} \"retrying in\" lines (2 per retried order): {n_retry}")
    check("breaker catalog: closed -> open after 5 consecutive failures" in olog,
          "order.log: \"breaker catalog: closed -> open after 5 consecutive failures\"")
    check(counts() == before, f"no orphan rows: orders/order_items/outbox unchanged ({counts()})")
    st, ups = readyz()
    check(ups.get("order", {}).get("breaker") == "closed",
          f"/readyz: the gateway's order breaker stays closed ({ups.get('order')})")

    # 3. start catalog, wait out the cooldown, the order succeeds and is CONFIRMED at once: the
    #    restarted catalog is the same static member of its consumer group, so it does not wait for
    #    the killed one's session to expire
    log("step 3: start catalog; wait out the 10 s cooldown; order again")
    stack("start", "catalog")
    left = 10.3 - (time.monotonic() - t_opened)
    if left > 0:
        time.sleep(left)
    st, _, js, dt = req("POST", "/v1/orders", order_body)
    log(f"  order: {st} {dt * 1000:.1f} ms {json.dumps(js)}")
    check(st == 200 and js.get("totalCents") == "3048", f"first order after the cooldown -> 200 ({st})")
    took = wait_confirmed(js.get("id"), 60) if st == 200 else None
    log(f"  CONFIRMED {took and round(took, 3)} s after CreateOrder's answer")
    check(took is not None and took <= scaled(5),
          f"... CONFIRMED within {scaled(5):.0f} s ({took and round(took, 2)} s)")
    olog = read_log("order")
    check("breaker catalog: open -> half-open after 10000ms cooldown" in olog, "order.log: \"open -> half-open\"")
    check("breaker catalog: half-open -> closed after 1 successful trial" in olog, "order.log: \"half-open -> closed\"")
    after = counts()
    check(after == (before[0] + 1, before[1] + 2, before[2] + 2),
          f"exactly one more order (2 items) and its 2 outbox rows ({after})")

    # 4. 10 x GET of a missing product: 404, the breaker stays closed
    log("step 4: 10 x GET of a missing product")
    missing = "00000000-0000-0000-0000-000000000000"
    codes = [req("GET", f"/v1/products/{missing}")[0] for _ in range(10)]
    check(codes == [404] * 10, f"10 x GET /v1/products/{missing} -> 404 ({codes})")
    st, ups = readyz()
    check(st == 200 and ups.get("catalog", {}).get("breaker") == "closed",
          f"/readyz 200, catalog breaker closed ({st} {ups.get('catalog')})")
    st, _, _, _ = req("GET", f"/v1/products/{pid}")
    check(st == 200, f"GET of the real product still 200 ({st})")

    # 5. pause catalog: a GET with Grpc-Timeout: 2S -> 504 at ~2 s for a product the gateway has
    # never read; the mug, read in step 4, is answered from the stale cache (200 + the stale headers)
    log("step 5: pause catalog; GET with Grpc-Timeout: 2S")
    stack("pause", "catalog")
    try:
        st, _, js, dt = req("GET", f"/v1/products/{spoon['id']}", headers={"Grpc-Timeout": "2S"})
        log(f"  GET spoon: {st} {dt * 1000:.0f} ms {json.dumps(js)}")
        check(st == 504, f"GET while catalog is paused -> 504 ({st})")
        check(1.9 <= dt <= scaled(2.6), f"... at about 2 s ({dt:.3f} s)")
        st, hs, js, dt = req("GET", f"/v1/products/{pid}", headers={"Grpc-Timeout": "2S"})
        hs = {k.lower(): v for k, v in hs.items()}
        stale = {k: hs.get(k) for k in ("x-shopmicro-stale", "warning", "cache-status", "age")}
        log(f"  GET mug: {st} {dt * 1000:.0f} ms {stale} {json.dumps(js)}")
        check(st == 200 and isinstance(js, dict) and js.get("id") == pid and hs.get("x-shopmicro-stale") == "true",
              f"GET of the mug read before -> 200 marked stale ({st} {stale})")
        check((hs.get("cache-status") or "").startswith("shopmicro-gateway; fwd=stale; fwd-status=504"),
              f"... Cache-Status says it stands in for a 504 ({hs.get('cache-status')})")
    finally:
        stack("resume", "catalog")
    ok = wait_for(lambda: req("GET", f"/v1/products/{pid}")[0] == 200, 5, 0.2)
    check(ok, "after resume: GET -> 200")
    log(f"walkthrough took {time.monotonic() - t_start:.1f} s")


def main():
    global ARGS, ST, GW_PORT, GW_ADMIN_PORT
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH",
                    help="a binary that must exist (the build's catalog, order, gateway)")
    ap.add_argument("--keep", action="store_true")
    ARGS = ap.parse_args()
    for b in ARGS.bin:
        name, _, path = b.partition("=")
        if not (path and os.access(path, os.X_OK)):
            log(f"FAIL binary {name} not built: {path!r}")
            return 1
    ST = IsolatedStack(ARGS.stack, ARGS.build_dir, "shopmicro-walkthrough.",
                       echo=lambda text: print(text, flush=True))
    GW_PORT, GW_ADMIN_PORT = ST.port("gateway"), ST.port("gateway-admin")
    def on_signal(sig, _frame):  # ctest's timeout or Ctrl-C: still tear the stack down
        FAILURES.append(f"killed by signal {sig}")
        raise SystemExit(1)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log(f"run dir {ST.run_dir}; ports pg {ST.port('postgres')} catalog {ST.port('catalog')} "
        f"order {ST.port('order')} gateway {GW_PORT}")
    crashed = None
    try:
        walkthrough()
    except SystemExit:
        pass
    except Exception as e:  # a broken step must still tear the stack down
        crashed = e
        FAILURES.append(f"exception: {e!r}")
    finally:
        log("teardown: stack.sh down")
        down = ST.teardown(bool(FAILURES), ("catalog", "order", "gateway"), ARGS.keep, log)
        if down:
            FAILURES.append(down)
    if crashed:
        raise crashed
    if FAILURES:
        log(f"{len(FAILURES)} check(s) failed: " + "; ".join(FAILURES))
        return 1
    log("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
