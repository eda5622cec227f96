#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Browser test: the gateway's live resilience page in a real headless Chromium.

Debian's chromium, driven by chromedriver through python3-selenium, loads
GET /debug/resilience on the admin port (GATEWAY_ADMIN_LISTEN) of a real gateway in front of
a real catalog and order service
(each on a fresh database of the project's Postgres, the fixture of
tests/interop/test_catalog_interop.py for the catalog), then:
  (the gateway verifies tokens: shopmicro-jwt makes a key in the temporary folder, the gateway
  gets its JWKS, and the product and the orders are sent with a token of the customer
  "live-page"; the GETs of the product are public and need none)

  * the page shows gateway/catalog and order/catalog closed, order's feed read
    cross-origin from order's admin port (GATEWAY_RESILIENCE_PEERS);
  * the catalog is killed with SIGKILL and GETs are driven through the gateway until its
    breaker for the catalog opens: the page must show it open within 2 s of the trip (the
    transition's time in the feed against the moment the page's card changed, recorded
    in the page by a MutationObserver); orders are driven until order's own breaker for
    the catalog opens, which the page shows too; a screenshot is taken;
  * the catalog is restarted on the same port: after the cooldown the trial closes the
    breaker and the page must show it closed, with the decisions (retry, give-up,
    rejection) in its table and the three transitions on its timeline; a second
    screenshot.

Screenshots go to the test's temporary folder (kept and printed when the test fails);
--screenshot PATH also copies the outage screenshot there, and --warmup S drives S seconds of
traffic before the kill (docs/img/resilience-page.png: --warmup 20).

Exit status: 0 passed, 1 failed, 77 skipped (only when /usr/bin/chromium is not
installed; said loudly). Usage (ctest passes the options, tests/browser/CMakeLists.txt):
  test_resilience_page.py --gateway G --catalog C --order O --proto-dir proto [--jwt-tool J]
                          [--screenshot P]
(--jwt-tool: shopmicro-jwt; default: the one beside the gateway binary, as the build tree has it.)
Environment: SHOPMICRO_PG_PORT, SVC_TEST_TIMEOUT_MULTIPLIER, as for the interop tests.
"""

import argparse
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
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import test_catalog_interop as base  # noqa: E402  pylint: disable=wrong-import-position
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import browser  # noqa: E402  pylint: disable=wrong-import-position
from browser import open_browser, skip_without_chromium  # noqa: E402  pylint: disable=wrong-import-position
COOLDOWN_MS = 3000       # both breakers' cooldown: the recovery is quick to watch
OPEN_WITHIN_MS = 2000    # the page must show a trip this soon
LISTENING = re.compile(r'msg="listening on (\S+)')
ADMIN_PORT = re.compile(r"admin port bound to \S+ \(port (\d+)\)")
ISSUER = "resilience-page"   # the gateway's GATEWAY_JWT_ISSUER and the token's iss
CUSTOMER = "live-page"       # the token's sub, and so the orders' customer


def scaled(seconds):
    return base.scaled(seconds)


def say(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=10.0, token=None):
    """(status, parsed JSON or text, headers) of one request; HTTP errors included."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=scaled(timeout)) as r:
            status, raw, headers = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, raw, headers = e.code, e.read(), e.headers
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text), headers
    except ValueError:
        return status, text, headers


