#!/usr/bin/env bash
# bench/run_overload.sh: the overload experiment of docs/overload.md (issue 15), in one command.
#
#   bench/run_overload.sh [--short] [--out DIR]
#
# 1. deploy/local/stack.sh pg-up, builds catalog + bench_overload (RelWithDebInfo) in
#    $SHOPMICRO_BENCH_BUILD_DIR (default build-bench/), a fresh database
# 2. starts the real catalog with CATALOG_FAULT_KNOBS=on, 128 workers (so that the knobs'
#    4 slots and queue of 100, not the worker pool, are the limit), log level error
# 3. bench_overload at 50 originals/s, deadline 300 ms: naive, then guarded, through
#    normal 30 s (20 ms a call) -> slow 60 s (120 ms) -> normal 60 s, 4 slots that
#    reject at once
# 4. the same pair again with the catalog queueing up to 100 calls for its slots (the
#    dependency that builds a backlog)
# 5. the kill run, naive then guarded: 60 s at 20 ms; catalog kill -9 at ~20 s,
#    restarted ~20 s later (same ports; the generator re-applies the knobs)
# 6. bench/overload/plot.py: docs/bench/overload_*.png and the headline figures
# --short: 5/10/10 s phases and a 30 s kill run (a check of the script, not figures).
# CSVs and the run log (load average per run) go to --out (default docs/bench).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
PG_PORT=${SHOPMICRO_PG_PORT:-25432}
export SHOPMICRO_PG_PORT=$PG_PORT
OUT=$ROOT/docs/bench
PHASES=(--phase normal:30:20 --phase slow:60:120 --phase normal:60:20)
KILL_S=60 KILL_AT=20 KILL_FOR=20
QUEUE=100 WORKERS=128 # workers > 4 slots + the queue: a waiter holds a worker

while (( $# > 0 )); do
  case $1 in
    --short) PHASES=(--phase normal:5:20 --phase slow:10:120 --phase normal:10:20)
             KILL_S=30 KILL_AT=8 KILL_FOR=8; shift ;;
    --out)   OUT=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
mkdir -p "$OUT"
pg_clients "$PG_PORT"
DB="overload_bench_$$"
TMP=$(mktemp -d /tmp/overload-bench.XXXXXX)
CAT_PID="" DB_CREATED=0 GEN_PID=""

# cleanup RC: the generator and the catalog stopped, the database dropped.
# shellcheck disable=SC2317  # invoked by on_exit
cleanup() {
  end_pids "$GEN_PID"
  stop_pid "$CAT_PID" catalog
  (( DB_CREATED )) && "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)"
  (( $1 == 0 )) || tail_logs 20 "$TMP" catalog
}
on_exit cleanup

start_catalog() {
  catalog_start "$DB" CATALOG_ADMIN_LISTEN="127.0.0.1:$ADMIN_PORT" CATALOG_LOG_LEVEL=error \
    CATALOG_WORKERS="$WORKERS" CATALOG_FAULT_KNOBS=on
}

# generate NAME MODE ARGS...: one bench_overload run into $OUT/overload_NAME.csv.
generate() {
  local name=$1 mode=$2
  shift 2
  say "run $name ($mode): loadavg before $(loadavg)" | tee -a "$OUT/overload_runs.txt"
  "$BUILD_DIR/bench/bench_overload" --target "127.0.0.1:$CAT_PORT" --admin "127.0.0.1:$ADMIN_PORT" \
    --mode "$mode" --csv "$OUT/overload_$name.csv" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  GEN_PID=$!
}

finish() {
  wait "$GEN_PID" || { cat "$TMP/$1.err" >&2; die "bench_overload $1 failed"; }
  GEN_PID=""
  sed 's/^/    /' "$TMP/$1.out" | tee -a "$OUT/overload_runs.txt"
  say "run $1: loadavg after $(loadavg)" | tee -a "$OUT/overload_runs.txt"
}

# kill_run NAME MODE: catalog kill -9 at KILL_AT s for KILL_FOR s.
kill_run() {
  generate "$1" "$2" --phase "normal:$KILL_S:20"
  until grep -q started "$TMP/$1.err" 2>/dev/null; do sleep 0.05; done
  sleep "$KILL_AT"
  kill -KILL "$CAT_PID"; wait "$CAT_PID" 2>/dev/null || true
  say "catalog killed (kill -9) at ~${KILL_AT} s" | tee -a "$OUT/overload_runs.txt"
  sleep "$KILL_FOR"
  start_catalog
  say "catalog restarted at ~$((KILL_AT + KILL_FOR)) s (pid $CAT_PID)" | tee -a "$OUT/overload_runs.txt"
  finish "$1"
}

say "nproc $(nproc); loadavg $(loadavg)"
"$ROOT/deploy/local/stack.sh" pg-up
bench_build catalog bench_overload
"${PSQL[@]}" -d postgres -c "CREATE DATABASE \"$DB\""
DB_CREATED=1
CAT_PORT=$(free_port) ADMIN_PORT=$(free_port)
start_catalog
: >"$OUT/overload_runs.txt"
say "$(date -u +%FT%TZ) nproc $(nproc); catalog 127.0.0.1:$CAT_PORT, admin :$ADMIN_PORT" >>"$OUT/overload_runs.txt"
for mode in naive guarded; do
  generate "$mode" "$mode" "${PHASES[@]}"
  finish "$mode"
done
for mode in naive guarded; do
  generate "queue_$mode" "$mode" "${PHASES[@]}" --queue "$QUEUE"
  finish "queue_$mode"
done
for mode in naive guarded; do kill_run "kill_$mode" "$mode"; done
/usr/bin/python3 "$ROOT/bench/overload/plot.py" "$OUT" | tee "$OUT/overload_figures.txt"
