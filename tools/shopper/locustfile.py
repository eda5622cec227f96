"""tools/shopper/locustfile.py: shoppers for a running ShopMicro, driven by Locust (PyPI, pinned in
requirements.txt beside this file).

One user class, Shopper. Each simulated shopper is a customer with a bearer token of its own and
does what a shopper does, through the gateway's REST API (docs/gateway.md):

  browse    (weight 5)  GET /v1/products?page_size=10, sometimes the next page (page_token), then
                        GET /v1/products/{id} of one product of the page
  checkout  (weight 2)  POST /v1/orders with an Idempotency-Key, the same POST again with the same
                        key (a client retrying after a lost answer: it must get the same order
                        back, the same id and total, or the request counts as a failure), a
                        pause, then GET /v1/orders/{id} (the order, PENDING, CONFIRMED or
                        CANCELLED by the stock saga)

Every answer that is not what the shop promises is a failure in Locust's statistics, with its
reason: the HTTP status, the error body's message (request ids folded to "request …", so that one
kind of failure is one line) and the Retry-After of a 429 or 503. A shopper told to wait
(Retry-After) waits that long before its next action, at most 60 s; nothing raises out of a task.

Pace. SHOPPER_RATE is the requests per second of the whole run. Each shopper's wait after an
action is computed from it: an action that made k requests is followed by a pause that makes its
start-to-start interval k x users / SHOPPER_RATE on average (drawn uniformly from 0.5x to 1.5x of
that, less the time the action took), so the run makes SHOPPER_RATE requests a second whatever the
mix, as long as there are enough users that the pauses stay positive. The number of users sets
the think time: unless -u (--users, LOCUST_USERS) says otherwise, the run has
ceil(SHOPPER_RATE x SHOPPER_THINK_S / 2) of them (an action makes about 2 requests), all started
at once, so that a shopper acts about every SHOPPER_THINK_S seconds.

Settings (environment; Locust's own options as usual, e.g. --host, -u, -t, or LOCUST_HOST):
  SHOPPER_TOKENS        bearer tokens of the customers (orders:write orders:read), separated by
                        white space; shopper n uses token n mod their number. Or:
  SHOPPER_TOKENS_FILE   a file with one token per line, read again when it changes
  SHOPPER_ADMIN_TOKEN   (optional) a catalog:write token (or SHOPPER_ADMIN_TOKEN_FILE, which may be
                        missing): at the
                        start, when the catalog has fewer than SHOPPER_MIN_PRODUCTS products in
                        stock, the missing ones are created (stock SHOPPER_SEED_STOCK each)
  SHOPPER_RATE          requests per second of the whole run (default 2)
  SHOPPER_THINK_S       mean seconds between one shopper's actions (default 3): sets the users
  SHOPPER_MIN_PRODUCTS  12       SHOPPER_SEED_STOCK 1000000
  SHOPPER_STATS_FILE    (optional) where to write the run's statistics as JSON, every 5 s and once
                        more at the end, with Locust's own figures: {"total": requests, failures,
                        p50/p95 ms, requests/s; "requests": Locust's entry of each request name;
                        "errors": each failure's reason and count; "orders": placed, replays
                        answered with the same order, reads and the statuses read}. alive.py
                        beside this file is the compose and Kubernetes health check on it.
There is no default token: without one the run stops at once and says why.
"""
import base64
import itertools
import json
import logging
import math
import os
import random
import re
import threading
import time
import uuid

import gevent
import requests
from locust import HttpUser, events, task

log = logging.getLogger("shopper")

PAGE_SIZE = 10
STATUSES = ("ORDER_STATUS_PENDING", "ORDER_STATUS_CONFIRMED", "ORDER_STATUS_CANCELLED")
MAX_BACKOFF_S = 60.0
NAMES = ("Mug", "Lamp", "Kettle", "Notebook", "Teapot", "Scarf", "Candle", "Bowl", "Chair",
         "Umbrella", "Backpack", "Clock", "Vase", "Blanket", "Pen", "Bottle")


