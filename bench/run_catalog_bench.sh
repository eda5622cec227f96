#!/usr/bin/env bash
# bench/run_catalog_bench.sh: catalog GetProduct throughput vs pgbench, in one run.
#
#   bench/run_catalog_bench.sh [--workers N[,N...]] [--threads N] [--seconds D]
#                              [--products N] [--reinit-pgbench] [--client async|threads]
#
# 1. deploy/local/stack.sh pg-up (the project's Postgres, 127.0.0.1:$SHOPMICRO_PG_PORT)
# 2. builds catalog + bench_catalog (RelWithDebInfo) in $SHOPMICRO_BENCH_BUILD_DIR
#    (default build-bench/)
# 3. creates a fresh database, starts the real catalog binary on a free port
#    against it (CATALOG_LOG_LEVEL=warn), seeds --products products through
#    CreateProduct, VACUUM ANALYZEs, and runs bench_catalog (--threads callers on
#    one channel, 1 s warm-up, --seconds measured; --client async (default) keeps
#    them in flight from one client thread, --client threads uses one blocking
#    thread per caller, which costs the 2-core machine as much CPU as the server). With several --workers values
#    the catalog is restarted for each and the best one is compared.
# 4. runs pgbench -S -M prepared -c 4 -j 2 -T <seconds> over TCP 127.0.0.1 against
#    the same Postgres (database pgbench_ref, initialised with pgbench -i -s 10
#    the first time and kept for later runs; --reinit-pgbench re-creates it)
# 5. prints nproc, both figures and the ratio ours/pgbench (target >= 0.25).
# The catalog is stopped with SIGTERM and the bench database dropped on any exit.
# Figures and the chosen CATALOG_WORKERS: docs/benchmarks.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
BUILD_DIR=${SHOPMICRO_BENCH_BUILD_DIR:-$ROOT/build-bench}
PG_PORT=${SHOPMICRO_PG_PORT:-25432}
PG_BIN=${SHOPMICRO_PG_BIN:-/usr/lib/postgresql/15/bin}
export SHOPMICRO_PG_PORT=$PG_PORT
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"   # say die pg_tool free_port port_open wait_port stop_pid proc_ticks cpu_*

WORKERS=4            # best of 2/3/4/6/8 on 2 cores, see docs/benchmarks.md
THREADS=16
CLIENT=async
SECONDS_RUN=10
PRODUCTS=1000
PGBENCH_DB=pgbench_ref
PGBENCH_SCALE=10
REINIT_PGBENCH=0
TARGET_RATIO=0.25

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while (( $# > 0 )); do
  case $1 in
    --workers)        WORKERS=${2:?}; shift 2 ;;
    --threads)        THREADS=${2:?}; shift 2 ;;
    --client)         CLIENT=${2:?}; shift 2 ;;
    --seconds)        SECONDS_RUN=${2:?}; shift 2 ;;
    --products)       PRODUCTS=${2:?}; shift 2 ;;
    --reinit-pgbench) REINIT_PGBENCH=1; shift ;;
    -h|--help)        usage; exit 0 ;;
    *) printf 'run_catalog_bench: unknown argument %s\n' "$1" >&2; usage >&2; exit 2 ;;
  esac
done
IFS=',' read -r -a WORKER_LIST <<<"$WORKERS"
[[ $CLIENT == async || $CLIENT == threads ]] ||
  { printf 'run_catalog_bench: --client must be async or threads\n' >&2; exit 2; }
for w in "${WORKER_LIST[@]}" "$THREADS" "$SECONDS_RUN" "$PRODUCTS"; do
  # shellcheck disable=SC2015
  [[ $w =~ ^[0-9]+$ ]] && (( w > 0 )) || { echo "run_catalog_bench: '$w' is not a positive integer" >&2; exit 2; }
done

PSQL=("$(pg_tool psql)" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres)
BENCH_DB="catalog_bench_$$"
TMP=$(mktemp -d /tmp/catalog-bench.XXXXXX)
CAT_PID=""
DB_CREATED=0

stop_catalog() {
  stop_pid "$CAT_PID" catalog
  CAT_PID=""
}

cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  set +e   # clean up as much as possible, whatever fails
  for p in ${bench_pid:-} ${watch_pid:-} ${pgb_pid:-}; do   # interrupted mid-phase
    kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
    true
  done
  stop_catalog
  if (( DB_CREATED )); then
    "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$BENCH_DB\" WITH (FORCE)" ||
      say "warning: could not drop database $BENCH_DB"
  fi
  if (( rc != 0 )) && [[ -s $TMP/catalog.log ]]; then
    say "last lines of the catalog log:"
    tail -n 20 "$TMP/catalog.log" | sed 's/^/    /' >&2
  fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Sessions of other clients on this Postgres (other test runs skew the figures).
other_pg_sessions() {
  "${PSQL[@]}" -d postgres -tAc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
    AND pid <> pg_backend_pid() AND datname NOT IN ('$BENCH_DB', '$PGBENCH_DB')" 2>/dev/null || echo '?'
}

# watch_cpu DB DELAY WINDOW PID...: after DELAY s, measures for WINDOW s how
# busy the machine was and how much of it the benchmark's own processes (PIDs
# plus the Postgres backends of DB) used; the rest was somebody else's.
watch_cpu() {
  # shellcheck disable=SC2034  # c0 is read through ${!1} in cpu_since
  local db=$1 delay=$2 window=$3 c0 t0 t1 hz
  shift 3
  sleep "$delay"
  local -a pids=("$@")
  mapfile -t -O "${#pids[@]}" pids < <("${PSQL[@]}" -d postgres -tAc \
    "SELECT pid FROM pg_stat_activity WHERE datname = '$db' AND pid <> pg_backend_pid()")
  hz=$(getconf CLK_TCK)
  cpu_snap c0
  t0=$(proc_ticks "${pids[@]}")
  sleep "$window"
  t1=$(proc_ticks "${pids[@]}")
  # Only processes alive at both ends count (one that ended took its ticks along).
  say "machine CPU: $(cpu_since c0); the benchmark's own processes: $(awk -v hz="$hz" -v w="$window" \
    -v a="$t0" -v b="$t1" 'BEGIN {
      n = split(a, x, "\n"); for (i = 1; i <= n; i++) { split(x[i], f, " "); s[f[1]] = f[2] }
      n = split(b, y, "\n"); for (i = 1; i <= n; i++) { split(y[i], f, " "); if (f[1] in s) d += f[2] - s[f[1]] }
      printf "%.2f", d / hz / w }') of $(nproc) cores"
}

# start_catalog WORKERS: the real binary on a free port, against $BENCH_DB.
start_catalog() {
  CAT_PORT=$(free_port)
  CATALOG_LISTEN=127.0.0.1:$CAT_PORT \
  CATALOG_DB_DSN="host=127.0.0.1 port=$PG_PORT dbname=$BENCH_DB user=postgres" \
  CATALOG_LOG_LEVEL=warn CATALOG_WORKERS=$1 CATALOG_KAFKA_BROKERS=none CATALOG_ADMIN_LISTEN=none \
    "$BUILD_DIR/services/catalog/catalog" >>"$TMP/catalog.log" 2>&1 </dev/null &
  CAT_PID=$!
  wait_port "$CAT_PID" "$CAT_PORT" 15 catalog
}

echo "==== machine"
say "nproc: $(nproc)  ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
say "loadavg before the run: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "==== postgres"
"$ROOT/deploy/local/stack.sh" pg-up

PG_STARTED=$("${PSQL[@]}" -d postgres -tAc "SELECT pg_postmaster_start_time()")

echo "==== build ($BUILD_DIR, RelWithDebInfo)"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$TMP/cmake.log" 2>&1 ||
  { cat "$TMP/cmake.log" >&2; die "cmake configure failed"; }
ninja -C "$BUILD_DIR" catalog bench_catalog >"$TMP/ninja.log" 2>&1 ||
  { cat "$TMP/ninja.log" >&2; die "build failed"; }
BENCH="$BUILD_DIR/bench/bench_catalog"

