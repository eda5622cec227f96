#!/usr/bin/env bash
# shellcheck disable=SC2016  # the checks' conditions are single-quoted on purpose: check() evals them
# deploy/compose/test.sh: `docker compose up` for real, and the walkthrough against it.
#
#   deploy/compose/test.sh [--keep] [--clean] [--replicas]
#
# 1. a Docker daemon: the running one, or dockerd started here (Debian's docker.io; stopped again
#    at the end, with what it leaves behind: its iptables chains, docker0, its netns mount)
# 2. local/prepare.sh (the base image and the Kafka jars, once), then `docker-compose build` of
#    docker-compose.yml + compose.local.yaml (the stand-ins and the project's image; cached layers
#    make a second run take seconds)
# 3. `up -d`, then every long-running container healthy (their own healthchecks) within 180 s
# 4. the walkthrough: auth-keys made the key set, and the gateway holds no private key; a token from
#    token.sh; POST /v1/products without it 401, GET /v1/products without it 200; with it a
#    product; an order (customer c1, the token's subject) that reaches CONFIRMED (the stock saga
#    through Kafka and the relays); `kill catalog` -> POST /v1/orders answers 503 and, once the breaker is open, in
#    milliseconds, while GET /v1/orders/{id} stays 200; `start catalog` -> orders succeed again
# --replicas: the same with two replicas of catalog, order and both relays (`--scale`), and then one
#    container of catalog and of order killed (`docker kill`) while 100 orders come: none fails
#    (order and the gateway reach them through dns:/// names: round robin, health-checked)
# 5. `down -v` (the volumes too), unless --keep
# --clean: also remove the built images and the base image at the end.
# Exit status 0 when every step held. Needs root (dockerd), docker.io, docker-compose, mmdebstrap,
# java and mvn (deploy/local/packages.txt has them all but docker.io and mmdebstrap, which only
# this script needs: `apt-get install docker.io mmdebstrap`).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
KEEP=0 CLEAN=0 SCALE=()
for a; do
  case $a in
    --keep) KEEP=1 ;;
    --clean) CLEAN=1 ;;
    --replicas) SCALE=(--scale catalog=2 --scale order=2 --scale relay=2 --scale relay-catalog=2) ;;
    -h|--help) sed -n '3,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
COMPOSE=(docker-compose -p shopmicro-test -f "$HERE/docker-compose.yml" -f "$HERE/compose.local.yaml")
GW=http://127.0.0.1:8080
# token.sh runs `run auth-keys` with the same files and project (the paths must hold no blank).
export SHOPMICRO_COMPOSE="${COMPOSE[*]}"
T0=$SECONDS DOCKERD_PID="" FAILS=0
step() { printf '\n==== %s  [+%ds]\n' "$*" $((SECONDS - T0)); }
say() { printf 'compose-test: %s\n' "$*"; }
# check WHAT CONDITION: CONDITION is evaluated at the check (single-quoted at the call sites).
check() { if eval "$2"; then say "ok:   $1"; else say "FAIL: $1"; FAILS=$((FAILS + 1)); fi; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$?
  set +e
  if (( rc != 0 || FAILS > 0 )); then
    "${COMPOSE[@]}" ps
    for s in auth-keys catalog order gateway relay kafka; do
      say "last lines of $s:"; "${COMPOSE[@]}" logs --tail 8 "$s" 2>&1 | sed 's/^/    /'
    done
  fi
  (( KEEP )) || "${COMPOSE[@]}" down -v --remove-orphans >/dev/null 2>&1
  if (( CLEAN )); then
    docker image rm shopmicro:local shopmicro/postgres-standin:15 shopmicro/kafka-standin:4.4.0 \
      shopmicro/rabbitmq-standin:3.10 local/debian:bookworm >/dev/null 2>&1
  fi
  [[ -n $DOCKERD_PID ]] && stop_dockerd
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1. the daemon ------------------------------------------------------------------------------
stop_dockerd() {
  kill "$DOCKERD_PID" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.1; done
  # What dockerd leaves behind on the host (containers-notes: chains, the bridge, a netns mount).
  for t in nat filter; do
    iptables -t "$t" -S 2>/dev/null | grep -o -- '-N DOCKER[A-Z0-9_-]*' | cut -d' ' -f2 |
      while read -r chain; do iptables -t "$t" -F "$chain"; done
  done
  iptables -t nat -D POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE 2>/dev/null
  ip link delete docker0 2>/dev/null
  umount /run/docker/netns/default 2>/dev/null
  say "dockerd (pid $DOCKERD_PID) stopped"
}

step "docker daemon"
if docker info >/dev/null 2>&1; then
  say "using the running daemon ($(docker info -f '{{.ServerVersion}}'))"
else
  command -v dockerd >/dev/null || { say "dockerd is missing: apt-get install docker.io"; exit 1; }
  mkdir -p /tmp/shopmicro-dockerd
  setsid dockerd >/tmp/shopmicro-dockerd/dockerd.log 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 1 100); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  docker info >/dev/null 2>&1 || { say "dockerd did not come up (/tmp/shopmicro-dockerd/dockerd.log)"; exit 1; }
  say "started dockerd (pid $DOCKERD_PID, $(docker info -f '{{.ServerVersion}}'))"