def setting(name, default):
    v = os.environ.get(name, "").strip()
    return v if v else default


def number(name, default, kind=float, least=0):
    raw = setting(name, str(default))
    try:
        v = kind(raw)
    except ValueError:
        raise SystemExit(f"shopper: {name}={raw!r} is not a number")
    if v < least or (kind is float and v <= 0):
        raise SystemExit(f"shopper: {name}={raw!r} is out of range")
    return v


RATE = number("SHOPPER_RATE", 2.0)
THINK_S = number("SHOPPER_THINK_S", 3.0)
# Requests of an action on average (browse 2 or 3, checkout 3, weighted 5:2: about 2.4).
REQUESTS_PER_ACTION = 2
MIN_PRODUCTS = number("SHOPPER_MIN_PRODUCTS", 12, int, 1)
SEED_STOCK = number("SHOPPER_SEED_STOCK", 1000000, int, 1)


def claims(token):
    """The payload of a compact JWS, unverified (only to say what a token is), or None."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        return None
    try:
        pad = "=" * (-len(parts[1]) % 4)
        return json.loads(base64.urlsafe_b64decode(parts[1] + pad))
    except (ValueError, UnicodeDecodeError):
        return None


class Tokens:
    """The customers' tokens, from SHOPPER_TOKENS or SHOPPER_TOKENS_FILE (read again when its
    mtime or size changes, at most once a second)."""

    def __init__(self, env_name, required):
        self.env_name, self.required = env_name, required
        self.file = setting(env_name + "_FILE", "")
        self.inline = setting(env_name, "").split()
        self.tokens, self.sig, self.checked = [], None, 0.0
        self.lock = threading.Lock()
        self.refresh(force=True)

    def refresh(self, force=False):
        if not self.file:
            self.tokens = self.inline
            return
        now = time.monotonic()
        if not force and now - self.checked < 1.0:
            return
        with self.lock:
            self.checked = now
            try:
                st = os.stat(self.file)
                sig = (st.st_mtime_ns, st.st_size, st.st_ino)
                if sig != self.sig:
                    with open(self.file, encoding="ascii") as f:
                        self.tokens = [l.strip() for l in f if l.strip() and not l.startswith("#")]
                    self.sig = sig
            except (OSError, UnicodeDecodeError) as e:
                if force and (self.required or not isinstance(e, FileNotFoundError)):
                    raise SystemExit(f"shopper: {self.env_name}_FILE={self.file}: {e}")
                if force:  # an optional token that is not there (a Secret without the key)
                    return
                log.warning("cannot read %s (%s): keeping the tokens read before", self.file, e)

    def get(self, n):
        self.refresh()
        return self.tokens[n % len(self.tokens)] if self.tokens else ""

    def problems(self, scopes):
        """Why these tokens cannot work (placeholders, not a JWT, expired, missing a scope)."""
        out = []
        if not self.tokens:
            out.append(f"no token: set {self.env_name} or {self.env_name}_FILE")
        for i, t in enumerate(self.tokens):
            c = claims(t)
            if c is None:
                out.append(f"{self.env_name} #{i + 1} is not a JWT ({t[:12]}…): a placeholder?")
                continue
            have = set(str(c.get("scope", "")).split()) | set(c.get("scp") or [])
            missing = [s for s in scopes if s not in have]
            if missing:
                out.append(f"{self.env_name} #{i + 1} (sub {c.get('sub')}) lacks the scope {' '.join(missing)}")
            if isinstance(c.get("exp"), (int, float)) and c["exp"] <= time.time():
                out.append(f"{self.env_name} #{i + 1} (sub {c.get('sub')}) has expired")
        return out


CUSTOMERS = Tokens("SHOPPER_TOKENS", required=True)
ADMIN = Tokens("SHOPPER_ADMIN_TOKEN", required=False)

# What the shoppers know of the catalog: the products of the pages they read (id -> stock).
CATALOG = {}
CATALOG_LOCK = threading.Lock()
# What happened to the orders, for the summary at the end.
TALLY = {"placed": 0, "replayed_same": 0, "read": 0}
STATUS_SEEN = {}


def remember(products):
    with CATALOG_LOCK:
        for p in products:
            if p.get("id"):
                CATALOG[p["id"]] = int(p.get("stock") or 0)


def reason(resp):
    """A failure's reason: status, the error body's message, the Retry-After."""
    if not resp.status_code:
        return f"no answer: {type(resp.error).__name__}: {resp.error}"
    try:
        msg = str((resp.json() or {}).get("message", ""))
    except (ValueError, AttributeError):
        msg = resp.text[:200]
    msg = re.sub(r"\(request [0-9a-f]+\)", "(request …)", msg)
    ra = resp.headers.get("Retry-After")
    return f"HTTP {resp.status_code}: {msg}" + (f" (Retry-After: {ra})" if ra else "")


def retry_after_s(resp):
    try:
        return min(MAX_BACKOFF_S, float(resp.headers.get("Retry-After", "")))
    except ValueError:
        return 0.0


@events.init.add_listener
def check_settings(environment, **_):
    problems = CUSTOMERS.problems(["orders:write", "orders:read"])
    if ADMIN.tokens:
        # An expired admin token only means no products are created (a restart after it ran out).
        for p in ADMIN.problems(["catalog:write"]):
            (log.warning if p.endswith("has expired") else problems.append)(p)
    if problems:
        for p in problems:
            log.error("%s", p)
        raise SystemExit(2)
    opts = environment.parsed_options
    if opts is not None and opts.num_users is None:
        # No -u: as many shoppers as the rate and the think time need, all started at once.
        opts.num_users = max(1, math.ceil(RATE * THINK_S / REQUESTS_PER_ACTION))
        opts.spawn_rate = opts.num_users
    log.info("%d customer token(s), %s, %.3g requests/s in all", len(CUSTOMERS.tokens),
             "an admin token to stock the catalog" if ADMIN.tokens else "no admin token", RATE)


@events.test_start.add_listener
def stock_the_catalog(environment, **_):
    """Enough products in stock before the first shopper comes: created with the admin token when
    there are fewer than SHOPPER_MIN_PRODUCTS (not counted in the statistics)."""
    base = environment.host.rstrip("/")
    try:
        r = requests.get(f"{base}/v1/products", params={"page_size": 200}, timeout=10)
        r.raise_for_status()
        products = r.json().get("products", [])
    except (requests.RequestException, ValueError) as e:
        log.error("cannot list the products at %s: %s", base, e)
        products = []
    remember(products)
    in_stock = [p for p in products if int(p.get("stock") or 0) > 0]
    missing = MIN_PRODUCTS - len(in_stock)
    if missing > 0 and ADMIN.tokens and not ADMIN.problems(["catalog:write"]):
        head = {"Authorization": f"Bearer {ADMIN.get(0)}"}
        created = 0
        for _ in range(missing):
            body = {"name": f"{random.choice(NAMES)} {uuid.uuid4().hex[:6]}",
                    "description": "stocked by the shopper load generator",
                    "price_cents": random.randrange(199, 9999), "stock": SEED_STOCK}
            try:
                r = requests.post(f"{base}/v1/products", json=body, headers=head, timeout=10)
                if r.status_code != 200:
                    log.error("creating a product: HTTP %d %s", r.status_code, r.text[:200])
                    break
                remember([r.json()])
                created += 1
            except (requests.RequestException, ValueError) as e:
                log.error("creating a product: %s", e)
                break
        log.info("the catalog had %d product(s) in stock; created %d", len(in_stock), created)
    elif missing > 0:
        log.warning("the catalog has %d product(s) in stock (fewer than %d) and there is no valid "
                    "SHOPPER_ADMIN_TOKEN to create more", len(in_stock), MIN_PRODUCTS)


STATS_FILE = setting("SHOPPER_STATS_FILE", "")
STATS_EVERY_S = 5
RUN = {}


def write_stats():
    """SHOPPER_STATS_FILE, replaced atomically: Locust's figures of the run so far."""
    runner = RUN.get("env") and RUN["env"].runner
    if not STATS_FILE or runner is None:
        return
    st = runner.stats
    total = st.total
    RUN["users"] = max(RUN.get("users", 0), runner.user_count)
    doc = {
        "total": {"requests": total.num_requests, "failures": total.num_failures,
                  "p50_ms": total.get_response_time_percentile(0.5),
                  "p95_ms": total.get_response_time_percentile(0.95),
                  "requests_per_s": total.total_rps, "users": RUN["users"], "rate": RATE},
        # StatsEntry.serialize, not RequestStats.serialize_stats: that one resets each entry.
        "requests": [e.serialize() for e in st.entries.values() if e.num_requests or e.num_failures],
        "errors": sorted(st.serialize_errors().values(), key=lambda e: -e["occurrences"]),
        "orders": dict(TALLY, statuses=dict(STATUS_SEEN)),
    }
    tmp = f"{STATS_FILE}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, STATS_FILE)
    except OSError as e:
        log.warning("cannot write %s: %s", STATS_FILE, e)


