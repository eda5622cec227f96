#!/usr/bin/env bash
# bench/run_soak_bench.sh: the resident memory of every long-running service after each of three
# identical rounds of load through the gateway, and the ratio of rounds 2 and 3 to round 1
# (issue 34 §3; goal: within 5 % for catalog, order, gateway, relay and notification).
#
#   bench/run_soak_bench.sh [--seconds S] [--order-rate R] [--read-rate R] [--settle S]
#                           [--rounds N] [--services-dir [LABEL=]DIR]...
#                           [--service-env NAME=VALUE]...
#
# The gateway checks bearer tokens: `stack.sh start` gives it the run folder's JWKS, and every
# request carries a token signed with the run folder's key (`stack.sh token`, through
# bench/lib.sh's bench_auth --stack: sub c1, scopes catalog:write orders:write orders:read;
# bench_openloop through --header), the orders customer c1's. The gateway runs with
# GATEWAY_RATE_LIMITS=off: the benchmark measures the services, not the limiter
# (bench/ratelimit_bench does).
#
# 0. runs itself again under `deploy/local/stack.sh test-env`: a Postgres of its own on a free
#    port, fresh databases, free ports for Kafka, RabbitMQ and every service, a run folder in
#    $TMPDIR; all of it gone at exit (also on failure or Ctrl-C). The user's .run/ and its
#    stack are not touched. SHOPMICRO_KAFKA_LIB_CACHE (default: the bench build dir's
#    kafka-lib) is where the Kafka jars are, fetched there once.
# 1. builds bench_openloop, and the services unless every phase names its own --services-dir,
#    in $SHOPMICRO_BENCH_BUILD_DIR (default build-bench/, RelWithDebInfo)
# 2. `stack.sh start kafka rabbitmq` in that run folder
# 3. a phase per --services-dir (default: one, the bench build): `stack.sh start` of catalog,
#    order, relay, relay-catalog, notify-sink, notification and gateway from that build tree
#    (SHOPMICRO_BUILD_DIR), each with the stack's own settings and log levels; two products with
#    a stock that never runs out (the first phase creates them); one warm-up order through the
#    gateway, until its webhook has arrived (every consumer group has joined)
# 4. --rounds (3) identical rounds, each --seconds (20) of open-loop load through the gateway
#    (bench_openloop, a fixed rate whatever the answers do, so every round sends the same
#    requests): POST /v1/orders of a 2-item order at --order-rate/s (40; the saga confirms each,
#    the relays publish its events, notification delivers its webhook), and reads at
#    --read-rate/s (200): GET /v1/products/{id}, plus a quarter of that rate each of
#    GET /v1/products?page_size=20 and GET /v1/orders/{id}. After the load: until every order is
#    CONFIRMED and notification has delivered every webhook, then --settle (15) s idle (longer
#    than the 10 s between two trims of freed heap, docs/operations.md "Memory"), then VmRSS of
#    each service, and the CPU each process used during the round
# 5. the summary: VmRSS after each round per service and the ratios r2/r1 and r3/r1, against the
#    goal of 5 % (notify-sink, a test receiver that keeps up to 10,000 deliveries by design, is
#    shown without a goal; "met" is at most 5 % above round 1). Exit status 1 when a step
#    failed, a request was not answered 200, or the pipeline did not drain in 120 s; a goal not
#    met is said, not an error.
# --services-dir [LABEL=]DIR: a build tree holding the services' binaries (its
#    services/*/<name> and gateway/gateway), e.g. one of unchanged binaries and one of the
#    change; given more than once, each is a phase of its own in turn, on the same brokers,
#    databases and products, with the same load, and the summary has the figures of each.
# --service-env NAME=VALUE: an environment setting for every service (repeatable), for
#    experiments such as CATALOG_MALLOC_TRIM=off or GATEWAY_MALLOC_ARENAS=0.
# Figures: docs/benchmarks.md, "Memory of the services over identical rounds".
set -euo pipefail
ARGV=("$@")   # the command line, for test_env_rerun once the options are checked

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

SECONDS_RUN=20
ORDER_RATE=40
READ_RATE=200
SETTLE=15
CONNS=8
PRODUCTS_N=200
LIST_RATE=20
ROUNDS=3
DIRS=()
SERVICE_ENV=()
GOAL_PCT=5
DRAIN_LIMIT=120

