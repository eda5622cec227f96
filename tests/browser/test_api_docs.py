#!/usr/bin/python3
"""`stack.sh api-docs` in Debian's headless Chromium: the page it writes (Swagger UI from PyPI and
the build's OpenAPI document) shows every operation of the document, and "Try it out" on
GET /v1/products reaches an isolated stack's gateway from the page's origin (CORS) and shows
its 200. Writes a screenshot (--screenshot).

usage: test_api_docs.py --stack deploy/local/stack.sh --build-dir BUILD [--screenshot PNG]
Exit status: 0 passed, 1 failed, 77 skipped (only when /usr/bin/chromium is not installed).
"""
import argparse
import functools
import http.server
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from browser import open_browser, skip_without_chromium, wait_for  # noqa: E402
from isolated_stack import IsolatedStack  # noqa: E402


def say(msg):
    print("[%s] api-docs: %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def serve(directory, port):
    """What `stack.sh api-docs` serves (python3's http.server), on a thread."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


OPS_JS = "return [...document.querySelectorAll('.opblock')].map(o => o.id);"
STATUS_JS = """
const c = document.querySelector('#operations-catalog-CatalogService_ListProducts .live-responses-table tr.response .response-col_status');
return c ? c.textContent.trim() : null;
"""


def check_page(st, driver, args):
    page = os.path.join(st.run_dir, "api-docs")
    with open(os.path.join(page, "openapi.json")) as f:
        doc = json.load(f)
    n_ops = sum(1 for item in doc["paths"].values() for m in item if m in ("get", "post", "put", "patch", "delete"))
    httpd = serve(page, st.port("api-docs"))
    try:
        driver.get("http://127.0.0.1:%d/" % st.port("api-docs"))
        ops = wait_for("the operations", lambda: (lambda o: o if len(o) >= n_ops else None)(driver.execute_script(OPS_JS)), 30)
        say("the page shows %d operations (the document has %d)" % (len(ops), n_ops))
        assert len(ops) == n_ops, ops
        # GET /v1/products: public, so "Try it out" needs no token.
        block = "operations-catalog-CatalogService_ListProducts"
        driver.execute_script("document.querySelector('#%s .opblock-summary-control').click()" % block)
        wait_for("Try it out", lambda: driver.execute_script("return !!document.querySelector('#%s .try-out__btn')" % block), 10)
        driver.execute_script("document.querySelector('#%s .try-out__btn').click()" % block)
        wait_for("Execute", lambda: driver.execute_script("return !!document.querySelector('#%s .execute')" % block), 10)
        driver.execute_script("document.querySelector('#%s .execute').click()" % block)
        status = wait_for("the live response", lambda: driver.execute_script(STATUS_JS), 20)
        say("Try it out: GET /v1/products answered %s through CORS from the page" % status)
        assert status == "200", "the page's request to the gateway got %r (CORS?)" % status
        if args.screenshot:
            driver.execute_script("window.scrollTo(0, 0)")
            driver.save_screenshot(args.screenshot)
            say("screenshot %s" % args.screenshot)
    finally:
        httpd.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--screenshot")
    args = ap.parse_args()
    skip_without_chromium("the API docs page")
    st = IsolatedStack(args.stack, args.build_dir, "shopmicro-api-docs.", echo=lambda t: print(t, flush=True))
    driver = None
    failure = None
    try:
        for step in (("pg-up",), ("start", "catalog", "gateway"), ("api-docs", "--no-serve")):
            if st.run(*step).returncode != 0:
                raise AssertionError("stack.sh %s failed" % " ".join(step))
        driver = open_browser(st.run_dir, size="1280,1400")
        check_page(st, driver, args)
    except Exception as e:  # pylint: disable=broad-except
        failure = "%s: %s" % (type(e).__name__, e)
    finally:
        if driver is not None:
            driver.quit()
        down = st.teardown(failure is not None, ("gateway",), say=say)
        failure = failure or down
    if failure:
        say("FAIL " + failure)
        return 1
    say("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