def stats_writer():
    while True:
        write_stats()
        gevent.sleep(STATS_EVERY_S)


@events.test_start.add_listener
def start_stats_writer(environment, **_):
    RUN["env"] = environment
    if STATS_FILE:
        RUN["writer"] = gevent.spawn(stats_writer)


@events.quit.add_listener
def summary(exit_code, **_):
    # After the users have stopped: the figures are final.
    if RUN.get("writer") is not None:
        RUN["writer"].kill(block=False)
    write_stats()
    seen = ", ".join(f"{k.replace('ORDER_STATUS_', '')} {v}" for k, v in sorted(STATUS_SEEN.items()))
    log.info("%d order(s) placed, %d replay(s) answered with the same order, %d read (%s)",
             TALLY["placed"], TALLY["replayed_same"], TALLY["read"], seen or "none")


class Shopper(HttpUser):
    # Set by the run (--host / LOCUST_HOST); e.g. http://127.0.0.1:8080.
    host = None
    _numbers = itertools.count()

    def on_start(self):
        self.n = next(self._numbers)
        self.requests_in_action = 0
        self.action_started = time.monotonic()
        self.backoff_until = 0.0
        # Spread the first actions over one interval, so that the users do not start in step.
        self.backoff_until = time.monotonic() + random.uniform(0, self.interval(1))

    def interval(self, k):
        users = max(1, self.environment.runner.user_count if self.environment.runner else 1)
        return k * users / RATE

    def wait_time(self):
        now = time.monotonic()
        pause = self.interval(max(1, self.requests_in_action)) * random.uniform(0.5, 1.5)
        pause = max(pause - (now - self.action_started), self.backoff_until - now, 0.0)
        self.requests_in_action = 0
        self.action_started = now + pause
        return pause

    def call(self, method, path, name, **kw):
        """One request, with the customer's token, as a context manager (catch_response)."""
        self.requests_in_action += 1
        headers = kw.pop("headers", {})
        headers["Authorization"] = f"Bearer {CUSTOMERS.get(self.n)}"
        return self.client.request(method, path, name=name, headers=headers, catch_response=True,
                                   timeout=10, **kw)

    def failed(self, resp, why=None):
        resp.failure(why or reason(resp))
        wait = retry_after_s(resp)
        if wait:
            self.backoff_until = max(self.backoff_until, time.monotonic() + wait)

    def json_of(self, resp):
        try:
            return resp.json()
        except ValueError:
            self.failed(resp, f"HTTP {resp.status_code}: the body is not JSON: {resp.text[:80]!r}")
            return None

    @task(5)
    def browse(self):
        with self.call("GET", "/v1/products", "GET /v1/products", params={"page_size": PAGE_SIZE}) as r:
            if r.status_code != 200:
                return self.failed(r)
            page = self.json_of(r)
            if page is None:
                return
            r.success()
        products = page.get("products", [])
        token = page.get("nextPageToken", "")
        if token and random.random() < 0.4:
            with self.call("GET", "/v1/products", "GET /v1/products?page_token",
                           params={"page_size": PAGE_SIZE, "page_token": token}) as r:
                if r.status_code == 200 and (nxt := self.json_of(r)) is not None:
                    products = nxt.get("products", []) or products
                    r.success()
                elif r.status_code != 200:
                    self.failed(r)
        remember(products)
        if not products:
            return
        pid = random.choice(products)["id"]
        with self.call("GET", f"/v1/products/{pid}", "GET /v1/products/{id}") as r:
            if r.status_code != 200:
                return self.failed(r)
            p = self.json_of(r)
            if p is None:
                return
            if p.get("id") != pid:
                return self.failed(r, f"asked for product {pid}, got {p.get('id')}")
            remember([p])
            r.success()

    @task(2)
    def checkout(self):
        with CATALOG_LOCK:
            choice = [pid for pid, stock in CATALOG.items() if stock > 0]
        if not choice:
            # Nothing to buy (an empty catalog): look at the catalog instead.
            return self.browse()
        items = [{"product_id": pid, "quantity": random.randint(1, 2)}
                 for pid in random.sample(choice, k=min(len(choice), random.choice((1, 1, 2, 3))))]
        body = {"items": items}
        headers = {"Idempotency-Key": f"shopper-{uuid.uuid4().hex}"}
        first = None
        with self.call("POST", "/v1/orders", "POST /v1/orders", json=body, headers=dict(headers)) as r:
            if r.status_code == 200 and (o := self.json_of(r)) is not None:
                if o.get("id") and o.get("status") in STATUSES:
                    first = o
                    TALLY["placed"] += 1
                    r.success()
                else:
                    self.failed(r, f"an order without an id or with status {o.get('status')!r}")
            elif r.status_code != 200:
                self.failed(r)
        # The same request with the same key, as a client does when the first answer is lost: the
        # same order (id and total; its status may have moved on), never a second one. When the
        # first call failed, this is the retry that the key makes safe.
        with self.call("POST", "/v1/orders", "POST /v1/orders (replay)", json=body, headers=dict(headers)) as r:
            if r.status_code != 200:
                return self.failed(r)
            o = self.json_of(r)
            if o is None:
                return
            if first is not None and (o.get("id"), o.get("totalCents")) != (first["id"], first["totalCents"]):
                # One line per kind in the statistics; the ids in the log.
                log.warning("replay of key %s: order %s (%s cents), first answer %s (%s cents)",
                            headers["Idempotency-Key"], o.get("id"), o.get("totalCents"),
                            first["id"], first["totalCents"])
                return self.failed(r, "the replay with the same Idempotency-Key answered another order "
                                      "than the first call")
            if o.get("status") not in STATUSES:
                return self.failed(r, f"the replay answered status {o.get('status')!r}")
            first = first or o
            TALLY["replayed_same"] += 1
            r.success()
        # A look at the confirmation page a moment later.
        time.sleep(random.uniform(0.3, 1.5))
        with self.call("GET", f"/v1/orders/{first['id']}", "GET /v1/orders/{id}") as r:
            if r.status_code != 200:
                return self.failed(r)
            o = self.json_of(r)
            if o is None:
                return
            if o.get("id") != first["id"] or o.get("status") not in STATUSES:
                return self.failed(r, f"asked for order {first['id']}, got {o.get('id')} ({o.get('status')})")
            TALLY["read"] += 1
            STATUS_SEEN[o["status"]] = STATUS_SEEN.get(o["status"], 0) + 1
            r.success()
