#!/usr/bin/env bash
# bench/run_order_bench.sh: CreateOrder through the gateway vs pgbench -N, in one run.
#
#   bench/run_order_bench.sh [--connections N] [--seconds D] [--products N] [--items N]
#                            [--order-workers N] [--catalog-workers N]
#                            [--gateway-threads N] [--idempotency-keys]
#                            [--order-bin [LABEL=]PATH]...
#
# --order-bin: the order binary to measure (default: the build's); given more than once, steps
# 3-5 run once per binary, in the order given, each with fresh databases and the same catalog,
# gateway and client, so that two versions (e.g. one built from `git worktree add /tmp/before
# <commit>` in a build dir of its own) compare side by side in one run (A B A B to see the noise).
#
# The gateway checks bearer tokens: the script makes a key pair of its own (bench/lib.sh's
# bench_auth) and starts the gateway with its JWKS, issuer and audience and with
# GATEWAY_RATE_LIMITS=off (the benchmark measures the request path, not the limiter:
# bench/ratelimit_bench does); bench_http sends the token (sub c1, scopes catalog:write
# orders:write orders:read) on every request, and every order is customer c1's.
#
# 1. deploy/local/stack.sh pg-up (the project's Postgres, 127.0.0.1:$SHOPMICRO_PG_PORT);
#    while the port is held by another checkout's cluster, retries for up to
#    $SHOPMICRO_PG_WAIT_S seconds (default 600)
# 2. builds catalog, order, gateway, shopmicro-jwt and bench_http (RelWithDebInfo) in
#    $SHOPMICRO_BENCH_BUILD_DIR (default build-bench/)
# 3. creates fresh databases for the catalog and the orders, starts the real
#    catalog, order and gateway binaries on free ports (log level warn: no
#    access line per call; workers: the services' defaults unless given),
#    seeds --products products through POST /v1/products, VACUUM ANALYZEs
# 4. runs bench_http: --connections keep-alive connections (default 16), one
#    POST /v1/orders in flight on each (--items distinct products per order, default 2), 1 s
#    warm-up, --seconds measured (default 10); orders/s, p50/p90/p99, failures
#    by HTTP status
# 5. stops the services (SIGTERM: they drain), then checks with SQL that the
#    database holds exactly what the HTTP 200s announced: orders = OK,
#    order_items = items x OK, outbox = OK, every returned id an order
# 6. creates a fresh pgbench database (pgbench -i -s 10) and runs
#    pgbench -N -M prepared -c 4 -j 2 -T <seconds> over TCP 127.0.0.1 against
#    the same Postgres
# 7. prints nproc, both figures, the ratio (proposed target >= 0.20), the cores
#    each phase used and the CPU per order and per pgbench transaction, and per
#    order the statements order ran (its shopmicro_db_queries_total, by
#    statement: each is one round trip) and the transactions of its database
#    (pg_stat_database), over the whole run.
# Every service is stopped and every database dropped on any exit (also on
# failure or Ctrl-C). Exit status 1 when something failed or the check did not
# hold. Figures: docs/benchmarks.md, "CreateOrder through the gateway".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PG_PORT=${SHOPMICRO_PG_PORT:-25432}
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
PG_WAIT_S=${SHOPMICRO_PG_WAIT_S:-600}
export SHOPMICRO_PG_PORT=$PG_PORT

CONNS=16
SECONDS_RUN=10
PRODUCTS=1000
ITEMS=2
ORDER_WORKERS=""     # "" = the service's default
CATALOG_WORKERS=""
GATEWAY_THREADS=""
IDEM=0
PGBENCH_SCALE=10
TARGET_RATIO=0.20    # proposed from the first runs (median), see docs/benchmarks.md
ORDER_BINS=()        # [LABEL=]PATH of each order phase; none: the build's binary

