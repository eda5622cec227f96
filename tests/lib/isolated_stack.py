"""A stack started by deploy/local/stack.sh apart from a user's: its own run folder under $TMPDIR,
its own Postgres cluster, Kafka broker and RabbitMQ node, and a free port for every listener, on
a build tree's binaries. The tests that drive a whole stack (tests/walkthrough/walkthrough.py,
tests/contract/run_schemathesis.py, tests/deploy/test_shopper.py) start theirs with it, and wait
for a listener with wait_http_ok. Standard library only.

    st = IsolatedStack(stack_sh, build_dir, "shopmicro-walkthrough.")
    st.run("pg-up"); st.run("start", "catalog", "order", "gateway")
    token = st.token("catalog:write")
    ... st.port("gateway") ...
    st.down(); st.remove()
"""
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

# stack.sh's port variables, by the name a caller asks for. Kafka's and RabbitMQ's too: `down`
# stops the epmd on SHOPMICRO_RABBITMQ_EPMD_PORT, which must not be the one of a user's stack.
PORT_VARS = {
    "postgres": "SHOPMICRO_PG_PORT",
    "catalog": "SHOPMICRO_CATALOG_PORT",
    "order": "SHOPMICRO_ORDER_PORT",
    "gateway": "SHOPMICRO_GATEWAY_PORT",
    "gateway-admin": "SHOPMICRO_GATEWAY_ADMIN_PORT",
    "kafka": "SHOPMICRO_KAFKA_PORT",
    "kafka-controller": "SHOPMICRO_KAFKA_CONTROLLER_PORT",
    "relay-admin": "SHOPMICRO_RELAY_ADMIN_PORT",
    "relay-catalog-admin": "SHOPMICRO_RELAY_CATALOG_ADMIN_PORT",
    "catalog-admin": "SHOPMICRO_CATALOG_ADMIN_PORT",
    "order-admin": "SHOPMICRO_ORDER_ADMIN_PORT",
    "rabbitmq": "SHOPMICRO_RABBITMQ_PORT",
    "rabbitmq-dist": "SHOPMICRO_RABBITMQ_DIST_PORT",
    "rabbitmq-epmd": "SHOPMICRO_RABBITMQ_EPMD_PORT",
    "notify-sink": "SHOPMICRO_NOTIFY_SINK_PORT",
    "notification-admin": "SHOPMICRO_NOTIFY_ADMIN_PORT",
    "api-docs": "SHOPMICRO_API_DOCS_PORT",
}


def wait_http_ok(url, seconds):
    """True once GET url answers 200 (tried every 0.2 s), False after seconds without."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def free_ports(stack, n):
    """n free ports from stack.sh's own picker (the script does nothing else when sourced): random
    ones below the kernel's ephemeral range, so no client connection takes one while the stack
    restarts."""
    out = subprocess.run(["bash", "-c", 'source "$1" && free_ports "$2"', "isolated_stack", stack, str(n)],
                         stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    if len(out) != n:
        raise RuntimeError(f"stack.sh free_ports {n} gave {out}")
    return [int(p) for p in out]


class IsolatedStack:
    def __init__(self, stack, build_dir, prefix, echo=print):
        self.stack = stack
        self.echo = echo
        self.run_dir = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.run_dir, 0o755)  # run as root, the cluster's owner (postgres) must reach it
        self.ports = dict(zip(PORT_VARS, free_ports(stack, len(PORT_VARS))))
        self.env = dict(os.environ, SHOPMICRO_RUN_DIR=self.run_dir,
                        SHOPMICRO_BUILD_DIR=os.path.abspath(build_dir),
                        SHOPMICRO_STOP_TIMEOUT="5", SHOPMICRO_PG_FAST="1",
                        **{PORT_VARS[k]: str(p) for k, p in self.ports.items()})

    def port(self, name):
        return self.ports[name]

    def run(self, *args):
        """stack.sh ARGS in this stack; its output echoed, indented. Returns the CompletedProcess."""
        p = subprocess.run([self.stack, *args], env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        out = p.stdout.strip()
        if out:
            self.echo("\n".join("    | " + l for l in out.splitlines()))
        return p

    def token(self, scope, sub=None):
        """A bearer token of this stack's issuer (stack.sh token) with these scopes."""
        args = [self.stack, "token", "--scope", scope] + (["--sub", sub] if sub else [])
        return subprocess.run(args, env=self.env, stdout=subprocess.PIPE, text=True,
                              check=True).stdout.strip()

    def read_log(self, svc):
        try:
            with open(os.path.join(self.run_dir, "logs", f"{svc}.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def not_running(self, services):
        """What stack.sh status says of each of services that is not running: [] when all are."""
        status = self.run("status").stdout
        bad = []
        for svc in services:
            line = next((l for l in status.splitlines() if l.split()[:1] == [svc]), "")
            if "running" not in line:
                bad.append(f"{svc} is not running: {line.strip() or 'no status line'}")
        return bad

    def tail_logs(self, services, lines=25):
        for svc in services:
            text = self.read_log(svc).splitlines()
            print(f"---- last lines of {svc}.log ----")
            print("\n".join(l[:300] for l in text[-lines:]))

    def down(self):
        """stack.sh down; True when it exited 0."""
        return self.run("down").returncode == 0

    def remove(self):
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def teardown(self, failed, services, keep=False, say=print):
        """The end of every run: stack.sh down; after a failure (failed, or down's own) the last
        log lines of services, and the run folder kept for a post-mortem (as with keep), else
        removed. Returns "stack.sh down failed" when down did, else None."""
        down_ok = self.down()
        if failed or not down_ok:
            self.tail_logs(services)
        if failed or not down_ok or keep:
            say(f"kept {self.run_dir}")
        else:
            self.remove()
        return None if down_ok else "stack.sh down failed"