fi

# ---- 2. images -----------------------------------------------------------------------------------
step "images: local/prepare.sh, then docker-compose build"
"$HERE/local/prepare.sh"
t=$SECONDS
"${COMPOSE[@]}" build >/tmp/shopmicro-compose-build.log 2>&1 ||
  { tail -n 30 /tmp/shopmicro-compose-build.log; say "docker-compose build failed"; exit 1; }
say "built in $((SECONDS - t)) s (log /tmp/shopmicro-compose-build.log)"

# ---- 3. up and healthy --------------------------------------------------------------------------
step "up -d, every service healthy"
t=$SECONDS
"${COMPOSE[@]}" up -d ${SCALE[@]+"${SCALE[@]}"} 2>&1 | grep -v '^$' | sed 's/^/    /'
unhealthy() {
  local id status
  for id in $("${COMPOSE[@]}" ps -q); do
    status=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")
    case $status in healthy|exited) ;; *) docker inspect -f '{{.Name}} '"$status" "$id" ;; esac
  done
}
for _ in $(seq 1 180); do [[ -z $(unhealthy) ]] && break; sleep 1; done
check "every long-running service healthy within 180 s ($((SECONDS - t)) s)" '[[ -z $(unhealthy) ]]'
check "the one-shot db-init, kafka-init and auth-keys exited 0" \
  '[[ $(docker inspect -f "{{.State.ExitCode}}" $("${COMPOSE[@]}" ps -q db-init kafka-init auth-keys) | sort -u) == 0 ]]'

# ---- 4. the walkthrough --------------------------------------------------------------------------
step "walkthrough"
check "auth-keys: a public key set in the gateway's read-only volume, no private key in the gateway" \
  '"${COMPOSE[@]}" exec -T gateway sh -c "test -s /var/lib/shopmicro/jwks/jwks.json && ! test -e /var/lib/shopmicro/signing/signing-key.pem && ! test -w /var/lib/shopmicro/jwks"'
t=$SECONDS
TOKEN=$("$HERE/token.sh")
say "token.sh: a token for c1 in $((SECONDS - t)) s (${#TOKEN} characters)"
AUTH=(-H "Authorization: Bearer $TOKEN")
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
product_body='{"name":"Compose mug","price_cents":1299,"stock":10}'
check "POST /v1/products without a token: 401" '[[ $(code -XPOST "$GW/v1/products" -d "$product_body") == 401 ]]'
check "GET /v1/products without a token: 200 (public)" '[[ $(code "$GW/v1/products") == 200 ]]'
ro_token=$("$HERE/token.sh" --scope "orders:read")
check "POST /v1/products with a token without catalog:write: 403" \
  '[[ $(code -H "Authorization: Bearer $ro_token" -XPOST "$GW/v1/products" -d "$product_body") == 403 ]]'
