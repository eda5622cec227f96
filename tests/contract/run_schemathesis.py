#!/usr/bin/python3
"""The contract test: Schemathesis (PyPI, tests/tools/requirements.txt) against a live gateway,
with the gateway's own OpenAPI document (GET /openapi.json) as the contract. An isolated stack
(tests/lib/isolated_stack.py: own run folder, Postgres and ports) runs catalog, order and the
gateway on a build tree's binaries; Schemathesis runs every operation through its phases
(coverage, fuzzing, stateful: positive and negative cases) with every check it has, for a
bounded time, as a caller holding every scope. Passes when Schemathesis reports no failure and
every service is still running afterwards. docs/gateway.md, "The OpenAPI document".

usage: run_schemathesis.py --stack deploy/local/stack.sh --build-dir BUILD --pyvenv PYVENV_SH
                           --venv VENV [--max-time SECONDS] [--keep]
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from isolated_stack import IsolatedStack, wait_http_ok  # noqa: E402

SERVICES = ("catalog", "order", "gateway")
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemathesis.toml")


def log(msg):
    print(f"contract: {msg}", flush=True)


def run_tool(cmd, env):
    """Runs cmd with its output passed through; returns (exit status, its summary: the text from
    the last "SUMMARY" line on)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    rc = p.wait()
    start = max((i for i, l in enumerate(lines) if "SUMMARY" in l), default=0)
    return rc, "".join(lines[start:])


def contract(st, args):
    for step in (("pg-up",), ("start", *SERVICES)):
        if st.run(*step).returncode != 0:
            return f"stack.sh {' '.join(step)} failed"
    base = f"http://127.0.0.1:{st.port('gateway')}"
    if not wait_http_ok(base + "/readyz", 30):
        return "the gateway was not ready within 30 s"
    token = st.token("catalog:write orders:write orders:read")
    cmd = [args.pyvenv, args.venv, "schemathesis", "--config-file", CONFIG, "run",
           base + "/openapi.json", "--url", base, "--header", f"Authorization: Bearer {token}",
           "--checks", "all", "--max-time", str(args.max_time), "--workers", "1", "--no-color"]
    for attempt in (1, 2):
        log(f"schemathesis for {args.max_time} s against {base} (config {os.path.relpath(CONFIG)})")
        rc, summary = run_tool(cmd, st.env)
        if rc == 0:
            break
        if "Failures:" in summary or "Errors:" not in summary or attempt == 2:
            return f"schemathesis exited {rc}: see its FAILURES (or Errors) above"
        # No failure of the API, only an error of the tool's own: one more run, said loudly.
        log("schemathesis reported an error of its own and no failure: running it once more")
    stopped = st.not_running(SERVICES)
    return f"after the run: {'; '.join(stopped)}" if stopped else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--pyvenv", required=True, help="tests/tools/pyvenv.sh")
    ap.add_argument("--venv", required=True)
    ap.add_argument("--max-time", type=int, default=60)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    # The API's own answers are under test, not the rate limiter's (test_gateway_authn has those):
    # unlimited, so that every generated request reaches the operation's logic.
    os.environ["GATEWAY_RATE_LIMITS"] = "off"
    st = IsolatedStack(args.stack, args.build_dir, "shopmicro-contract.", echo=lambda t: print(t, flush=True))
    log(f"run dir {st.run_dir}, gateway port {st.port('gateway')}")
    failure = None
    try:
        failure = contract(st, args)
    except Exception as e:  # a broken step must still tear the stack down
        failure = f"exception: {e!r}"
    finally:
        down = st.teardown(failure is not None, SERVICES, args.keep, log)
        failure = failure or down
    if failure:
        log(f"FAIL {failure}")
        return 1
    log("passed: no failure, every service still running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
