#!/usr/bin/env bash
# bench/run_catalog_bench.sh: catalog GetProduct throughput vs pgbench, in one run.
#
#   bench/run_catalog_bench.sh [--workers N[,N...]] [--threads N] [--seconds D]
#                              [--products N] [--reinit-pgbench] [--client async|threads]
#                              [--catalog-bin PATH]
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
# 5. prints nproc, both figures and the ratio ours/pgbench (target >= 0.25), and
#    the CPU time and context switches per call of bench_catalog, the catalog
#    and its Postgres backends.
# --catalog-bin PATH: run that catalog binary instead of the build's (e.g. an
#    older build, for a before/after comparison).
# The catalog is stopped with SIGTERM and the bench database dropped on any exit.
# Figures and the chosen CATALOG_WORKERS: docs/benchmarks.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PG_PORT=${SHOPMICRO_PG_PORT:-25432}
export SHOPMICRO_PG_PORT=$PG_PORT
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

WORKERS=4            # best of 2/3/4/6/8 on 2 cores, see docs/benchmarks.md
THREADS=16
CLIENT=async
SECONDS_RUN=10
PRODUCTS=1000
PGBENCH_DB=pgbench_ref
PGBENCH_SCALE=10
REINIT_PGBENCH=0
TARGET_RATIO=0.25
CAT_BIN=""   # read by catalog_start (bench/lib.sh)

while (( $# > 0 )); do
  case $1 in
    --workers)        WORKERS=${2:?}; shift 2 ;;
    --threads)        THREADS=${2:?}; shift 2 ;;
    --client)         CLIENT=${2:?}; shift 2 ;;
    --seconds)        SECONDS_RUN=${2:?}; shift 2 ;;
    --products)       PRODUCTS=${2:?}; shift 2 ;;
    --reinit-pgbench) REINIT_PGBENCH=1; shift ;;
    --catalog-bin)    CAT_BIN=${2:?}; shift 2 ;;
    -h|--help)        usage; exit 0 ;;
    *) unknown_arg "$1" ;;
  esac
done
IFS=',' read -r -a WORKER_LIST <<<"$WORKERS"
[[ $CLIENT == async || $CLIENT == threads ]] || arg_error "--client must be async or threads"
need_positive "${WORKER_LIST[@]}" "$THREADS" "$SECONDS_RUN" "$PRODUCTS"
[[ -z $CAT_BIN ]] || CAT_BIN=$(exe_path --catalog-bin "$CAT_BIN")

pg_clients "$PG_PORT"
BENCH_DB="catalog_bench_$$"
OWN_DBS=("$BENCH_DB" "$PGBENCH_DB")   # not "other sessions"
TMP=$(mktemp -d /tmp/catalog-bench.XXXXXX)
CAT_PID=""
DB_CREATED=0

stop_catalog() {
  stop_pid "$CAT_PID" catalog || true
  CAT_PID=""
}

# cleanup RC: the phase's processes and the catalog stopped, the bench database dropped.
# shellcheck disable=SC2317  # invoked by on_exit
cleanup() {
  end_pids "${run_pid:-}" "${watch_pid:-}"
  stop_catalog
  if (( DB_CREATED )); then
    "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$BENCH_DB\" WITH (FORCE)" ||
      say "warning: could not drop database $BENCH_DB"
  fi
  (( $1 == 0 )) || tail_logs 20 "$TMP" catalog
}
on_exit cleanup

# start_catalog WORKERS: the real binary on a free port, against $BENCH_DB.
start_catalog() {
  CAT_PORT=$(free_port)
  catalog_start "$BENCH_DB" CATALOG_LOG_LEVEL=warn CATALOG_WORKERS="$1" CATALOG_ADMIN_LISTEN=none
}

say_machine

echo "==== postgres"
"$ROOT/deploy/local/stack.sh" pg-up

PG_STARTED=$(pg_start_time)