while (( $# > 0 )); do
  case $1 in
    --seconds)      SECONDS_RUN=${2:?}; shift 2 ;;
    --order-rate)   ORDER_RATE=${2:?}; shift 2 ;;
    --read-rate)    READ_RATE=${2:?}; shift 2 ;;
    --settle)       SETTLE=${2:?}; shift 2 ;;
    --connections)  CONNS=${2:?}; shift 2 ;;
    --list-rate)    LIST_RATE=${2:?}; shift 2 ;;
    --rounds)       ROUNDS=${2:?}; shift 2 ;;
    --services-dir) DIRS+=("${2:?}"); shift 2 ;;
    --service-env)  [[ ${2:?} =~ ^[A-Z][A-Z0-9_]*=.*$ ]] || arg_error "--service-env '$2' is not NAME=VALUE"
                    SERVICE_ENV+=("$2"); shift 2 ;;
    -h|--help)      usage; exit 0 ;;
    *) unknown_arg "$1" ;;
  esac
done
need_positive "$SECONDS_RUN" "$ORDER_RATE" "$READ_RATE" "$SETTLE" "$ROUNDS" "$CONNS" "$LIST_RATE"
(( ROUNDS >= 2 )) || arg_error "--rounds: at least 2 (rounds 2.. are compared with round 1)"
phase_dirs --services-dir soak ${DIRS[@]+"${DIRS[@]}"}

# Arguments are checked first; then the run goes on in a test stack of its own.
test_env_rerun SOAK_BENCH_IN_TEST_ENV ${ARGV[@]+"${ARGV[@]}"}