while (( $# > 0 )); do
  case $1 in
    --connections)      CONNS=${2:?}; shift 2 ;;
    --seconds)          SECONDS_RUN=${2:?}; shift 2 ;;
    --products)         PRODUCTS=${2:?}; shift 2 ;;
    --items)            ITEMS=${2:?}; shift 2 ;;
    --order-workers)    ORDER_WORKERS=${2:?}; shift 2 ;;
    --catalog-workers)  CATALOG_WORKERS=${2:?}; shift 2 ;;
    --gateway-threads)  GATEWAY_THREADS=${2:?}; shift 2 ;;
    --idempotency-keys) IDEM=1; shift ;;
    --order-bin)        ORDER_BINS+=("${2:?}"); shift 2 ;;
    -h|--help)          usage; exit 0 ;;
    *) unknown_arg "$1" ;;
  esac
done
need_positive "$CONNS" "$SECONDS_RUN" "$PRODUCTS" "$ITEMS" ${ORDER_WORKERS:+"$ORDER_WORKERS"} \
  ${CATALOG_WORKERS:+"$CATALOG_WORKERS"} ${GATEWAY_THREADS:+"$GATEWAY_THREADS"}
(( PRODUCTS >= ITEMS )) || arg_error "--products must be at least $ITEMS"
phase_bins --order-bin order ${ORDER_BINS[@]+"${ORDER_BINS[@]}"}

pg_clients "$PG_PORT"
PGB_DB="order_bench_pgb_$$"
OWN_DBS=("$PGB_DB")          # not "other sessions"; each phase adds its two
DBS=()                       # databases created by this run, dropped on exit
TMP=$(mktemp -d /tmp/order-bench.XXXXXX)
declare -A SVC_PID=() SVC_PORT=()
SVC_ORDER=()                 # start order; stopped in reverse

# stop_service NAME: stop_pid with 15 s of grace (the services drain for up to 10 s); a service
# that did not exit 0 is shown with its last log lines.
stop_service() {
  local name=$1 pid=${SVC_PID[$1]:-} st=0
  stop_pid "$pid" "$name" 15 || st=$?
  (( st == 0 )) || say "warning: $name (pid $pid) exited with status $st (log: last lines below)"
  (( st == 0 )) || tail -n 5 "$TMP/$name.log" | sed 's/^/    /'
  SVC_PID[$name]=""
}