class Proc:
    """One service binary, its environment and log file."""

    def __init__(self, name, binary, env, tmp):
        self.name, self.binary, self.env = name, binary, env
        self.log_path = os.path.join(tmp, name + ".log")
        self.proc = None

    def start(self, timeout=20.0):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
                [self.binary], env=dict(os.environ, **self.env), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT)
        return self.wait_log(LISTENING, timeout)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, rx, timeout):
        until = time.monotonic() + scaled(timeout)
        while time.monotonic() < until:
            m = rx.search(self.log())
            if m:
                return m
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited (%s) during start-up:\n%s"
                                   % (self.name, self.proc.returncode, self.log()[-4000:]))
            time.sleep(0.05)
        raise RuntimeError("%s: no %r in its log within %.0f s" % (self.name, rx.pattern, timeout))

    def stop(self):
        """SIGTERM; the exit status (None: it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=scaled(20))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class Stack:
    """catalog (the interop fixture: database, process, restart on its port), order on a
    database of its own pointed at it, and the gateway in front of both."""

    def __init__(self, args, tmp):
        self.tmp = tmp
        self.catalog_port = free_port()
        self.catalog = base.Fixture(args.catalog, args.proto_dir, extra_env={
            "CATALOG_LISTEN": "127.0.0.1:%d" % self.catalog_port,
            "CATALOG_KAFKA_BROKERS": "none"})
        self.order_db = "resilience_page_order_%d_%s" % (os.getpid(), uuid.uuid4().hex[:8])
        self.order_db_made = False
        self.order = self.gateway = None
        self.args = args
        self.base_url = self.admin_url = self.token = None

    def make_token(self):
        """A signing key and its JWKS in the temporary folder; the token the writes carry."""
        key, jwks = os.path.join(self.tmp, "signing-key.pem"), os.path.join(self.tmp, "jwks.json")
        tool = self.args.jwt_tool
        subprocess.run([tool, "keygen", "--key", key, "--jwks", jwks], check=True,
                       stdout=subprocess.DEVNULL)
        self.token = subprocess.run(
            [tool, "sign", "--key", key, "--iss", ISSUER, "--aud", "shopmicro-gateway",
             "--sub", CUSTOMER, "--scope", "catalog:write orders:write", "--ttl", "3600"],
            check=True, capture_output=True, text=True).stdout.strip()
        return jwks

    def start(self):
        c = self.catalog
        c.generate_stubs()
        c.create_db()
        c.start()
        c.psql('CREATE DATABASE "%s"' % self.order_db)
        self.order_db_made = True
        order_port = free_port()
        self.order = Proc("order", self.args.order, {
            "ORDER_LISTEN": "127.0.0.1:%d" % order_port,
            "ORDER_DB_DSN": "host=127.0.0.1 port=%s dbname=%s user=postgres"
                            % (c.pg_port, self.order_db),
            "ORDER_CATALOG_ADDR": "127.0.0.1:%d" % self.catalog_port,
            "ORDER_CATALOG_BREAKER_COOLDOWN_MS": str(COOLDOWN_MS),
            "ORDER_KAFKA_BROKERS": "none", "ORDER_ADMIN_LISTEN": "127.0.0.1:0",
            "ORDER_LOG_LEVEL": "info"}, self.tmp)
        self.order.start()
        admin = int(self.order.wait_log(ADMIN_PORT, 5).group(1))
        gw_port, gw_admin = free_port(), free_port()
        jwks = self.make_token()
        self.gateway = Proc("gateway", self.args.gateway, {
            "GATEWAY_JWKS_FILE": jwks, "GATEWAY_JWT_ISSUER": ISSUER,
            "GATEWAY_JWT_AUDIENCE": "shopmicro-gateway",
            "GATEWAY_LISTEN": "127.0.0.1:%d" % gw_port,
            "GATEWAY_ADMIN_LISTEN": "127.0.0.1:%d" % gw_admin,
            "GATEWAY_CATALOG_ADDR": "127.0.0.1:%d" % self.catalog_port,
            "GATEWAY_ORDER_ADDR": "127.0.0.1:%d" % order_port,
            "GATEWAY_THREADS": "2", "GATEWAY_LOCK_DIR": self.tmp,
            "GATEWAY_BREAKER_COOLDOWN_MS": str(COOLDOWN_MS),
            "GATEWAY_STALE_READS": "off",   # every GET really reaches the breaker
            "GATEWAY_RESILIENCE_PEERS": "order=http://127.0.0.1:%d" % admin}, self.tmp)
        self.gateway.start()
        self.base_url = "http://127.0.0.1:%d" % gw_port
        self.admin_url = "http://127.0.0.1:%d" % gw_admin   # the page and its feed

    def kill_catalog(self):
        c = self.catalog
        c.channel.close()
        c.channel = None
        c.proc.kill()
        c.proc.wait()
        c.proc = None

    def restart_catalog(self):
        self.catalog.log_path = os.path.join(self.catalog.tmp, "catalog-restarted.log")
        self.catalog.start()

    def close(self):
        bad = []
        for p in (self.gateway, self.order):
            if p is not None and p.stop() != 0:
                bad.append(p.name)
        self.catalog.close()
        if self.order_db_made:
            self.catalog.psql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % self.order_db,
                              check=False)
        return bad


# ---- the browser ---------------------------------------------------------------------

# Records, in the page, when each card first showed each state (Date.now(), ms).
WATCH_JS = """
window.__seen = {};
const note = () => {
  for (const a of document.querySelectorAll('article[data-upstream]')) {
    const k = a.dataset.upstream + ':' + a.dataset.state;
    if (!(k in window.__seen)) window.__seen[k] = Date.now();
  }
};
new MutationObserver(note).observe(document.body,
  {subtree: true, childList: true, attributes: true, attributeFilter: ['data-state']});