echo "==== build ($BUILD_DIR, RelWithDebInfo)"
bench_build catalog bench_catalog
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
  say "other sessions on this Postgres: $(other_pg_sessions "${OWN_DBS[@]}"); loadavg $(load1)"
  client_args=()
  [[ $CLIENT == async ]] && client_args=(--async)
  watched_run bench_catalog "$TMP/bench-$w.log" named "postgres=$BENCH_DB" 1.5 \
    $((SECONDS_RUN > 2 ? SECONDS_RUN - 1 : 1)) catalog="$CAT_PID" -- \
    "$BENCH" --target "127.0.0.1:$CAT_PORT" --threads "$THREADS" --seconds "$SECONDS_RUN" "${client_args[@]}"
  cat "$TMP/bench-$w.log" "$TMP/watch.log"
  own=$(own_cores "$TMP/watch.log")
  line=$(grep '^RESULT ' "$TMP/bench-$w.log") || die "bench_catalog printed no RESULT line"
  rate=$(result_field "$line" calls_per_s)
  errs=$(result_field "$line" errors)
  if (( errs > 0 )); then
    say "WARNING: $errs calls failed in this run (was Postgres restarted by another test?)"
    TOTAL_ERRORS=$((TOTAL_ERRORS + errs))
  fi
  per_request "$TMP/watch.log" "$rate" call | tee "$TMP/per-call-$w.txt"
  if (( rate > BEST_RATE )); then BEST_RATE=$rate BEST_WORKERS=$w BEST_LINE=$line BEST_OWN=${own:-?}; fi
  stop_catalog
done

echo "==== pgbench (database $PGBENCH_DB, scale $PGBENCH_SCALE)"
pgbench_ref_db "$PGBENCH_DB" "$PGBENCH_SCALE" "$REINIT_PGBENCH"
pgbench_run -S "$PGBENCH_DB" "$SECONDS_RUN" 1 $((SECONDS_RUN > 3 ? SECONDS_RUN - 2 : 1)) total
cat "$TMP/pgbench.log" "$TMP/watch.log"
pgbench_results

echo "==== summary"
RATIO=$(ratio "$BEST_RATE" "$PGB_TPS" 3)
MET=$(goal_met "$RATIO" '>=' "$TARGET_RATIO")
printf 'nproc                   %s\n' "$(nproc)"
printf 'catalog GetProduct      %s calls/s  (CATALOG_WORKERS=%s, %s callers, %s s; %s)\n' \
  "$BEST_RATE" "$BEST_WORKERS" "$THREADS" "$SECONDS_RUN" "${BEST_LINE#RESULT }"
printf 'pgbench -S -M prepared  %.0f tps  (-c 4 -j 2 -T %s, TCP 127.0.0.1)\n' "$PGB_TPS" "$SECONDS_RUN"
printf 'ratio ours/pgbench      %s  (target >= %s: %s)\n' "$RATIO" "$TARGET_RATIO" "$MET"
if [[ ${BEST_OWN:-?} != "?" && -n ${PGB_OWN:-} ]]; then
  printf 'cores used by the run   catalog phase %s, pgbench phase %s (of %s)\n' "$BEST_OWN" "$PGB_OWN" "$(nproc)"
  printf 'ratio per CPU-second    %s  (calls per core-second of client+server+Postgres)\n' \
    "$(per_cpu_ratio "$BEST_RATE" "$BEST_OWN" "$PGB_TPS" "$PGB_OWN")"
fi
if [[ -n $BEST_WORKERS ]]; then cat "$TMP/per-call-$BEST_WORKERS.txt"; fi
if [[ -n ${PGB_OWN:-} ]]; then
  printf 'CPU us per pgbench tx    %.0f (pgbench + its Postgres backends)\n' \
    "$(awk -v c="$PGB_OWN" -v t="$PGB_TPS" 'BEGIN { print c * 1e6 / t }')"
fi
warn_if_pg_restarted 24
if (( TOTAL_ERRORS > 0 )); then
  printf 'WARNING                 %s GetProduct calls failed: the figures are suspect\n' "$TOTAL_ERRORS"
fi
