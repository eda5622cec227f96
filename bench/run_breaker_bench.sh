#!/usr/bin/env bash
# bench/run_breaker_bench.sh: POST /v1/orders while the catalog is SIGKILLed (order's breaker for
# it open), through one or more gateway binaries side by side in one run (issue 17).
#
#   bench/run_breaker_bench.sh [--seconds D] [--connections N] [--wrk-threads N] [--rounds N]
#                              [--rate R] [--open-connections N]
#                              [--gateway-bin LABEL=PATH]... [--gateway-env NAME=VALUE]...
#                              [--pg-wait S]
#
# The gateway checks bearer tokens: the script makes a key pair of its own (bench/lib.sh's
# bench_auth) and starts every gateway with its JWKS, issuer and audience and with
# GATEWAY_RATE_LIMITS=off (the benchmark measures the refusal path, not the limiter:
# bench/ratelimit_bench does); every request carries the token (sub c1, scopes catalog:write
# orders:write orders:read; wrk through WRK_TOKEN, bench_openloop through --header), and the
# orders are customer c1's. A --gateway-bin from before the token check ignores those settings,
# but then the build's order refuses its calls (they carry no caller).
#
# 1. deploy/local/stack.sh pg-up (the project's Postgres); while another checkout's cluster holds
#    the port it retries for up to --pg-wait seconds (default 600)
# 2. builds catalog, order, gateway, shopmicro-jwt and bench_openloop (RelWithDebInfo) in $SHOPMICRO_BENCH_BUILD_DIR (default
#    build-bench/)
# 3. fresh databases; starts the real catalog and order (log level warn, order's admin port on a
#    free port for its counters), and the build's gateway; places one order of two products
# 4. SIGKILLs the catalog and places orders until order answers "circuit open" (its breaker for
#    the catalog is open; its default 10 s cooldown, then one trial, keep it so)
# 5. per round (--rounds, default 1), per gateway (each --gateway-bin LABEL=PATH in the order
#    given, then the build's, labelled "build"): a fresh gateway process (GATEWAY_LOG_LEVEL=warn,
#    GATEWAY_THREADS = cores) in front of the same order; waits until it answers 503 "circuit
#    open" three times in a row; then wrk -t2 -c16 for --seconds (15) of POST /v1/orders
#    (bench/wrk/create_order.lua: every response checked for Retry-After and a google.rpc.Status
#    body) with, beside it, one GET /v1/orders/{id} of the placed order every 20 ms; the CPU of
#    wrk, the gateway and order (/proc, during the load), order's refused CreateOrders (its
#    grpc_server_handled_total) and the gateway's gateway_failfast_answers_total; then, unless
#    --rate 0, the same for an open-loop load (bench/bench_openloop.c) of --rate (default
#    25,000) POST /v1/orders per second on --open-connections (64): its latency runs from when
#    each request was due, so it is the p99 AT that rate, which wrk (closed loop, always at
#    saturation on these 2 cores) cannot tell; SIGTERM (the gateway must exit 0)
# 6. prints one line per gateway, round and load: 503/s, p50/p99 (target: >= 25,000 503/s, p99
#    <= 2 ms), failed requests, the share with Retry-After and with a Status body, the GET
#    /v1/orders/{id} answers, CPU us per request of the gateway and order, order's refusals/s
# --gateway-env NAME=VALUE: extra environment for every gateway (repeatable).
# Every process is stopped and every database dropped on any exit. Figures: docs/benchmarks.md,
# "Breaker open on POST /v1/orders (issue 17)".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PG_PORT=${SHOPMICRO_PG_PORT:-25432}
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
export SHOPMICRO_PG_PORT=$PG_PORT
LUA="$ROOT/bench/wrk/create_order.lua"

SECONDS_RUN=15
CONNECTIONS=16
RATE=25000
OPEN_CONNECTIONS=64
WRK_THREADS=2
ROUNDS=1
PG_WAIT=600
GW_SPECS=() GW_EXTRA_ENV=()   # --gateway-bin LABEL=PATH each; GW_LABELS, GW_BINS from them
TARGET_RPS=25000
TARGET_P99_MS=2