echo "==== catalog database $BENCH_DB"
"${PSQL[@]}" -d postgres -c "CREATE DATABASE \"$BENCH_DB\""
DB_CREATED=1
start_catalog "${WORKER_LIST[0]}"
say "catalog pid $CAT_PID on 127.0.0.1:$CAT_PORT; seeding $PRODUCTS products via CreateProduct"
"$BENCH" --target "127.0.0.1:$CAT_PORT" --threads 4 --ensure "$PRODUCTS" --seconds 0.1 --warmup 0 \
  >"$TMP/seed.log" || { cat "$TMP/seed.log"; die "seeding failed"; }
grep '^seeded' "$TMP/seed.log" | sed 's/^/[bench] /' || true
"${PSQL[@]}" -d "$BENCH_DB" -c "VACUUM ANALYZE products"
say "products in $BENCH_DB: $("${PSQL[@]}" -d "$BENCH_DB" -tAc 'SELECT count(*) FROM products')"

BEST_RATE=0 BEST_WORKERS="" BEST_LINE="" TOTAL_ERRORS=0
for w in "${WORKER_LIST[@]}"; do
  if [[ -z $CAT_PID ]]; then start_catalog "$w"; fi
  echo "==== bench_catalog: CATALOG_WORKERS=$w, $THREADS callers, $SECONDS_RUN s"
  say "other sessions on this Postgres: $(other_pg_sessions); loadavg $(cut -d' ' -f1 /proc/loadavg)"
  client_args=()
  [[ $CLIENT == async ]] && client_args=(--async)
  "$BENCH" --target "127.0.0.1:$CAT_PORT" --threads "$THREADS" --seconds "$SECONDS_RUN" \
    "${client_args[@]}" >"$TMP/bench-$w.log" &
  bench_pid=$!
  watch_cpu "$BENCH_DB" 1.5 $((SECONDS_RUN > 2 ? SECONDS_RUN - 1 : 1)) "$bench_pid" "$CAT_PID" >"$TMP/watch.log" &
  watch_pid=$!
  wait "$bench_pid" || { cat "$TMP/bench-$w.log"; die "bench_catalog failed"; }
  wait "$watch_pid" || true
  cat "$TMP/bench-$w.log" "$TMP/watch.log"
  own=$(sed -n 's/.*own processes: \([0-9.]*\) of.*/\1/p' "$TMP/watch.log")
  line=$(grep '^RESULT ' "$TMP/bench-$w.log") || die "bench_catalog printed no RESULT line"
  rate=$(sed -n 's/.*calls_per_s=\([0-9]*\).*/\1/p' <<<"$line")
  errs=$(sed -n 's/.* errors=\([0-9]*\).*/\1/p' <<<"$line")
  if (( errs > 0 )); then
    say "WARNING: $errs calls failed in this run (was Postgres restarted by another test?)"
    TOTAL_ERRORS=$((TOTAL_ERRORS + errs))
  fi
  if (( rate > BEST_RATE )); then BEST_RATE=$rate BEST_WORKERS=$w BEST_LINE=$line BEST_OWN=${own:-?}; fi
  stop_catalog
done

echo "==== pgbench (database $PGBENCH_DB, scale $PGBENCH_SCALE)"
PGB=("$(pg_tool pgbench)" -h 127.0.0.1 -p "$PG_PORT" -U postgres)
have_pgb=$("${PSQL[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PGBENCH_DB'")
if [[ -n $have_pgb ]] && (( ! REINIT_PGBENCH )); then
  rows=$("${PSQL[@]}" -d "$PGBENCH_DB" -tAc "SELECT count(*) FROM pgbench_accounts" 2>/dev/null || echo 0)
  (( rows == PGBENCH_SCALE * 100000 )) || have_pgb=""