note();
"""

CARD_JS = """
const a = document.querySelector(`article[data-upstream="${arguments[0]}"]`);
if (!a) return null;
return {state: a.dataset.state,
        badge: a.querySelector('[data-role=state]').textContent,
        axis: a.querySelector('[data-role=timeline] .axis').textContent,
        decisions: [...a.querySelectorAll('tr[data-decision]')].map(
          (r) => r.dataset.decision + ':' + r.dataset.reason)};
"""


def wait_for(what, fn, timeout):
    return browser.wait_for(what, fn, scaled(timeout))


def card(driver, key):
    return driver.execute_script(CARD_JS, key)


def card_in(driver, key, state):
    c = card(driver, key)
    return c if c and c["state"] == state else None


# ---- the test ------------------------------------------------------------------------

class PageTest:
    def __init__(self, stack, driver, tmp, screenshot):
        self.s, self.d, self.tmp, self.screenshot = stack, driver, tmp, screenshot

    def feed(self):
        return http("GET", self.s.admin_url + "/debug/resilience.json")[1]

    def gateway_catalog(self):
        return self.feed()["resilience"]["upstreams"][0]

    def load(self):
        self.d.get(self.s.admin_url + "/debug/resilience")
        wait_for("gateway/catalog closed on the page",
                 lambda: card_in(self.d, "gateway/catalog", "closed"), 10)
        wait_for("order's feed (cross-origin) on the page",
                 lambda: card_in(self.d, "order/catalog", "closed"), 10)
        wait_for("gateway/order on the page", lambda: card_in(self.d, "gateway/order", "closed"), 5)
        self.d.execute_script(WATCH_JS)
        say("page loaded: gateway/catalog, gateway/order and order/catalog are closed")

    def product(self):
        st, p, _ = http("POST", self.s.base_url + "/v1/products",
                        {"name": "Live page mug", "priceCents": 1200, "stock": 100},
                        token=self.s.token)
        assert st == 200, "create product: %s %s" % (st, p)
        return p["id"]

    def trip(self, pid):
        """GETs until the gateway's catalog breaker opens; the trip's wall-clock ms."""
        self.s.kill_catalog()
        say("catalog killed (SIGKILL)")
        until = time.monotonic() + scaled(20)
        while self.gateway_catalog()["breaker"]["state"] != "open":
            assert time.monotonic() < until, "the gateway's breaker did not open"
            http("GET", "%s/v1/products/%s" % (self.s.base_url, pid))
        opened = [t for t in self.gateway_catalog()["breaker"]["transitions"] if t["to"] == "open"]
        say("gateway/catalog tripped: %s" % opened[-1]["why"])
        return opened[-1]["at_ms"]

    def shown_open_in_time(self, tripped_ms):
        seen = wait_for("gateway/catalog shown open",
                        lambda: self.d.execute_script("return window.__seen['gateway/catalog:open']"),
                        OPEN_WITHIN_MS / 1000 + 3)
        late = seen - tripped_ms
        limit = scaled(OPEN_WITHIN_MS / 1000) * 1000  # the page polls; a sanitizer build answers slower
        say("the page showed gateway/catalog open %d ms after the trip" % late)
        assert late <= limit, "shown %d ms after the trip (limit %d)" % (late, limit)
        c = card(self.d, "gateway/catalog")
        assert c["badge"] == "open", c

    def trip_order(self, pid):
        order = {"customerId": CUSTOMER, "items": [{"productId": pid, "quantity": 1}]}
        until = time.monotonic() + scaled(20)
        while not card_in(self.d, "order/catalog", "open"):
            assert time.monotonic() < until, "order's breaker for the catalog not shown open"
            http("POST", self.s.base_url + "/v1/orders", order, token=self.s.token)
            time.sleep(0.05)
        say("order/catalog shown open too")

    def traffic(self, pid, seconds):
        """Reads and orders for a while (the rates and the rejections fill in)."""
        order = {"customerId": CUSTOMER, "items": [{"productId": pid, "quantity": 1}]}
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            http("GET", "%s/v1/products/%s" % (self.s.base_url, pid))
            http("POST", self.s.base_url + "/v1/orders", order, token=self.s.token)
            time.sleep(0.05)

    def shot(self, name):
        path = os.path.join(self.tmp, name)
        self.d.save_screenshot(path)
        say("screenshot %s" % path)
        return path

    def recover(self, pid):
        self.s.restart_catalog()
        say("catalog restarted on its port")
        until = time.monotonic() + scaled(COOLDOWN_MS / 1000 + 15)
        while self.gateway_catalog()["breaker"]["state"] != "closed":
            assert time.monotonic() < until, "the gateway's breaker did not close"
            http("GET", "%s/v1/products/%s" % (self.s.base_url, pid))
            time.sleep(0.1)
        c = wait_for("gateway/catalog shown closed again",
                     lambda: card_in(self.d, "gateway/catalog", "closed"), 3)
        say("gateway/catalog shown closed again: %s" % c["axis"])
        assert "half-open → closed" in c["axis"], c
        for want in ("retry:unavailable", "reject:breaker-open"):
            assert want in c["decisions"], (want, c["decisions"])
        assert any(d.startswith("fail:") for d in c["decisions"]), c["decisions"]

    def run(self, warmup):
        self.load()
        pid = self.product()
        self.traffic(pid, warmup)
        self.shown_open_in_time(self.trip(pid))
        self.trip_order(pid)
        self.traffic(pid, 1.5)
        outage = self.shot("outage.png")
        if self.screenshot:
            shutil.copy(outage, self.screenshot)
            say("copied to %s" % self.screenshot)
        self.recover(pid)
        self.shot("recovered.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--order", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--jwt-tool", help="shopmicro-jwt (default: beside --gateway)")
    ap.add_argument("--screenshot", help="also copy the outage screenshot here")
    ap.add_argument("--warmup", type=float, default=1.0,
                    help="seconds of traffic before the kill (docs/img: 20, a fuller timeline)")
    args = ap.parse_args()
    if not args.jwt_tool:
        args.jwt_tool = os.path.join(os.path.dirname(os.path.abspath(args.gateway)), "shopmicro-jwt")
    skip_without_chromium("the live resilience page")
    tmp = tempfile.mkdtemp(prefix="resilience-page-")
    stack = Stack(args, tmp)
    driver = None
    ok = False
    try:
        stack.start()
        say("stack up: gateway %s, logs in %s" % (stack.base_url, tmp))
        driver = open_browser(tmp)
        PageTest(stack, driver, tmp, args.screenshot).run(args.warmup)
        ok = True
    finally:
        if driver is not None:
            if not ok:
                try:
                    driver.save_screenshot(os.path.join(tmp, "failure.png"))
                except Exception:  # pylint: disable=broad-except
                    pass
            driver.quit()
        bad = stack.close()
        if bad:
            say("did not exit 0 on SIGTERM: %s" % ", ".join(bad))
            ok = False
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say("FAILED; logs and screenshots kept in %s" % tmp)
    say("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