while (( $# > 0 )); do
  case $1 in
    --seconds)     SECONDS_RUN=${2:?}; shift 2 ;;
    --connections) CONNECTIONS=${2:?}; shift 2 ;;
    --wrk-threads) WRK_THREADS=${2:?}; shift 2 ;;
    --rate)        RATE=${2:?}; shift 2 ;;
    --open-connections) OPEN_CONNECTIONS=${2:?}; shift 2 ;;
    --rounds)      ROUNDS=${2:?}; shift 2 ;;
    --pg-wait)     PG_WAIT=${2:?}; shift 2 ;;
    --gateway-bin) [[ ${2:?} == ?*=?* ]] || arg_error "--gateway-bin wants LABEL=PATH of an executable"
                   GW_SPECS+=("$2"); shift 2 ;;
    --gateway-env) need_env GATEWAY --gateway-env "${2:?}"; GW_EXTRA_ENV+=("$2"); shift 2 ;;
    -h|--help)     usage; exit 0 ;;
    *) unknown_arg "$1" ;;
  esac
done
need_positive "$SECONDS_RUN" "$CONNECTIONS" "$WRK_THREADS" "$ROUNDS" "$OPEN_CONNECTIONS"
phase_bins --gateway-bin gateway ${GW_SPECS[@]+"${GW_SPECS[@]}"}
GW_LABELS=(${PHASE_LABEL[@]+"${PHASE_LABEL[@]}"}) GW_BINS=(${PHASE_BIN[@]+"${PHASE_BIN[@]}"})
[[ $RATE =~ ^[0-9]+$ ]] || arg_error "--rate wants a whole number of requests per second (0: no open-loop phase)"
(( SECONDS_RUN >= 4 )) || arg_error "--seconds must be at least 4 (the CPU is measured inside the load)"
command -v wrk >/dev/null || { echo "run_breaker_bench: wrk is not installed (deploy/local/packages.txt)" >&2; exit 1; }

pg_clients "$PG_PORT"
CAT_DB="breaker_bench_cat_$$" ORD_DB="breaker_bench_ord_$$"
OWN_DBS=("$CAT_DB" "$ORD_DB")
DBS=()
TMP=$(mktemp -d /tmp/breaker-bench.XXXXXX)
CAT_PID="" ORD_PID="" GW_PID=""

# shellcheck disable=SC2317  # invoked by on_exit
cleanup() {
  local db
  end_pids "${run_pid:-}" "${watch_pid:-}" "${probe_pid:-}"
  stop_proc gateway GW_PID
  stop_proc order ORD_PID
  stop_proc catalog CAT_PID
  for db in "${DBS[@]}"; do
    "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" ||
      say "warning: could not drop database $db"
  done
  (( $1 == 0 )) || tail_logs 20 "$TMP" gateway order catalog
}
on_exit cleanup

# start BIN NAME PIDVAR PORT VAR=VALUE...: the binary in the background (log $TMP/NAME.log),
# its pid into PIDVAR once PORT accepts.
start() {
  local bin=$1 name=$2 var=$3 port=$4
  shift 4
  env "$@" "$bin" >>"$TMP/$name.log" 2>&1 </dev/null &
  printf -v "$var" '%s' "$!"
  wait_port "$var" "$port" 15 "$name"
}

start_gateway() {  # start_gateway BIN
  GW_PORT=$(free_port) GW_ADMIN=$(free_port)
  GW_URL=http://127.0.0.1:$GW_PORT
  GW_ADMIN_URL=http://127.0.0.1:$GW_ADMIN   # its /metrics
  start "$1" gateway GW_PID "$GW_PORT" GATEWAY_LISTEN="127.0.0.1:$GW_PORT" GATEWAY_LOG_LEVEL=warn \
    GATEWAY_ADMIN_LISTEN="127.0.0.1:$GW_ADMIN" \
    GATEWAY_LOCK_DIR="$TMP" GATEWAY_CATALOG_ADDR="127.0.0.1:$CAT_PORT" \
    GATEWAY_ORDER_ADDR="127.0.0.1:$ORD_PORT" "${GW_AUTH_ENV[@]}" ${GW_EXTRA_ENV[@]+"${GW_EXTRA_ENV[@]}"}
}

