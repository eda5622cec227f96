#!/usr/bin/env bash
# tests/deploy/check_compose.sh: validate deploy/compose/docker-compose.yml without a Docker engine.
#
#   check_compose.sh [--root DIR] [NAME=BINARY]...
#
# 1. `docker-compose -f FILE config -q` (compose v1, Debian's docker-compose 1.29) and, where the
#    docker CLI has the compose v2 plugin, `docker compose -f FILE config -q`. Neither contacts an
#    engine. If neither is installed, the script exits 77 (ctest SKIP_RETURN_CODE); this is the only
#    reason it skips. `deploy/local/stack.sh deps` installs docker-compose, so CI runs this check.
# 2. Rules checked on the normalised `config` output (python3-yaml, a dependency of docker-compose):
#    - every long-running service has a healthcheck and `restart: unless-stopped`;
#    - every depends_on has a condition: service_healthy on a service that has a healthcheck,
#      or service_completed_successfully on a one-shot service (`restart: "no"`);
#    - the services built here all use one image built from one Dockerfile, and the healthchecks of
#      the long-running ones run its `healthcheck` probe (gRPC health or GET /readyz), never a bare
#      TCP connect;
#    - the gateway verifies tokens: GATEWAY_JWKS_FILE and GATEWAY_JWT_ISSUER are set, the file is in
#      a named volume the gateway mounts read-only and that a one-shot service (auth-keys) fills,
#      which the gateway waits for (service_completed_successfully); the volume of that service's
#      signing key (AUTH_SIGNING_KEY) is mounted by no long-running service; the rate limits are
#      not switched off (GATEWAY_RATE_LIMITS=off);
#    - the gateway publishes its API port 8080, on 127.0.0.1 by default, and nothing else (no
#      other service publishes a port); every *_DB_DSN names host=postgres;
#    - rabbitmq runs the official management image with a rabbitmq-diagnostics healthcheck, a fixed
#      hostname and a named volume on /var/lib/rabbitmq;
#    - the shopper load generator (built from deploy/compose/shopper/Dockerfile, the one image
#      besides the project's) and its token signer are in the profile "shop" only, so a plain `up`
#      starts neither; the shopper waits for the gateway (healthy) and the signer (completed),
#      calls the gateway's API port, runs at a gentle rate (SHOPPER_RATE at most 5 by default), has
#      cpus and mem_limit, its healthcheck runs its alive.py, and its tokens are files of a named
#      volume mounted read-only that the one-shot signer alone writes (no SHOPPER_*TOKEN value in
#      the file).
# 3. For each NAME=BINARY (catalog, order, relay, gateway from the build tree), every environment variable
#    of the compose service whose command is NAME is one that `BINARY --help` documents. A typo
#    would otherwise be ignored without a word. An empty or unbuilt BINARY is reported as skipped.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
if [[ ${1:-} == --root ]]; then
  ROOT=$(cd "$2" && pwd -P)
  shift 2
fi
FILE="$ROOT/deploy/compose/docker-compose.yml"
[[ -r $FILE ]] || { echo "check_compose: error: cannot read $FILE" >&2; exit 2; }