pg_clients "$SHOPMICRO_PG_PORT"
ADMIN=127.0.0.1:$SHOPMICRO_NOTIFY_ADMIN_PORT
GW=http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT
TMP=$(mktemp -d /tmp/soak-bench.XXXXXX)
export SHOPMICRO_KAFKA_LIB_CACHE=${SHOPMICRO_KAFKA_LIB_CACHE:-$BUILD_DIR/kafka-lib}
for kv in ${SERVICE_ENV[@]+"${SERVICE_ENV[@]}"}; do export "${kv?}"; done
if (( ${#PHASE_BIN[@]} == 0 )); then PHASE_LABEL=(soak) PHASE_BIN=("$BUILD_DIR"); fi

# The long-running services, in their start order; notify-sink is the test receiver.
SERVICES=(catalog order relay relay-catalog notify-sink notification gateway)
NO_GOAL=notify-sink
LOADS=()   # the bench_openloop runs of a round: NAME|RATE|METHOD|PATH

# cleanup RC: the load, the services and the brokers stopped; on a failure, what their logs said.
# shellcheck disable=SC2317  # invoked by on_exit
cleanup() {
  (( $1 == 0 )) || say "exiting with status $1: stopping the services and the brokers"
  # shellcheck disable=SC2086  # load_pids is a list
  end_pids ${bg_pid:+"$bg_pid"} ${load_pids:-}
  "$STACK" stop "${SERVICES[@]}" rabbitmq kafka >"$TMP/stop.log" 2>&1 || cat "$TMP/stop.log"
  (( $1 == 0 )) || tail_logs 8 "$SHOPMICRO_RUN_DIR/logs" "${SERVICES[@]}"
}
on_exit cleanup

service_pid() { head -n1 "$SHOPMICRO_RUN_DIR/$1.pid" 2>/dev/null; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
metric() {  # metric NAME: its value on the notification service's /metrics (0 when absent)
  curl -s --max-time 2 "http://$ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }'
}
# seconds_past T0 LIMIT: true once LIMIT seconds have passed since $EPOCHREALTIME value T0.
seconds_past() { awk -v a="$1" -v b="$EPOCHREALTIME" -v l="$2" 'BEGIN { exit !(b - a > l) }'; }

# place_order: one CreateOrder of customer $BENCH_SUB through the gateway (retried while the
# stack settles); ORDER_ID is its id.
place_order() {
  local i out
  for (( i = 0; i < 50; i++ )); do
    out=$(curl -s --max-time 5 "${AUTH_HDR[@]}" -XPOST "$GW/v1/orders" -d "{\"customer_id\":\"$BENCH_SUB\",\"items\":[{\"product_id\":\"${PRODUCTS[0]}\",\"quantity\":1}]}") || true
    ORDER_ID=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' <<<"$out")
    [[ -z $ORDER_ID ]] || return 0
    sleep 0.2
  done
  die "CreateOrder through the gateway fails: $out"
}

# drain PLACED DELIVERED0 LABEL: until no order is PENDING and notification has delivered
# DELIVERED0 + PLACED webhooks in all; DRAIN_S is how long that took.
drain() {
  local placed=$1 want=$(( $2 + $1 )) t0=$EPOCHREALTIME pending del
  while :; do
    pending=$(sql orders "SELECT count(*) FROM orders WHERE status = 'PENDING'")
    del=$(metric shopmicro_notification_jobs_delivered_total)
    (( pending == 0 && ${del%.*} >= want )) && break
    seconds_past "$t0" "$DRAIN_LIMIT" &&
      die "$3: $pending orders still PENDING, $(( ${del%.*} - $2 )) of $placed webhooks delivered after $DRAIN_LIMIT s"
    sleep 0.2
  done
  DRAIN_S=$(since "$t0" 1)
}

# round PHASE K: one round of load, the drain, the settle, then RSS[PHASE,K,service].
round() {
  local p=$1 k=$2 spec name rate method path del0 c0 t0 n ok bad=0 s
  local -a pids=() body=()
  del0=$(metric shopmicro_notification_jobs_delivered_total)
  c0=$(stack_cpu_snapshot "${SERVICES[@]}") t0=$EPOCHREALTIME
  load_pids=""
  for spec in "${LOADS[@]}"; do
    IFS='|' read -r name rate method path <<<"$spec"
    body=()
    [[ $method != POST ]] || body=(--body-env ORDER_BODY)
    "$BUILD_DIR/bench/bench_openloop" --url "$GW" --rate "$rate" --seconds "$SECONDS_RUN" --warmup 0 \
      --connections "$CONNS" --method "$method" --path "$path" ${body[@]+"${body[@]}"} \
      --header "Authorization: Bearer $TOKEN" >"$TMP/load-$name.log" 2>&1 &
    pids+=($!)
    load_pids+=" $!"
  done
  for (( n = 0; n < ${#pids[@]}; n++ )); do
    IFS='|' read -r name _ <<<"${LOADS[n]}"
    wait "${pids[n]}" || { cat "$TMP/load-$name.log"; die "round $k: bench_openloop ($name) failed"; }
    s=$(grep '^RESULT ' "$TMP/load-$name.log")
    ok=$(awk '$1 == "STATUS" && $2 == 200 { print $3 }' "$TMP/load-$name.log")
    if [[ ${ok:-0} != "$(result_field "$s" requests)" ]] || (( $(result_field "$s" errors) + $(result_field "$s" timeouts) + $(result_field "$s" unsent) > 0 )); then
      say "round $k: $name: $(grep -E '^(RESULT|STATUS)' "$TMP/load-$name.log" | paste -sd' ')"
      bad=1
    fi
    [[ $name != orders ]] || PLACED=$(result_field "$s" requests)
    ROUND_LOAD[$n]="$name $(result_field "$s" requests) (p99 $(result_field "$s" p99_ms) ms)"
  done
  load_pids=""
  (( ! bad )) || die "round $k: requests were not all answered 200"
  drain "$PLACED" "$del0" "round $k"
  local cpu
  cpu=$(cpu_report cores "$c0" "$(stack_cpu_snapshot "${SERVICES[@]}")" "$(since "$t0" 3)")
  sleep "$SETTLE"
  local line=""
  for s in "${SERVICES[@]}"; do
    RSS[$p,$k,$s]=$(rss_kb "$(service_pid "$s")")
    line+=" $s ${RSS[$p,$k,$s]}"
  done
  say "round $k: ${ROUND_LOAD[*]}; drained $DRAIN_S s after the load; loadavg $(load1)"
  say "round $k: cpu $cpu"
  say "round $k: VmRSS kB after $SETTLE s idle:$line"
}

# phase P: the services of build tree PHASE_BIN[P] started, warmed up, ROUNDS rounds, stopped.
phase() {
  local p=$1 k
  echo "==== phase $((p + 1)) of ${#PHASE_BIN[@]}, ${PHASE_LABEL[p]}: the services of ${PHASE_BIN[p]}; loadavg $(load1)"
  SHOPMICRO_BUILD_DIR=${PHASE_BIN[p]} "$STACK" start "${SERVICES[@]}" >"$TMP/start-$p.log" 2>&1 ||
    { cat "$TMP/start-$p.log"; die "the services did not start"; }
  if (( p == 0 )); then
    # A page of the list is 200 products with a description of 1,080 characters each: an
    # answer of about 250 kB, above glibc's initial mmap threshold (128 KiB), as a shop's
    # catalog page is.
    mapfile -t PRODUCTS < <(sql catalog "INSERT INTO products (name, description, price_cents, stock)
      SELECT 'Soak product ' || g, repeat('A sturdy thing, well made. ', 40), 100 + g, 1000000000
      FROM generate_series(1, $PRODUCTS_N) g RETURNING id")
    (( ${#PRODUCTS[@]} == PRODUCTS_N )) || die "cannot create the products"
    export ORDER_BODY="{\"customer_id\":\"$BENCH_SUB\",\"items\":[{\"product_id\":\"${PRODUCTS[0]}\",\"quantity\":1},{\"product_id\":\"${PRODUCTS[1]}\",\"quantity\":2}]}"
  fi
  local del0 t0
  del0=$(metric shopmicro_notification_jobs_delivered_total)
  t0=$EPOCHREALTIME
  place_order
  drain 1 "$del0" warm-up
  say "warm-up order $ORDER_ID CONFIRMED and its webhook delivered $(since "$t0" 1) s after it was placed"
  local q=$(( READ_RATE / 4 > 0 ? READ_RATE / 4 : 1 ))
  LOADS=("orders|$ORDER_RATE|POST|/v1/orders" "product|$READ_RATE|GET|/v1/products/${PRODUCTS[0]}"
         "list|$LIST_RATE|GET|/v1/products?page_size=200" "order|$q|GET|/v1/orders/$ORDER_ID")
  for (( k = 1; k <= ROUNDS; k++ )); do round "$p" "$k"; done
  "$STACK" stop "${SERVICES[@]}" >"$TMP/stop-$p.log" 2>&1 || { cat "$TMP/stop-$p.log"; die "the services did not stop"; }
}

say_machine
say_tree
T_RUN=$EPOCHREALTIME

echo "==== build ($BUILD_DIR, RelWithDebInfo)"
targets=(bench_openloop shopmicro-jwt)
for d in "${PHASE_BIN[@]}"; do
  [[ $d != "$BUILD_DIR" ]] || { targets+=(catalog order relay notify-sink notification gateway); break; }
done
bench_build "${targets[@]}"
for d in "${PHASE_BIN[@]}"; do
  for b in services/catalog/catalog services/order/order services/relay/relay services/notify-sink/notify-sink \
           services/notification/notification gateway/gateway; do
    [[ -x $d/$b ]] || die "$d/$b is not an executable"
  done
done

echo "==== brokers (run folder $SHOPMICRO_RUN_DIR)"
t0=$EPOCHREALTIME
"$STACK" start kafka >"$TMP/kafka-start.log" 2>&1 &
bg_pid=$!
"$STACK" start rabbitmq >"$TMP/rabbitmq-start.log" 2>&1 || { cat "$TMP/rabbitmq-start.log"; die "rabbitmq did not start"; }
wait "$bg_pid" || { bg_pid=""; cat "$TMP/kafka-start.log"; die "kafka did not start"; }
bg_pid=""
say "kafka and rabbitmq up in $(since "$t0" 1) s"

bench_auth --stack
declare -A RSS=()
ROUND_LOAD=()
for (( p = 0; p < ${#PHASE_BIN[@]}; p++ )); do phase "$p"; done

echo "==== summary (VmRSS kB after each round and $SETTLE s idle; $ROUNDS rounds of $SECONDS_RUN s: orders $ORDER_RATE/s, GET product $READ_RATE/s, GET order $(( READ_RATE / 4 ))/s, list $LIST_RATE/s; nproc $(nproc); loadavg $(loadavg); $(since "$T_RUN" 0) s in all)"
for (( p = 0; p < ${#PHASE_BIN[@]}; p++ )); do
  missed=()
  (( ${#PHASE_BIN[@]} == 1 )) || printf -- '---- %s: %s\n' "${PHASE_LABEL[p]}" "${PHASE_BIN[p]}"
  hdr=$(printf '%-14s' service)
  for (( k = 1; k <= ROUNDS; k++ )); do hdr+=$(printf ' %9s' "round $k"); done
  for (( k = 2; k <= ROUNDS; k++ )); do hdr+=$(printf ' %7s' "r$k/r1"); done
  printf '%s  goal: within %s %% of round 1\n' "$hdr" "$GOAL_PCT"
  for s in "${SERVICES[@]}"; do
    row=$(printf '%-14s' "$s") met=met
    for (( k = 1; k <= ROUNDS; k++ )); do row+=$(printf ' %9s' "${RSS[$p,$k,$s]}"); done
    for (( k = 2; k <= ROUNDS; k++ )); do
      r=$(ratio "${RSS[$p,$k,$s]}" "${RSS[$p,1,$s]}" 3)
      row+=$(printf ' %7s' "$r")
      [[ $(goal_met "$r" '<=' "$(awk -v g="$GOAL_PCT" 'BEGIN { print 1 + g / 100 }')") == met ]] || met="NOT met"
    done
    if [[ $s == "$NO_GOAL" ]]; then row+="  (no goal: keeps deliveries by design)"
    else row+="  $met"; [[ $met == met ]] || missed+=("$s")
    fi
    printf '%s\n' "$row"
  done
  if (( ${#missed[@]} )); then say "${PHASE_LABEL[p]}: goal NOT met for ${missed[*]}"
  else say "${PHASE_LABEL[p]}: goal met for every service"
  fi
done