# post_order: "status time_s body" of one POST /v1/orders of $ORDER_BODY.
post_order() {
  local out
  out=$(curl -s -m 15 "${AUTH_HDR[@]}" -H 'Content-Type: application/json' -d "$ORDER_BODY" \
    -w '\n%{http_code} %{time_total}' "$GW_URL/v1/orders" || true)
  printf '%s %s\n' "${out##*$'\n'}" "${out%$'\n'*}"
}

# metric URL SERIES: the value of the series (its labels included, as printed) at URL's /metrics.
metric() {
  curl -s "$1/metrics" | awk -v s="$2" 'index($0, s " ") == 1 { print $NF; f = 1 } END { if (!f) print "-" }'
}
ORDER_REFUSALS='grpc_server_handled_total{grpc_type="unary",grpc_service="shopmicro.order.v1.OrderService",grpc_method="CreateOrder",grpc_code="Unavailable"}'
FAST_FAILS='gateway_failfast_answers_total{route="/v1/orders",method="POST"}'

say_machine
say_tree
say "$(wrk --version 2>&1 | head -n1 | sed 's/ Copyright.*//')"

echo "==== postgres"
pg_up_waiting "$PG_WAIT"

echo "==== build ($BUILD_DIR, RelWithDebInfo)"
bench_build catalog order gateway shopmicro-jwt bench_openloop
bench_auth "$TMP/auth"
GW_LABELS+=(build) GW_BINS+=("$BUILD_DIR/gateway/gateway")

echo "==== catalog, order and the build's gateway (fresh databases $CAT_DB, $ORD_DB)"
for db in "$CAT_DB" "$ORD_DB"; do "${PSQL[@]}" -d postgres -c "CREATE DATABASE \"$db\""; DBS+=("$db"); done
CAT_PORT=$(free_port) ORD_PORT=$(free_port) ORD_ADMIN=$(free_port)
start "$BUILD_DIR/services/catalog/catalog" catalog CAT_PID "$CAT_PORT" CATALOG_LISTEN="127.0.0.1:$CAT_PORT" \
  CATALOG_LOG_LEVEL=warn CATALOG_KAFKA_BROKERS=none CATALOG_ADMIN_LISTEN=none \
  CATALOG_DB_DSN="host=127.0.0.1 port=$PG_PORT dbname=$CAT_DB user=postgres"
start "$BUILD_DIR/services/order/order" order ORD_PID "$ORD_PORT" ORDER_LISTEN="127.0.0.1:$ORD_PORT" \
  ORDER_LOG_LEVEL=warn ORDER_KAFKA_BROKERS=none ORDER_ADMIN_LISTEN="127.0.0.1:$ORD_ADMIN" \
  ORDER_DB_DSN="host=127.0.0.1 port=$PG_PORT dbname=$ORD_DB user=postgres" ORDER_CATALOG_ADDR="127.0.0.1:$CAT_PORT"
start_gateway "$BUILD_DIR/gateway/gateway"
say "catalog pid $CAT_PID :$CAT_PORT, order pid $ORD_PID :$ORD_PORT (admin :$ORD_ADMIN), gateway pid $GW_PID :$GW_PORT"
ids=()
for i in 1 2; do
  id=$(curl -sf "${AUTH_HDR[@]}" -d "{\"name\":\"breaker bench $i\",\"price_cents\":$((100 * i)),\"stock\":1000000}" "$GW_URL/v1/products" |
    sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
  [[ -n $id ]] || die "cannot create a product"
  ids+=("$id")
done
ORDER_BODY="{\"customer_id\":\"$BENCH_SUB\",\"items\":[{\"product_id\":\"${ids[0]}\",\"quantity\":1},{\"product_id\":\"${ids[1]}\",\"quantity\":2}]}"
read -r code _ body < <(post_order)
[[ $code == 200 ]] || die "the first order failed: $code $body"
ORDER_ID=$(sed -n 's/^{"id":"\([^"]*\)".*/\1/p' <<<"$body")
say "order $ORDER_ID placed: $body"

echo "==== catalog SIGKILLed"
kill -KILL "$CAT_PID"
wait "$CAT_PID" 2>/dev/null || true
CAT_PID=""
for (( i = 0; ; i++ )); do
  (( i < 50 )) || die "order never answered \"circuit open\""
  read -r code secs body < <(post_order)
  say "  POST /v1/orders: $code in $secs s: ${body:0:160}"
  [[ $code == 503 && $body == *"circuit open"* ]] && break
done
stop_proc gateway GW_PID || die "the gateway did not exit 0"

# wait_fast: until the gateway answers 503 "circuit open" three times in a row.
wait_fast() {
  local fast=0 tries=0 code secs body
  while (( fast < 3 )); do
    (( tries++ < 300 )) || die "the gateway never answered 503 circuit open"
    read -r code secs body < <(post_order)
    if [[ $code == 503 && $body == *"circuit open"* ]]; then fast=$((fast + 1)); else fast=0; sleep 0.05; fi
  done
  say "ready: $(curl -s -D - -o /dev/null "${AUTH_HDR[@]}" -H 'Content-Type: application/json' -d "$ORDER_BODY" "$GW_URL/v1/orders" |
    tr -d '\r' | grep -i '^retry-after' || echo 'no Retry-After')"
}