product=$(curl -sf "${AUTH[@]}" -XPOST "$GW/v1/products" -d "$product_body")
pid=$(json '["id"]' <<<"$product")
say "product $pid"
order_body() { printf '{"customer_id":"c1","items":[{"product_id":"%s","quantity":%d}]}' "$pid" "$1"; }
oid=$(curl -sf "${AUTH[@]}" -XPOST "$GW/v1/orders" -d "$(order_body 2)" | json '["id"]')
for _ in $(seq 1 100); do
  status=$(curl -sf "${AUTH[@]}" "$GW/v1/orders/$oid" | json '["status"]')
  [[ $status == ORDER_STATUS_PENDING ]] || break
  sleep 0.1
done
check "order $oid reached CONFIRMED through the saga (got $status)" '[[ $status == ORDER_STATUS_CONFIRMED ]]'
check "its stock was taken: 8 left" '[[ $(curl -sf "$GW/v1/products/$pid" | json "[\"stock\"]") == 8 ]]'

"${COMPOSE[@]}" kill catalog 2>&1 | sed 's/^/    /'
# Each order replica has a breaker of its own (5 failures open it), so with two of them the
# gateway's round robin needs twice the calls before both answer fast.
tries=$(( ${#SCALE[@]} ? 24 : 12 ))
codes="" fast=0
for (( i = 0; i < tries; i++ )); do
  line=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "${AUTH[@]}" -XPOST "$GW/v1/orders" -d "$(order_body 1)")
  codes+="${line%% *} "
  awk -v t="${line#* }" 'BEGIN { exit !(t < 0.02) }' && fast=$((fast + 1))
done
say "with catalog killed: $codes"
check "every order refused with 503" '[[ $(tr " " "\n" <<<"$codes" | sort -u | xargs) == 503 ]]'
check "the breaker opened: $fast of $tries answered in under 20 ms" '(( fast >= 3 ))'
check "GET /v1/orders/{id} still 200" '[[ $(code "${AUTH[@]}" "$GW/v1/orders/$oid") == 200 ]]'
"${COMPOSE[@]}" start catalog 2>&1 | sed 's/^/    /'
t=$SECONDS ok=""
# shellcheck disable=SC2034  # ok is read by the check below (inside its single-quoted condition)
for _ in $(seq 1 30); do
  [[ $(code "${AUTH[@]}" -XPOST "$GW/v1/orders" -d "$(order_body 1)") == 200 ]] && { ok=1; break; }
  sleep 1
done
check "after start catalog, an order succeeds again ($((SECONDS - t)) s: the breaker's cooldown)" '[[ -n $ok ]]'

if (( ${#SCALE[@]} )); then
  step "replicas: one container of catalog and of order killed under load"
  check "two containers each of catalog and order" \
    '[[ $("${COMPOSE[@]}" ps -q catalog | wc -l) == 2 && $("${COMPOSE[@]}" ps -q order | wc -l) == 2 ]]'
  # Paced to under 20 orders a second: the gateway's default write limit per client
  # (write=20/s,burst=40, left on in compose). Back to back, one client's 100 orders would meet
  # 429s, which measure the limiter, not the fail-over.
  failed=0
  for (( i = 1; i <= 100; i++ )); do
    if (( i == 30 )); then
      docker kill "$("${COMPOSE[@]}" ps -q catalog | head -n 1)" "$("${COMPOSE[@]}" ps -q order | head -n 1)" >/dev/null
      say "order $i: killed one catalog and one order container"
    fi
    c=$(code -m 5 "${AUTH[@]}" -XPOST "$GW/v1/orders" -d "$(order_body 1)")
    [[ $c == 200 ]] || { failed=$((failed + 1)); say "order $i: $c"; }
    sleep 0.05
  done
  check "100 orders with a replica of catalog and of order killed: $failed failed" '(( failed == 0 ))'
fi

step "done: $FAILS failed check(s) in $((SECONDS - T0)) s"
(( FAILS == 0 ))