declare -a tools=()
if command -v docker-compose >/dev/null 2>&1; then tools+=(docker-compose); fi
if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then tools+=("docker compose"); fi
if (( ${#tools[@]} == 0 )); then
  echo "SKIPPED: neither docker-compose (Debian package docker-compose) nor the docker compose v2 plugin is installed;"
  echo "         'deploy/local/stack.sh deps' installs docker-compose. Nothing was validated."
  exit 77
fi

FAILS=0
normalised=""
for tool in "${tools[@]}"; do
  read -r -a cmd <<<"$tool"
  version=$("${cmd[@]}" version --short 2>/dev/null || "${cmd[@]}" version 2>/dev/null | head -n 1 || true)
  if out=$("${cmd[@]}" -f "$FILE" config -q 2>&1); then
    echo "ok:   $tool ($version) -f deploy/compose/docker-compose.yml config -q"
    [[ -n $out ]] && printf '%s\n' "$out" | sed 's/^/      /'
    if [[ -z $normalised ]]; then normalised=$("${cmd[@]}" -f "$FILE" config 2>/dev/null); fi
  else
    echo "FAIL: $tool ($version) rejects deploy/compose/docker-compose.yml:"
    printf '%s\n' "$out" | sed 's/^/      /'
    FAILS=$((FAILS + 1))
  fi
  # The documented env file must be what the file reads (every name in it used, none missing).
  envf="${FILE%/*}/shopmicro.env"
  unused=$(grep -o '^[A-Z_]*' "$envf" | while read -r v; do grep -q "\${$v:-" "$FILE" || echo "$v"; done)
  # shellcheck disable=SC2016  # a literal ${ to grep for
  missing=$(grep -o '\${SHOPMICRO_[A-Z_]*' "$FILE" | cut -c3- | sort -u | while read -r v; do grep -q "^$v=" "$envf" || echo "$v"; done)
  if [[ -z $unused$missing ]] && "${cmd[@]}" --env-file "$envf" -f "$FILE" config -q >/dev/null 2>&1; then
    echo "ok:   $tool --env-file shopmicro.env config -q; the env file names exactly the file's \${SHOPMICRO_*} settings"
  else
    echo "FAIL: shopmicro.env and docker-compose.yml disagree (unused: ${unused:-none}; missing: ${missing:-none})"
    FAILS=$((FAILS + 1))
  fi
  # The override for machines without a registry must merge with it cleanly, too.
  if out=$("${cmd[@]}" -f "$FILE" -f "${FILE%/*}/compose.local.yaml" config -q 2>&1); then
    echo "ok:   $tool -f docker-compose.yml -f compose.local.yaml config -q"
  else
    echo "FAIL: $tool rejects docker-compose.yml + compose.local.yaml:"
    printf '%s\n' "$out" | sed 's/^/      /'
    FAILS=$((FAILS + 1))
  fi
done

# Environment variable names that each binary documents (`--help` lists "  NAME (default: ...)").
help_vars=""
for arg in "$@"; do
  name=${arg%%=*}
  bin=${arg#*=}
  if [[ -z $bin || ! -x $bin ]]; then
    echo "FAIL: $name: ${bin:-(no path)} is not built: its environment names cannot be checked"
    FAILS=$((FAILS + 1))
  else
    vars=$("$bin" --help 2>&1 | sed -n 's/^  \([A-Z][A-Z0-9_]*\) (default.*/\1/p' | tr '\n' ' ')
    if [[ -z $vars ]]; then
      echo "FAIL: $name: '$bin --help' lists no environment variable"
      FAILS=$((FAILS + 1))
    fi
    help_vars+="$name=$vars"$'\n'
  fi
done

if [[ -z $normalised ]]; then
  echo "FAIL: no tool accepted the file, so the rules below were not checked"
  FAILS=$((FAILS + 1))
elif ! python3 -c 'import yaml' 2>/dev/null; then
  # A missing prerequisite is a failure, not a pass: deploy/local/packages.txt lists it.
  echo "FAIL: rules: python3-yaml is not installed (deploy/local/stack.sh deps installs it)"
  FAILS=$((FAILS + 1))
else
  rc=0
  HELP_VARS=$help_vars python3 - "$normalised" <<'EOF' || rc=$?
import os, sys, yaml

doc = yaml.safe_load(sys.argv[1])
svcs = doc.get("services", {})
fails = 0

def check(ok, msg):
    global fails
    print(("ok:   " if ok else "FAIL: ") + msg)
    if not ok:
        fails += 1

def one_shot(s):
    return str(s.get("restart", "no")) in ("no", "False", "false")

help_vars = {}
for line in os.environ.get("HELP_VARS", "").splitlines():
    if "=" in line:
        name, names = line.split("=", 1)
        help_vars[name] = set(names.split())

SHOPPER_DOCKERFILE = "deploy/compose/shopper/Dockerfile"
def is_shopper(s):
    return str((s.get("build") or {}).get("dockerfile", "")) == SHOPPER_DOCKERFILE

images = {}
shoppers = []
for name, s in sorted(svcs.items()):
    if one_shot(s):
        check(not s.get("ports"), f"{name}: one-shot service (restart: no) publishes no port")
    else:
        check(s.get("restart") == "unless-stopped", f"{name}: restart: unless-stopped")
        hc = s.get("healthcheck") or {}
        check(bool(hc.get("test")) and not hc.get("disable"), f"{name}: has a healthcheck")
    deps = s.get("depends_on") or {}
    if isinstance(deps, list):
        deps = {d: {"condition": "service_started"} for d in deps}
    for dep, spec in sorted(deps.items()):
        cond = (spec or {}).get("condition", "service_started")
        target = svcs.get(dep, {})
        if cond == "service_healthy":
            check(bool((target.get("healthcheck") or {}).get("test")),
                  f"{name} -> {dep}: service_healthy on a service with a healthcheck")
        elif cond == "service_completed_successfully":
            check(one_shot(target), f"{name} -> {dep}: service_completed_successfully on a one-shot service")
        else:
            check(False, f"{name} -> {dep}: condition is {cond}, expected service_healthy or service_completed_successfully")
    if "build" in s and is_shopper(s):  # the load generator: its own rules, below
        shoppers.append(name)
    elif "build" in s:  # ours: the healthcheck asks the service, it does not test a connect
        if not one_shot(s):
            hc = " ".join(str(x) for x in (s.get("healthcheck") or {}).get("test") or [])
            check(hc.startswith("CMD healthcheck grpc ") or hc.startswith("CMD healthcheck http "),
                  f"{name}: healthcheck runs the image's healthcheck probe ({hc})")
        b = s["build"]
        images.setdefault((s.get("image"), b.get("context"), b.get("dockerfile")), []).append(name)
    env = s.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    for k, v in sorted(env.items()):
        if k.endswith("_DB_DSN"):
            check("host=postgres" in str(v).split(), f"{name}: {k} names host=postgres")
    cmd = s.get("command") or []
    if isinstance(cmd, str):
        cmd = cmd.split()
    prog = cmd[0] if cmd else None
    if prog in help_vars:
        unknown = sorted(k for k in env if k not in help_vars[prog])
        check(not unknown, f"{name}: every environment variable is documented by '{prog} --help'"
              + (f" (unknown: {', '.join(unknown)})" if unknown else f" ({len(env)} set)"))

check(len(images) == 1, "the built services share one image and one Dockerfile: "
      + "; ".join(f"{k[0]} from {k[2]} <- {', '.join(v)}" for k, v in images.items()))
gw = svcs.get("gateway", {})
published = [str(p.get("published")) if isinstance(p, dict) else str(p).split(":")[-2] if ":" in str(p) else str(p)
             for p in gw.get("ports") or []]
check("8080" in published, "gateway publishes port 8080")
# The API port on the host's loopback only, by default; nothing else of the gateway (its admin
# port) published. Every other service publishes nothing.
def port_entry(p):
    """{host_ip, published, target} of a long-syntax entry or a "[ip:]published:target" string."""
    if isinstance(p, dict):
        return p
    parts = str(p).split("/")[0].split(":")
    return {"host_ip": parts[0] if len(parts) == 3 else "0.0.0.0",
            "published": parts[-2] if len(parts) >= 2 else parts[0], "target": parts[-1]}
gw_ports = [port_entry(p) for p in gw.get("ports") or []]
check(bool(gw_ports) and all(p.get("host_ip") == "127.0.0.1" for p in gw_ports),
      "gateway publishes on 127.0.0.1 by default ("
      + ", ".join(f"{p.get('host_ip', '0.0.0.0')}:{p.get('published')}" for p in gw_ports) + ")")
check(all(str(p.get("target")) == "8080" for p in gw_ports),
      "gateway publishes only its API port 8080 (not its admin port)")
others = sorted(n for n, v in svcs.items() if n != "gateway" and v.get("ports"))
check(not others, "no other service publishes a port" + (f" ({', '.join(others)})" if others else ""))

# The front door: the gateway's key set from a volume that a one-shot service fills.
def env_of(s):
    env = s.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}

def mounts(s):
    """[(named volume or None, target, read_only)] of a service (short or long syntax)."""
    out = []
    for v in s.get("volumes") or []:
        if isinstance(v, dict):
            src = v.get("source") if v.get("type", "volume") == "volume" else None
            out.append((src, v.get("target"), bool(v.get("read_only"))))
        else:
            parts = str(v).split(":")
            src = parts[0] if len(parts) > 1 and not parts[0].startswith((".", "/", "~")) else None
            out.append((src, parts[1] if len(parts) > 1 else parts[0], len(parts) > 2 and "ro" in parts[2].split(",")))
    return out

def volume_of(s, path):
    """(volume, read_only) of the named volume that holds path in s, or (None, None)."""
    best = (None, None, -1)
    for src, tgt, ro in mounts(s):
        t = str(tgt).rstrip("/")
        if src in (doc.get("volumes") or {}) and path.startswith(t + "/") and len(t) > best[2]:
            best = (src, ro, len(t))
    return best[:2]

genv = env_of(gw)
jwks = genv.get("GATEWAY_JWKS_FILE", "")
check(jwks.startswith("/") and bool(genv.get("GATEWAY_JWT_ISSUER")),
      f"gateway: GATEWAY_JWKS_FILE ({jwks or 'unset'}) and GATEWAY_JWT_ISSUER ({genv.get('GATEWAY_JWT_ISSUER') or 'unset'}) are set")
check(genv.get("GATEWAY_RATE_LIMITS", "").strip() != "off",
      f"gateway: rate limits on ({genv.get('GATEWAY_RATE_LIMITS') or 'the defaults'})")
vol, ro = volume_of(gw, jwks)
check(vol is not None and ro, f"gateway: the JWKS file is in a named volume mounted read-only ({vol}, read_only={ro})")
writers = sorted(n for n, v in svcs.items() if n != "gateway" and any(src == vol and not r for src, _, r in mounts(v)))
issuer = writers[0] if len(writers) == 1 else None
check(issuer is not None and one_shot(svcs[issuer]),
      f"the JWKS volume {vol} is written by one one-shot service ({', '.join(writers) or 'none'})")
if issuer is not None:
    cond = ((gw.get("depends_on") or {}).get(issuer) or {}).get("condition") if isinstance(gw.get("depends_on"), dict) else None
    check(cond == "service_completed_successfully",
          f"gateway -> {issuer}: service_completed_successfully (the key set exists before the gateway starts)")
    ienv = env_of(svcs[issuer])
    key = ienv.get("AUTH_SIGNING_KEY", "")
    kvol, _ = volume_of(svcs[issuer], key)
    check(kvol is not None and kvol != vol, f"{issuer}: the signing key {key or '(AUTH_SIGNING_KEY unset)'} is in a volume of its own ({kvol})")
    holders = sorted(n for n, v in svcs.items() if kvol is not None and not one_shot(v) and any(src == kvol for src, _, _ in mounts(v)))
    check(not holders, f"no long-running service mounts the signing key's volume {kvol}" + (f" ({', '.join(holders)})" if holders else ""))
    check(all(ienv.get(k) == genv.get(k) for k in ("GATEWAY_JWKS_FILE", "GATEWAY_JWT_ISSUER", "GATEWAY_JWT_AUDIENCE")),
          f"{issuer} signs for the gateway's JWKS file, issuer and audience")
# RabbitMQ: the management image, a healthcheck that asks the node (not just its port), and its
# data in a named volume (the node keeps it under rabbit@<hostname>, so the hostname is fixed).
rmq = svcs.get("rabbitmq", {})
rmq_hc = " ".join(str(x) for x in (rmq.get("healthcheck") or {}).get("test") or [])
check(str(rmq.get("image", "")).startswith("rabbitmq:") and "management" in str(rmq.get("image", "")),
      f"rabbitmq: official management image ({rmq.get('image')})")
check("rabbitmq-diagnostics" in rmq_hc, "rabbitmq: healthcheck runs rabbitmq-diagnostics")
rmq_vols = [v if isinstance(v, dict) else {"source": str(v).split(":")[0], "target": (str(v).split(":") + [""])[1]}
            for v in rmq.get("volumes") or []]
check(bool(rmq.get("hostname")) and any(v.get("target") == "/var/lib/rabbitmq" and v.get("source") in (doc.get("volumes") or {})
                                        for v in rmq_vols),
      "rabbitmq: fixed hostname and a named volume on /var/lib/rabbitmq")

# Notifications: notification between Kafka and RabbitMQ, the demo receiver, and the secret.
ntf, sink = svcs.get("notification"), svcs.get("notify-sink")
check(ntf is not None and sink is not None, "notification and notify-sink are services")
if ntf is not None and sink is not None:
    ndeps = ntf.get("depends_on") or {}
    ndeps = ndeps if isinstance(ndeps, dict) else {d: {} for d in ndeps}
    cond = lambda d: (ndeps.get(d) or {}).get("condition")
    check(cond("rabbitmq") == "service_healthy" and cond("kafka") == "service_healthy"
          and cond("kafka-init") == "service_completed_successfully",
          "notification -> rabbitmq, kafka healthy and kafka-init completed")
    nenv = env_of(ntf)
    check(nenv.get("NOTIFY_RABBITMQ_HOST") == "rabbitmq" and nenv.get("NOTIFY_KAFKA_BROKERS", "").startswith("kafka:"),
          f"notification: NOTIFY_RABBITMQ_HOST={nenv.get('NOTIFY_RABBITMQ_HOST')} NOTIFY_KAFKA_BROKERS={nenv.get('NOTIFY_KAFKA_BROKERS')}")
    secret_path = "/var/lib/shopmicro/webhook/secret"
    vols = {}
    for name, s in (("notification", ntf), ("notify-sink", sink)):
        check("NOTIFY_WEBHOOK_SECRET" not in env_of(s),
              f"{name}: NOTIFY_WEBHOOK_SECRET has no value in the file (the secret is only in the volume)")
        check(env_of(s).get("NOTIFY_WEBHOOK_SECRET_FILE") == secret_path,
              f"{name}: NOTIFY_WEBHOOK_SECRET_FILE={env_of(s).get('NOTIFY_WEBHOOK_SECRET_FILE')} (want {secret_path})")
        vols[name] = volume_of(s, secret_path)
        check(vols[name][0] is not None and vols[name][1],
              f"{name}: {secret_path} is in a named volume mounted read-only ({vols[name][0]}, read_only={vols[name][1]})")
    svol = vols["notification"][0]
    check(svol is not None and vols["notify-sink"][0] == svol, f"notification and notify-sink read one secret ({svol})")
    swriters = sorted(n for n, v in svcs.items() if any(src == svol and not r for src, _, r in mounts(v)))
    check(len(swriters) == 1 and one_shot(svcs[swriters[0]]),
          f"the secret's volume {svol} is written by one one-shot service ({', '.join(swriters) or 'none'})")
    if len(swriters) == 1:
        for name, s in (("notification", ntf), ("notify-sink", sink)):
            d = (s.get("depends_on") or {}).get(swriters[0]) if isinstance(s.get("depends_on"), dict) else None
            check((d or {}).get("condition") == "service_completed_successfully",
                  f"{name} -> {swriters[0]}: service_completed_successfully (the secret exists before it starts)")

# The shopper (profile "shop"): a gentle load generator, off by default, with its tokens from a
# one-shot signer's volume.
check(shoppers == ["shopper"], f"one service runs the shopper image ({', '.join(shoppers) or 'none'})")
shop = svcs.get("shopper")
if shop is not None:
    senv = env_of(shop)
    sdeps = shop.get("depends_on") if isinstance(shop.get("depends_on"), dict) else {}
    cond = lambda d: (sdeps.get(d) or {}).get("condition")
    check(cond("gateway") == "service_healthy", "shopper -> gateway: service_healthy")
    check(senv.get("LOCUST_HOST") == "http://gateway:8080", f"shopper: LOCUST_HOST={senv.get('LOCUST_HOST')} (the gateway's API port)")
    try:
        rate = float(senv.get("SHOPPER_RATE", "2"))
    except ValueError:
        rate = -1
    check(0 < rate <= 5, f"shopper: a gentle rate by default (SHOPPER_RATE={senv.get('SHOPPER_RATE', '2 (unset)')}, at most 5)")
    check(bool(shop.get("cpus")) and bool(shop.get("mem_limit")),
          f"shopper: cpus ({shop.get('cpus')}) and mem_limit ({shop.get('mem_limit')}) are set")
    hc = " ".join(str(x) for x in (shop.get("healthcheck") or {}).get("test") or [])
    check(hc.startswith("CMD python3 /opt/shopper/alive.py"), f"shopper: healthcheck runs its alive.py ({hc})")
    check(not any(k in senv for k in ("SHOPPER_TOKENS", "SHOPPER_ADMIN_TOKEN")),
          "shopper: no token value in the file (SHOPPER_TOKENS, SHOPPER_ADMIN_TOKEN unset)")
    signers = set()
    for var in ("SHOPPER_TOKENS_FILE", "SHOPPER_ADMIN_TOKEN_FILE"):
        path = senv.get(var, "")
        tvol, tro = volume_of(shop, path)
        check(tvol is not None and tro, f"shopper: {var}={path or '(unset)'} is in a named volume mounted read-only ({tvol}, read_only={tro})")
        w = sorted(n for n, v in svcs.items() if n != "shopper" and any(src == tvol and not r for src, _, r in mounts(v)))
        check(len(w) == 1 and one_shot(svcs[w[0]]), f"the volume {tvol} is written by one one-shot service ({', '.join(w) or 'none'})")
        signers.update(w)
    for sg in sorted(signers):
        check(cond(sg) == "service_completed_successfully", f"shopper -> {sg}: service_completed_successfully")
    for name in ["shopper", *sorted(signers)]:
        check(list(svcs[name].get("profiles") or []) == ["shop"], f"{name}: in the profile shop only ({svcs[name].get('profiles')})")
others = sorted(n for n, v in svcs.items() if v.get("profiles") and n not in ("shopper", "shopper-tokens"))
check(not others, "no other service is behind a profile" + (f" ({', '.join(others)})" if others else ""))
sys.exit(1 if fails else 0)
EOF
  if (( rc != 0 )); then FAILS=$((FAILS + 1)); fi
fi

if (( FAILS > 0 )); then
  echo "deploy/compose/docker-compose.yml: $FAILS check group(s) FAILED"
  exit 1
fi
echo "deploy/compose/docker-compose.yml: all checks passed"