# probe_orders SECONDS: one GET /v1/orders/$ORDER_ID every 20 ms on one keep-alive connection;
# prints "PROBE n=.. ok=.. other=.. max_ms=..".
probe_orders() {
  BENCH_TOKEN=$TOKEN /usr/bin/python3 - "$GW_PORT" "$ORDER_ID" "$1" <<'EOF'
import http.client, os, sys, time
port, oid, secs = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
auth = {"Authorization": "Bearer " + os.environ["BENCH_TOKEN"]}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
n = ok = 0
worst = 0.0
end = time.monotonic() + secs
while time.monotonic() < end:
    t0 = time.monotonic()
    try:
        c.request("GET", "/v1/orders/" + oid, headers=auth)
        r = c.getresponse()
        body = r.read()
        ok += r.status == 200 and oid.encode() in body
    except OSError:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    n += 1
    worst = max(worst, time.monotonic() - t0)
    time.sleep(max(0.0, 0.02 - (time.monotonic() - t0)))
print("PROBE n=%d ok=%d other=%d max_ms=%.1f" % (n, ok, n - ok, worst * 1000))
EOF
}

# cores LABEL: the cores watch_cpu saw LABEL's processes use in the phase.
cores() { sed -n "s/.* cores (.*\b$1 \([0-9.]*\).*/\1/p" "$TMP/watch.log"; }
per_req() { awk -v c="$1" -v r="$2" 'BEGIN { if (c != "" && r > 0) printf "%.1f", c * 1e6 / r; else print "?" }'; }

# phase LABEL ROUND LOAD CMD...: CMD (wrk or bench_openloop, both print RESULT/STATUS/CHECK) for
# $SECONDS_RUN s against the running gateway, the GET probe beside it, CPU watched inside the
# load; appends the phase's summary row to ROWS.
phase() {
  local label=$1 round=$2 load=$3 refused0 refused1 fast line rps n n503 ra sb probe errs
  shift 3
  refused0=$(metric "http://127.0.0.1:$ORD_ADMIN" "$ORDER_REFUSALS")
  probe_orders "$SECONDS_RUN" >"$TMP/probe.log" 2>&1 &
  probe_pid=$!
  watched_run load "$TMP/load.log" named "pg-orders=$ORD_DB" 1 $((SECONDS_RUN - 2)) \
    gateway="$GW_PID" order="$ORD_PID" -- "$@"
  wait "$probe_pid" || true
  probe_pid=""
  refused1=$(metric "http://127.0.0.1:$ORD_ADMIN" "$ORDER_REFUSALS")
  fast=$(metric "$GW_ADMIN_URL" "$FAST_FAILS")
  grep -E '^(RESULT|STATUS|CHECK) ' "$TMP/load.log"
  cat "$TMP/watch.log" "$TMP/probe.log"
  line=$(grep '^RESULT ' "$TMP/load.log") || die "$load printed no RESULT line"
  rps=$(result_field "$line" rps) n=$(result_field "$line" requests)
  n503=$(awk '$1 == "STATUS" && $2 == 503 { print $3 }' "$TMP/load.log")
  ra=$(awk '$1 == "CHECK" && $2 == "retry_after" { print $3 }' "$TMP/load.log")
  sb=$(awk '$1 == "CHECK" && $2 == "status_body" { print $3 }' "$TMP/load.log")
  # wrk: connect/read/write errors and timeouts; bench_openloop: errors and timeouts.
  errs=$(awk '{ n = 0; for (i = 1; i <= NF; i++) if ($i ~ /^(connect_err|read_err|write_err|timeouts|errors)=/) { split($i, f, "="); n += f[2] } print n }' <<<"$line")
  probe=$(grep '^PROBE ' "$TMP/probe.log" || echo "PROBE n=0 ok=0")
  ROWS+=("$(printf '%-8s %5s %-12s %9s %6s / %-6s %6s %6s %6s %6s %11s %8s %8s %11s %9s' "$label" "$round" "$load" "$rps" \
    "$(result_field "$line" p50_ms)" "$(result_field "$line" p99_ms)" "$errs" \
    "$(ratio "${n503:-0}" "$n" 4)" "$(ratio "${ra:-0}" "$n" 4)" "$(ratio "${sb:-0}" "$n" 4)" \
    "$(result_field "$probe" ok)/$(result_field "$probe" n)" \
    "$(per_req "$(cores gateway)" "$rps")" "$(per_req "$(cores order)" "$rps")" \
    "$(awk -v a="$refused0" -v b="$refused1" -v s="$SECONDS_RUN" 'BEGIN { if (a == "-") a = 0; if (b == "-") print "?"; else printf "%.0f", (b - a) / s }')" \
    "$fast")")
}