fi
if [[ -z $have_pgb ]] || (( REINIT_PGBENCH )); then
  have_pgb=$("${PSQL[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PGBENCH_DB'")
  say "initialising: pgbench -i -s $PGBENCH_SCALE $PGBENCH_DB"
  [[ -z $have_pgb ]] || "${PSQL[@]}" -d postgres -c "DROP DATABASE \"$PGBENCH_DB\" WITH (FORCE)"
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE \"$PGBENCH_DB\""
  "${PGB[@]}" -i -q -s "$PGBENCH_SCALE" "$PGBENCH_DB" >"$TMP/pgbench-init.log" 2>&1 ||
    { cat "$TMP/pgbench-init.log" >&2; die "pgbench -i failed"; }
else
  say "reusing $PGBENCH_DB (already initialised at scale $PGBENCH_SCALE)"
fi
say "pgbench -S -M prepared -c 4 -j 2 -T $SECONDS_RUN -h 127.0.0.1 -p $PG_PORT $PGBENCH_DB"
say "other sessions on this Postgres: $(other_pg_sessions); loadavg $(cut -d' ' -f1 /proc/loadavg)"
"${PGB[@]}" -S -M prepared -c 4 -j 2 -T "$SECONDS_RUN" "$PGBENCH_DB" >"$TMP/pgbench.log" 2>&1 &
pgb_pid=$!
watch_cpu "$PGBENCH_DB" 1 $((SECONDS_RUN > 3 ? SECONDS_RUN - 2 : 1)) "$pgb_pid" >"$TMP/watch.log" &
watch_pid=$!
wait "$pgb_pid" || { cat "$TMP/pgbench.log"; die "pgbench failed"; }
wait "$watch_pid" || true
cat "$TMP/pgbench.log" "$TMP/watch.log"
PGB_OWN=$(sed -n 's/.*own processes: \([0-9.]*\) of.*/\1/p' "$TMP/watch.log")
PGB_TPS=$(sed -n 's/^tps = \([0-9.]*\).*without initial connection time.*/\1/p' "$TMP/pgbench.log")
[[ -n $PGB_TPS ]] || die "no tps line in the pgbench output"

echo "==== summary"
RATIO=$(awk -v a="$BEST_RATE" -v b="$PGB_TPS" 'BEGIN { printf "%.3f", a / b }')
MET=$(awk -v r="$RATIO" -v t="$TARGET_RATIO" 'BEGIN { print (r >= t) ? "met" : "NOT met" }')
printf 'nproc                   %s\n' "$(nproc)"
printf 'catalog GetProduct      %s calls/s  (CATALOG_WORKERS=%s, %s callers, %s s; %s)\n' \
  "$BEST_RATE" "$BEST_WORKERS" "$THREADS" "$SECONDS_RUN" "${BEST_LINE#RESULT }"
printf 'pgbench -S -M prepared  %.0f tps  (-c 4 -j 2 -T %s, TCP 127.0.0.1)\n' "$PGB_TPS" "$SECONDS_RUN"
printf 'ratio ours/pgbench      %s  (target >= %s: %s)\n' "$RATIO" "$TARGET_RATIO" "$MET"
# Other work on the machine takes CPU from whichever phase it overlaps; per
# CPU-second that the benchmark's own processes used, the comparison is fairer.
if [[ ${BEST_OWN:-?} != "?" && -n ${PGB_OWN:-} ]]; then
  printf 'cores used by the run   catalog phase %s, pgbench phase %s (of %s)\n' "$BEST_OWN" "$PGB_OWN" "$(nproc)"
  printf 'ratio per CPU-second    %s  (calls per core-second of client+server+Postgres)\n' \
    "$(awk -v a="$BEST_RATE" -v ca="$BEST_OWN" -v b="$PGB_TPS" -v cb="$PGB_OWN" \
      'BEGIN { if (ca > 0 && cb > 0) printf "%.3f", (a / ca) / (b / cb); else print "?" }')"
fi
if [[ $("${PSQL[@]}" -d postgres -tAc "SELECT pg_postmaster_start_time()") != "$PG_STARTED" ]]; then
  printf 'WARNING                 Postgres was restarted during the run (by another test?): the figures are suspect\n'
fi
if (( TOTAL_ERRORS > 0 )); then
  printf 'WARNING                 %s GetProduct calls failed: the figures are suspect\n' "$TOTAL_ERRORS"
fi