stop_services() {
  local i
  for (( i = ${#SVC_ORDER[@]} - 1; i >= 0; i-- )); do stop_service "${SVC_ORDER[i]}"; done
}

# cleanup RC: the phase's processes and the services stopped, the databases dropped.
# shellcheck disable=SC2317  # invoked by on_exit
cleanup() {
  local db
  (( $1 == 0 )) || say "exiting with status $1: stopping the services, dropping the databases"
  end_pids "${run_pid:-}" "${watch_pid:-}"
  stop_services
  for db in "${DBS[@]}"; do
    "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" ||
      say "warning: could not drop database $db"
  done
  (( $1 == 0 )) || tail_logs 15 "$TMP" "${SVC_ORDER[@]}"
}
on_exit cleanup

create_db() {
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE \"$1\""
  DBS+=("$1")
}

# cpu_window SECONDS: how long watch_cpu measures, so that it ends before the
# load does (it starts after the warm-up, and its pg_stat_activity query takes
# a moment on a busy machine).
cpu_window() { awk -v s="$1" 'BEGIN { print (s > 3) ? s - 2 : s / 2 }'; }

# start_service NAME BINARY VAR=VALUE...: the real binary on a free port
# (NAME_LISTEN is set by the caller through @PORT@ in a value); waits for TCP.
start_service() {
  local name=$1 bin=$2 port
  shift 2
  port=$(free_port)
  local -a env=()
  for a; do env+=("${a//@PORT@/$port}"); done
  env "${env[@]}" "$bin" >>"$TMP/$name.log" 2>&1 </dev/null &
  SVC_PID[$name]=$!
  SVC_PORT[$name]=$port
  SVC_ORDER+=("$name")
  wait_port "SVC_PID[$name]" "$port" 15 "$name"
  say "$name pid ${SVC_PID[$name]} on 127.0.0.1:$port"
}

say_machine
say_tree

echo "==== postgres"
pg_up_waiting "$PG_WAIT_S"
PG_STARTED=$(pg_start_time)
say "postgres $(sql postgres "SHOW server_version"); synchronous_commit=$(sql postgres "SHOW synchronous_commit") fsync=$(sql postgres "SHOW fsync")"

echo "==== build ($BUILD_DIR, RelWithDebInfo)"
bench_build catalog order gateway shopmicro-jwt bench_http
BENCH="$BUILD_DIR/bench/bench_http"
bench_auth "$TMP/auth"
# customer c1 by name (the token's subject): an --order-bin from before the owner rule wants one.
BENCH_AUTH_ARGS=(--header "Authorization: Bearer $TOKEN" --customer "$BENCH_SUB")
if (( ${#PHASE_BIN[@]} == 0 )); then PHASE_LABEL=(order) PHASE_BIN=("$BUILD_DIR/services/order/order"); fi
declare -a R_RATE=() R_P50=() R_P99=() R_ERRS=() R_BY_STATUS=() R_OWN=() R_SPLIT=() R_CHECK=() R_CHECK_OK=() R_STMTS=() R_XACTS=()

# check WHAT GOT WANT: one line of the database check; CHECK_OK=0 on a mismatch.
check() {
  local verdict=ok
  [[ $2 == "$3" ]] || { verdict=MISMATCH; CHECK_OK=0; }
  printf '  %-50s %9s   expected %9s   %s\n' "$1" "$2" "$3" "$verdict"
}

# db_queries ADMIN_PORT: "statement count" per statement the order service has run (its
# shopmicro_db_queries_total, every outcome), from its admin port.
db_queries() {
  curl -sf "http://127.0.0.1:$1/metrics" |
    sed -n 's/^shopmicro_db_queries_total{statement="\([^"]*\)",outcome="[^"]*"} \([0-9]*\)$/\1 \2/p' |
    awk '{ n[$1] += $2 } END { for (s in n) print s, n[s] }' | sort
}

# db_xacts DB: transactions committed and rolled back in DB so far (pg_stat_database).
db_xacts() { sql postgres "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$1'"; }

# per_order_counts BEFORE AFTER N: the statements run between two db_queries snapshots per
# request, in total and by statement ("5.00 (ord_begin 1.00, ...)"; those under 0.005 left out).
per_order_counts() {
  awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN {
    n = split(a, x, "\n"); for (i = 1; i <= n; i++) { split(x[i], f, " "); s[f[1]] = f[2] }
    n = split(b, y, "\n"); for (i = 1; i <= n; i++) { split(y[i], f, " "); d = f[2] - s[f[1]]; if (d <= 0) continue
      t += d; if (d / r >= 0.005) out = out sprintf("%s%s %.2f", out == "" ? "" : ", ", f[1], d / r) }
    if (r <= 0 || b == "") { print "?"; exit }
    printf "%.2f (%s)", t / r, out }'
}

# drop_db DB: drops a database this run created (before the next phase, so that its autovacuum
# cannot run into it).
drop_db() {
  local d keep=()
  "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)"
  for d in "${DBS[@]}"; do [[ $d == "$1" ]] || keep+=("$d"); done
  DBS=(${keep[@]+"${keep[@]}"})
}

# order_phase I: steps 3-5 with order binary PHASE_BIN[I], fresh databases, its figures into
# the R_* arrays at I; the services stopped and the databases dropped at the end.
order_phase() {
  local i=$1 label=${PHASE_LABEL[$1]} bin=${PHASE_BIN[$1]} n nw admin q0 q1 x0 x1 unpublished
  local CAT_DB="order_bench_cat_$$_$1" ORD_DB="order_bench_ord_$$_$1"
  OWN_DBS+=("$CAT_DB" "$ORD_DB")
  echo "==== services for $label: $bin (fresh databases $CAT_DB, $ORD_DB)"
  for n in catalog order gateway; do : >"$TMP/$n.log"; done
  create_db "$CAT_DB"
  create_db "$ORD_DB"
  admin=$(free_port)
  start_service catalog "$BUILD_DIR/services/catalog/catalog" \
    "CATALOG_LISTEN=127.0.0.1:@PORT@" "CATALOG_LOG_LEVEL=warn" "CATALOG_KAFKA_BROKERS=none" "CATALOG_ADMIN_LISTEN=none" \
    "CATALOG_DB_DSN=host=127.0.0.1 port=$PG_PORT dbname=$CAT_DB user=postgres" \
    ${CATALOG_WORKERS:+"CATALOG_WORKERS=$CATALOG_WORKERS"}
  start_service order "$bin" \
    "ORDER_LISTEN=127.0.0.1:@PORT@" "ORDER_LOG_LEVEL=warn" "ORDER_KAFKA_BROKERS=none" "ORDER_ADMIN_LISTEN=127.0.0.1:$admin" \
    "ORDER_DB_DSN=host=127.0.0.1 port=$PG_PORT dbname=$ORD_DB user=postgres" \
    "ORDER_CATALOG_ADDR=127.0.0.1:${SVC_PORT[catalog]}" \
    ${ORDER_WORKERS:+"ORDER_WORKERS=$ORDER_WORKERS"}
  start_service gateway "$BUILD_DIR/gateway/gateway" \
    "GATEWAY_LISTEN=127.0.0.1:@PORT@" "GATEWAY_LOG_LEVEL=warn" "GATEWAY_LOCK_DIR=$TMP" \
    "GATEWAY_ADMIN_LISTEN=127.0.0.1:0" \
    "GATEWAY_CATALOG_ADDR=127.0.0.1:${SVC_PORT[catalog]}" \
    "GATEWAY_ORDER_ADDR=127.0.0.1:${SVC_PORT[order]}" "${GW_AUTH_ENV[@]}" \
    ${GATEWAY_THREADS:+"GATEWAY_THREADS=$GATEWAY_THREADS"}
  URL="http://127.0.0.1:${SVC_PORT[gateway]}"
  say "settings: ORDER_WORKERS=${ORDER_WORKERS:-8 (default)} CATALOG_WORKERS=${CATALOG_WORKERS:-4 (default)} GATEWAY_THREADS=${GATEWAY_THREADS:-$(nproc) (default: nproc)}"

  say "seeding $PRODUCTS products via POST /v1/products"
  "$BENCH" --url "$URL" --ensure "$PRODUCTS" --seed-only "${BENCH_AUTH_ARGS[@]}" >"$TMP/seed.log" 2>&1 ||
    { cat "$TMP/seed.log"; die "seeding failed"; }
  sed 's/^/[bench] /' "$TMP/seed.log"
  "${PSQL[@]}" -d "$CAT_DB" -c "VACUUM ANALYZE products"
  "${PSQL[@]}" -d postgres -c "CHECKPOINT"

  echo "==== bench_http: POST /v1/orders, $CONNS connections, $ITEMS items per order, $SECONDS_RUN s"
  say "other sessions on this Postgres: $(other_pg_sessions "${OWN_DBS[@]}"); loadavg $(load1)"
  bench_args=(--url "$URL" --connections "$CONNS" --seconds "$SECONDS_RUN" --items "$ITEMS"
              --ids-out "$TMP/ids.txt")
  (( IDEM )) && bench_args+=(--idempotency-keys)
  say "bench_http ${bench_args[*]} --customer $BENCH_SUB --header 'Authorization: Bearer <the token>'"
  q0=$(db_queries "$admin")
  x0=$(db_xacts "$ORD_DB")
  watched_run bench_http "$TMP/bench.log" split "pg-catalog=$CAT_DB,pg-orders=$ORD_DB" 1.5 "$(cpu_window "$SECONDS_RUN")" \
    "gateway=${SVC_PID[gateway]}" "order=${SVC_PID[order]}" "catalog=${SVC_PID[catalog]}" -- "$BENCH" "${bench_args[@]}" "${BENCH_AUTH_ARGS[@]}"
  cat "$TMP/bench.log" "$TMP/watch.log"
  ORD_OWN=$(own_cores "$TMP/watch.log")
  ORD_SPLIT=$(sed -n 's/.*own processes: [0-9.]* (\(.*\)) of.*/\1/p' "$TMP/watch.log")
  LINE=$(grep '^RESULT ' "$TMP/bench.log") || die "bench_http printed no RESULT line"
  RATE=$(result_field "$LINE" orders_per_s)
  P50=$(result_field "$LINE" p50_ms)
  P99=$(result_field "$LINE" p99_ms)
  ERRS=$(result_field "$LINE" errors)
  BY_STATUS=$(result_field "$LINE" failed_by_status)
  OK_TOTAL=$(result_field "$LINE" ok_total)
  REQ_TOTAL=$(result_field "$LINE" requests_total)
  FAILED_TOTAL=$(( REQ_TOTAL - OK_TOTAL ))
  q1=$(db_queries "$admin")

  echo "==== check: the orders database against the $OK_TOTAL HTTP 200 responses"
  say "stopping the services first (SIGTERM: in-flight work drains)"
  stop_services
  x1=$(db_xacts "$ORD_DB")   # after the backends have exited: their counts are all in
  for n in "${SVC_ORDER[@]}"; do   # log level warn: only problems are logged
    nw=$(grep -c 'level=\(warn\|error\)' "$TMP/$n.log" || true)
    say "$n log: $nw warn/error lines$( (( nw == 0 )) || printf ', e.g.:')"
    grep -m 3 'level=\(warn\|error\)' "$TMP/$n.log" | cut -c1-300 | sed 's/^/    /' || true
  done
  # Unpublished: published_at IS NULL before migration 0007 (an older --order-bin), after it
  # the relay's view of the rows its cursor has not passed.
  unpublished="x.published_at IS NULL"
  [[ $(sql "$ORD_DB" "SELECT to_regclass('outbox_pending') IS NOT NULL") != t ]] ||
    unpublished="x.id IN (SELECT id FROM outbox_pending)"
  read -r N_ORD N_ITEMS N_OUT N_OUT_OK N_IDS N_IDS_FOUND N_BAD_ITEMS N_BAD_TOTAL N_KEYS < <(
    "${PSQL[@]}" -d "$ORD_DB" -tA -F' ' <<SQL
CREATE TEMP TABLE bench_ids (id uuid);
\copy bench_ids FROM '$TMP/ids.txt'
SELECT (SELECT count(*) FROM orders),
       (SELECT count(*) FROM order_items),
       (SELECT count(*) FROM outbox),
       (SELECT count(*) FROM outbox x JOIN orders o ON x.aggregate_id = o.id::text
         WHERE x.aggregate_type = 'order' AND x.event_type = 'OrderCreated' AND $unpublished),
       (SELECT count(DISTINCT id) FROM bench_ids),
       (SELECT count(*) FROM orders WHERE id IN (SELECT id FROM bench_ids)),
       (SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM order_items i WHERE i.order_id = o.id) <> $ITEMS),
       (SELECT count(*) FROM orders o WHERE o.total_cents <>
          (SELECT coalesce(sum(i.quantity * i.unit_price_cents), -1) FROM order_items i WHERE i.order_id = o.id)),
       (SELECT count(*) FROM idempotency_keys);
SQL
  )
  CHECK_OK=1
  check "orders" "$N_ORD" "$OK_TOTAL"
  check "order_items ($ITEMS per order)" "$N_ITEMS" "$(( ITEMS * OK_TOTAL ))"
  check "outbox rows" "$N_OUT" "$OK_TOTAL"
  check "  of them OrderCreated, unpublished, of an order" "$N_OUT_OK" "$OK_TOTAL"
  check "distinct order ids in the 200 responses" "$N_IDS" "$OK_TOTAL"
  check "  of them found in orders" "$N_IDS_FOUND" "$OK_TOTAL"
  check "orders without exactly $ITEMS items" "$N_BAD_ITEMS" 0
  check "orders whose total is not sum(qty x price)" "$N_BAD_TOTAL" 0
  check "idempotency_keys" "$N_KEYS" "$(( IDEM ? OK_TOTAL : 0 ))"
  if (( CHECK_OK )); then
    CHECK="ok: orders $N_ORD = OK $OK_TOTAL, items $N_ITEMS = $ITEMS x OK, outbox $N_OUT = OK"
  else
    CHECK="MISMATCH: orders $N_ORD, items $N_ITEMS, outbox $N_OUT for OK $OK_TOTAL"
    (( FAILED_TOTAL == 0 )) ||
      CHECK+=" ($FAILED_TOTAL requests failed; one that failed after COMMIT, e.g. a 504, leaves an order)"
  fi
  say "check $CHECK"
  R_STMTS[i]=$(per_order_counts "$q0" "$q1" "$REQ_TOTAL")
  R_XACTS[i]=$(ratio "$(( x1 - x0 ))" "$REQ_TOTAL")
  say "per order (whole run, $REQ_TOTAL requests): statements ${R_STMTS[i]}; transactions of $ORD_DB ${R_XACTS[i]}"
  R_RATE[i]=$RATE R_P50[i]=$P50 R_P99[i]=$P99 R_ERRS[i]=$ERRS R_BY_STATUS[i]=$BY_STATUS
  R_OWN[i]=${ORD_OWN:-} R_SPLIT[i]=${ORD_SPLIT:-} R_CHECK[i]=$CHECK R_CHECK_OK[i]=$CHECK_OK
  SVC_ORDER=()
  drop_db "$ORD_DB"
  drop_db "$CAT_DB"
}

for (( p = 0; p < ${#PHASE_BIN[@]}; p++ )); do order_phase "$p"; done


echo "==== pgbench (fresh database $PGB_DB, scale $PGBENCH_SCALE)"
create_db "$PGB_DB"
t0=$SECONDS
pgbench_init "$PGB_DB" "$PGBENCH_SCALE"
say "pgbench -i -q -s $PGBENCH_SCALE took $(( SECONDS - t0 )) s"
"${PSQL[@]}" -d postgres -c "CHECKPOINT"
pgbench_run -N "$PGB_DB" "$SECONDS_RUN" "$( (( SECONDS_RUN > 3 )) && echo 1 || echo 0.3)" "$(cpu_window "$SECONDS_RUN")" split
grep -E '^(transaction type|scaling factor|query mode|number of (clients|threads)|number of (transactions actually processed|failed)|latency average|tps)' \
  "$TMP/pgbench.log" || cat "$TMP/pgbench.log"
cat "$TMP/watch.log"
pgbench_results
PGB_SPLIT=$(sed -n 's/.*own processes: [0-9.]* (\(.*\)) of.*/\1/p' "$TMP/watch.log")

echo "==== summary"
# CPU per order / per pgbench transaction, by process: where the time goes.
per_op() {  # per_op TOTAL_CORES "label c, label c" RATE
  awk -v t="$1" -v s="$2" -v r="$3" 'BEGIN {
    if (r <= 0 || t + 0 <= 0) { print "?"; exit }
    printf "%.0f us", t / r * 1e6; n = split(s, x, ", ")
    if (n > 0) { printf " ("; for (i = 1; i <= n; i++) { split(x[i], f, " "); printf "%s%s %.0f", (i > 1 ? ", " : ""), f[1], f[2] / r * 1e6 }; printf ")" } }'
}
# pg_orders_us I: the Postgres CPU of phase I's orders database per order, in us ("?" without).
pg_orders_us() {
  awk -v s="${R_SPLIT[$1]}" -v r="${R_RATE[$1]}" 'BEGIN { n = split(s, x, ", ")
    for (i = 1; i <= n; i++) { split(x[i], f, " "); if (f[1] == "pg-orders" && r > 0) { printf "%.0f", f[2] / r * 1e6; exit } }
    print "?" }'
}
printf 'nproc                      %s\n' "$(nproc)"
printf 'pgbench -N -M prepared     %.0f tps  (-c 4 -j 2 -T %s, scale %s, TCP 127.0.0.1)\n' \
  "$PGB_TPS" "$SECONDS_RUN" "$PGBENCH_SCALE"
[[ -z ${PGB_OWN:-} ]] ||
  printf 'CPU per pgbench txn        %s\n' "$(per_op "$PGB_OWN" "${PGB_SPLIT:-}" "$PGB_TPS")"
rc=0
for (( p = 0; p < ${#PHASE_BIN[@]}; p++ )); do
  (( ${#PHASE_BIN[@]} == 1 )) || printf -- '---- %s: %s\n' "${PHASE_LABEL[p]}" "${PHASE_BIN[p]}"
  RATIO=$(ratio "${R_RATE[p]}" "$PGB_TPS" 3)
  printf 'CreateOrder via gateway    %s orders/s  p50 %s ms  p99 %s ms  (%s connections, %s items, %s s; failed %s: %s)\n' \
    "${R_RATE[p]}" "${R_P50[p]}" "${R_P99[p]}" "$CONNS" "$ITEMS" "$SECONDS_RUN" "${R_ERRS[p]}" "${R_BY_STATUS[p]}"
  printf 'ratio ours/pgbench         %s  (proposed target >= %s: %s)\n' "$RATIO" "$TARGET_RATIO" \
    "$(goal_met "$RATIO" '>=' "$TARGET_RATIO")"
  if [[ -n ${R_OWN[p]} && -n ${PGB_OWN:-} ]]; then
    printf 'cores used by the run      order phase %s (%s), pgbench phase %s (%s) of %s\n' \
      "${R_OWN[p]}" "${R_SPLIT[p]:-?}" "$PGB_OWN" "${PGB_SPLIT:-?}" "$(nproc)"
    printf 'ratio per CPU-second       %s  (orders per core-second of client+gateway+order+catalog+Postgres vs pgbench)\n' \
      "$(per_cpu_ratio "${R_RATE[p]}" "${R_OWN[p]}" "$PGB_TPS" "$PGB_OWN")"
    printf 'CPU per order              %s\n' "$(per_op "${R_OWN[p]}" "${R_SPLIT[p]:-}" "${R_RATE[p]}")"
  fi
  printf 'statements per order       %s\n' "${R_STMTS[p]}"
  printf 'transactions per order     %s  (of the orders database)\n' "${R_XACTS[p]}"
  printf 'database check             %s\n' "${R_CHECK[p]}"
  if (( R_ERRS[p] > 0 )); then
    printf 'WARNING                    %s requests failed in the measured window: the figures are suspect\n' "${R_ERRS[p]}"
  fi
  (( R_CHECK_OK[p] )) || rc=1
done
# Each label against the first, as means over its phases (A B A B: each figure from two runs).
if (( ${#PHASE_BIN[@]} > 1 )); then
  for (( p = 0; p < ${#PHASE_BIN[@]}; p++ )); do
    printf '%s %s %s\n' "${PHASE_LABEL[p]}" "${R_RATE[p]}" "$(pg_orders_us "$p")"
  done | awk 'NR == 1 { first = $1 } !($1 in n) { order[++k] = $1 }
    { n[$1]++; rate[$1] += $2; pg[$1] += $3 }
    END { printf "---- means by label, against %s\n", first
      for (i = 1; i <= k; i++) { l = order[i]; r = rate[l] / n[l]; u = pg[l] / n[l]
        printf "%-26s %d phase(s): %.0f orders/s (x%.2f), Postgres (orders database) CPU per order %.0f us (x%.2f)\n",
          l, n[l], r, r / (rate[first] / n[first]), u, u / (pg[first] / n[first]) } }'
fi
warn_if_pg_restarted 27
exit "$rc"