ROWS=()
for (( round = 1; round <= ROUNDS; round++ )); do
  for k in "${!GW_LABELS[@]}"; do
    label=${GW_LABELS[k]}
    echo "==== round $round, gateway \"$label\" (${GW_BINS[k]})"
    start_gateway "${GW_BINS[k]}"
    wait_fast
    say "loadavg $(load1)"
    echo "---- closed loop: wrk -t$WRK_THREADS -c$CONNECTIONS -d${SECONDS_RUN}s (as many as it answers)"
    phase "$label" "$round" "wrk-c$CONNECTIONS" env WRK_ORDER_BODY="$ORDER_BODY" WRK_TOKEN="$TOKEN" wrk -t"$WRK_THREADS" \
      -c"$CONNECTIONS" -d"${SECONDS_RUN}s" --timeout 5s -s "$LUA" "$GW_URL"
    if (( RATE > 0 )); then
      echo "---- open loop: bench_openloop --rate $RATE for ${SECONDS_RUN}s (latency from each request's due time)"
      phase "$label" "$round" "open-$RATE" env WRK_ORDER_BODY="$ORDER_BODY" "$BUILD_DIR/bench/bench_openloop" \
        --url "$GW_URL" --rate "$RATE" --seconds $((SECONDS_RUN - 1)) --warmup 1 --connections "$OPEN_CONNECTIONS" \
        --method POST --path /v1/orders --body-env WRK_ORDER_BODY --header "Authorization: Bearer $TOKEN"
    fi
    stop_proc gateway GW_PID || die "gateway \"$label\" did not exit 0 after SIGTERM"
  done
done

echo "==== summary (target: >= $TARGET_RPS 503/s with p99 <= $TARGET_P99_MS ms, each with Retry-After, GET /v1/orders/{id} 200)"
printf '%-8s %5s %-12s %9s %15s %6s %6s %6s %6s %11s %8s %8s %11s %9s\n' gateway round load "503/s" "p50 / p99 ms" errors "503" \
  "R-A" "Status" "GET 200" "gw us" "order us" "order ref/s" "fastfails"
printf '%s\n' "${ROWS[@]}"
say "load: wrk-cN closed loop on N connections (capacity), open-R bench_openloop at R requests/s (latency at that rate,"
say "from each request's due time); errors: failed or timed-out requests;"
say "503, R-A, Status: shares of all responses that were 503, had Retry-After, had a google.rpc.Status body;"
say "GET 200: GET /v1/orders/{id} answered 200 of those sent meanwhile; gw us, order us: CPU per POST;"
say "order ref/s: CreateOrders order refused per second; fastfails: the gateway's gateway_failfast_answers_total since it started (- : no such series)"
