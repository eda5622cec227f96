#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2034  # the checks' conditions are single-quoted on purpose: check() evals them
# tests/deploy/test_replicas_local.sh: two replicas of everything in the local stack, one of each
# killed under load (issue 18, "Two replicas of everything").
#
# Runs itself again under `SHOPMICRO_REPLICAS=2 deploy/local/stack.sh test-env`: a run folder, a
# Postgres and free ports of its own (the replicas' too), so it never touches a stack that is up.
# Then `stack.sh up` (Kafka, RabbitMQ, catalog and catalog-2, order and order-2, both relays and
# their replicas, notification and notification-2, the notify-sink, one gateway), and:
#   1. 300 orders through the gateway, one after another, as customer c1 with `stack.sh token`'s
#      bearer token (the gateway verifies it; its write limit raised, below); before the 100th,
#      kill -9 of the first
#      replica of catalog, order, relay, relay-catalog and notification
#   2. checks: no order failed (the gateway's and order's round robin move the calls to the live
#      replicas; pkg/resilience retries the calls that were on a dead one), and none took longer
#      than its 5 s deadline; every order reaches CONFIRMED within 90 s (the saga's consumers of
#      the dead replicas hand their partitions over when their sessions expire); the stock went
#      down by exactly the orders placed (no reservation applied twice); the webhook receiver got
#      exactly one distinct delivery per confirmed order (a redelivery after the kill is deduped
#      by its id, as receivers must)
# Exit status 0 when every check held. About 90 s (Kafka's and RabbitMQ's starts, the hand-over).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
STACK=$ROOT/deploy/local/stack.sh
if [[ -z ${REPLICAS_TEST_IN_ENV:-} ]]; then
  REPLICAS_TEST_IN_ENV=1 SHOPMICRO_REPLICAS=2 exec "$STACK" test-env "$0" "$@"
fi

ORDERS=300 KILL_AT=100 FAILS=0
GW=http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT
SINK=http://127.0.0.1:$SHOPMICRO_NOTIFY_SINK_PORT
say() { printf 'replicas-test: %s\n' "$*"; }
check() { if eval "$2"; then say "ok:   $1"; else say "FAIL: $1"; FAILS=$((FAILS + 1)); fi; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
sql() { psql -X -qtA -h 127.0.0.1 -p "$SHOPMICRO_PG_PORT" -U postgres -d "$1" -c "$2"; }

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$?
  set +e
  if (( rc != 0 || FAILS > 0 )); then
    for n in order order-2 gateway catalog-2 notification-2; do
      say "last lines of $n:"; tail -n 6 "$SHOPMICRO_RUN_DIR/logs/$n.log" 2>/dev/null | sed 's/^/    /'
    done
  fi
  "$STACK" down >/dev/null 2>&1
  exit "$rc"
}
trap cleanup EXIT

say "stack.sh up with two replicas (run folder $SHOPMICRO_RUN_DIR)"
# One client (c1) sends 300 orders back to back: faster than the gateway's default write limit per
# client (20/s, burst 40), whose 429s would measure the limiter, not the fail-over. So the write
# limit is raised for this stack (the gateway inherits the environment), not switched off.
GATEWAY_RATE_LIMITS="read=100/s,burst=200;write=1000/s,burst=1000" \
  "$STACK" up >"$SHOPMICRO_RUN_DIR/up.log" 2>&1 || { tail -n 30 "$SHOPMICRO_RUN_DIR/up.log"; exit 1; }
grep -E '^(catalog|order|relay|notification|gateway)' "$SHOPMICRO_RUN_DIR/up.log" | tail -n 11 | sed 's/^/    /'

# Customer c1's token, also allowed to create the test's product (catalog:write).
AUTH=(-H "Authorization: Bearer $("$STACK" token --scope "catalog:write orders:write orders:read")")
pid=$(curl -sf "${AUTH[@]}" -XPOST "$GW/v1/products" -d '{"name":"Replica lamp","price_cents":100,"stock":1000}' | json '["id"]')
body="{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"$pid\",\"quantity\":1}]}"
ok=0 failed=0 slowest=0
for (( i = 1; i <= ORDERS; i++ )); do
  if (( i == KILL_AT )); then
    for s in catalog order relay relay-catalog notification; do "$STACK" kill "$s" >/dev/null; done
    say "order $i: killed (kill -9) the first replica of catalog, order, relay, relay-catalog, notification"
  fi
  read -r code t < <(curl -s -o /dev/null -m 5 -w '%{http_code} %{time_total}\n' "${AUTH[@]}" -XPOST "$GW/v1/orders" -d "$body")
  if [[ $code == 200 ]]; then ok=$((ok + 1)); else failed=$((failed + 1)); say "order $i: $code after $t s"; fi
  slowest=$(awk -v a="$slowest" -v b="$t" 'BEGIN { print (b > a) ? b : a }')
done
say "$ok orders answered 200, $failed failed; the slowest took $slowest s"
check "no order failed while a replica of every service was killed" '(( failed == 0 ))'
check "none took past its 5 s deadline (slowest $slowest s)" 'awk -v t="$slowest" "BEGIN { exit !(t < 5) }"'

for (( w = 0; w < 90; w++ )); do
  pending=$(sql orders "SELECT count(*) FROM orders WHERE customer_id = 'c1' AND status <> 'CONFIRMED'")
  (( pending == 0 )) && break
  sleep 1
done
confirmed=$(sql orders "SELECT count(*) FROM orders WHERE customer_id = 'c1' AND status = 'CONFIRMED'")
check "all $ok orders CONFIRMED within 90 s ($confirmed after $w s)" '(( confirmed == ok ))'
stock=$(curl -sf "$GW/v1/products/$pid" | json '["stock"]')
check "the stock went down by exactly the orders: $stock = 1000 - $ok" '(( stock == 1000 - ok ))'
for (( w = 0; w < 30; w++ )); do
  delivered=$(curl -sf "$SINK/received" | json '["count"]')
  (( delivered >= confirmed )) && break
  sleep 1
done
dups=$(curl -sf "$SINK/received" | json '["duplicates"]')
check "one distinct webhook per confirmed order: $delivered ($dups redelivered, deduped)" \
  '(( delivered == confirmed ))'
say "done: $FAILS failed check(s)"
(( FAILS == 0 ))
