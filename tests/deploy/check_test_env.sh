#!/usr/bin/env bash
# tests/deploy/check_test_env.sh: `stack.sh test` beside a running stack (issue 11, part 5).
# Starts a "user" Postgres with stack.sh in a temporary run folder on a free port. Then, with that
# user's SHOPMICRO_RUN_DIR and SHOPMICRO_PG_PORT still set, runs `stack.sh test-env` (the set-up and
# tear-down that `stack.sh test` runs its suites in) and checks that:
#   - the test run gets another run folder (under $TMPDIR) and other ports: not the user's, not the
#     defaults (25432, 25051, 25052, 8080), all different; its Postgres answers on its port;
#   - `stack.sh pg-restart`, `kill postgres` and `pg-up` run inside it (as the integration fixtures
#     run them) act on the test cluster;
#   - afterwards that cluster is stopped and its folder removed: after success, after a failing
#     command (whose status test-env passes on) and after SIGTERM to its process group (as Ctrl-C);
#     with SHOPMICRO_TEST_KEEP=1 the folder is kept and the cluster stopped all the same;
#   - the user's postmaster keeps its pid and port throughout, its data (a marker row) is intact, and
#     nothing is added to the user's run folder.
# It does not run any test suite. Everything lives in one temporary folder; a real .run/ is never
# used. About 15 s (five initdb). Exit status: 0 pass, 1 fail.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
STACK="$ROOT/deploy/local/stack.sh"
PSQL="${SHOPMICRO_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"

FAILS=0
fail() { printf 'FAIL: %s\n' "$*"; FAILS=$((FAILS + 1)); }
ok()   { printf 'ok:   %s\n' "$*"; }
# check WHAT COMMAND...: ok or FAIL, by the command's status.
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/shopmicro-check-test-env.XXXXXX")
chmod 755 "$WORK"
mkdir -m 755 "$WORK/tmp"
TERM_PID=""
cleanup() {
  local d
  if [[ -n $TERM_PID ]]; then kill -TERM -- "-$TERM_PID" 2>/dev/null || true; wait "$TERM_PID" || true; fi
  for d in "$WORK"/tmp/shopmicro-test.* "$WORK/user"; do
    if [[ -d $d/pg/data ]]; then SHOPMICRO_RUN_DIR=$d "$STACK" pg-down >/dev/null 2>&1 || true; fi
  done
  rm -rf -- "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The user's stack. When ctest runs this inside `stack.sh test`, the outer test run's variables are
# replaced here (and SHOPMICRO_TEST_KEEP is dropped: the checks below expect removal).
unset SHOPMICRO_TEST_KEEP
export TMPDIR="$WORK/tmp" SHOPMICRO_RUN_DIR="$WORK/user" SHOPMICRO_PG_FAST=1
# shellcheck source=../../deploy/local/stack.sh
USER_PORT=$(source "$STACK"; free_ports 1 "${PORT_DEFAULTS[@]}")
export SHOPMICRO_PG_PORT=$USER_PORT

# "PID PORT" of the user's postmaster, or "none".
user_pg() { (source "$STACK"; pg_running && echo "$PG_RUN_PID $PG_RUN_PORT") || echo none; }
# listening PORT: true when something accepts TCP on 127.0.0.1:PORT.
listening() { (source "$STACK"; port_open "$1"); }
user_files() { (cd "$WORK/user" && ls -A . logs); }
marker() { "$PSQL" -X -qtA -h 127.0.0.1 -p "$USER_PORT" -U postgres -d catalog -c "$1" 2>&1; }

# run_test_env NAME CMD...: `stack.sh test-env CMD...` with its output in $WORK/NAME.log; RC = its status.
run_test_env() {
  local name=$1
  shift
  RC=0
  "$STACK" test-env "$@" >"$WORK/$name.log" 2>&1 || RC=$?
}
show_log() { sed 's/^/    | /' "$WORK/$1.log"; }

# The folder a probe wrote into FILE was made under $TMPDIR by test-env, and is gone now.
check_removed() {
  local what=$1 dir
  dir=$(<"$2")
  check "$what: its run folder was under \$TMPDIR ($dir)" test "${dir#"$TMPDIR"/shopmicro-test.}" != "$dir"
  check "$what: its run folder is removed" test ! -e "$dir"
}

echo "== the user's stack: $SHOPMICRO_RUN_DIR, postgres on 127.0.0.1:$USER_PORT"
if ! "$STACK" pg-up >"$WORK/user-up.log" 2>&1; then
  show_log user-up
  fail "stack.sh pg-up of the user's stack"
  exit 1
fi
marker "CREATE TABLE user_marker (v text); INSERT INTO user_marker VALUES ('mine')" >/dev/null
BEFORE=$(user_pg)
FILES_BEFORE=$(user_files)
check "the user's postgres runs ($BEFORE)" test "$BEFORE" != none

echo "== test-env beside it, with the fixtures' pg-restart, kill postgres and pg-up inside"
# shellcheck disable=SC2016  # expanded by the inner bash
probe='set -e
  printf "%s\n" "run=$SHOPMICRO_RUN_DIR" "pg=$SHOPMICRO_PG_PORT" "catalog=$SHOPMICRO_CATALOG_PORT" \
    "order=$SHOPMICRO_ORDER_PORT" "gateway=$SHOPMICRO_GATEWAY_PORT" >"$1"
  "$2" pg-restart
  "$2" kill postgres
  "$2" pg-up
  echo "select=$("$3" -X -qtA -h 127.0.0.1 -p "$SHOPMICRO_PG_PORT" -U postgres -d catalog -c "SELECT 41 + 1")" >>"$1"'
run_test_env probe bash -c "$probe" probe "$WORK/probe.env" "$STACK" "$PSQL"
check "test-env exits 0 (got $RC)" test "$RC" = 0
declare -A P=()
if [[ -r $WORK/probe.env ]]; then
  while IFS='=' read -r k v; do P[$k]=$v; done <"$WORK/probe.env"
fi
grep -E 'test: own run folder|postgres: (running|killed|restarting)' "$WORK/probe.log" | sed 's/^/    /' || true
check "its SHOPMICRO_RUN_DIR is not the user's (${P[run]:-unset})" test "${P[run]:-$SHOPMICRO_RUN_DIR}" != "$SHOPMICRO_RUN_DIR"
check "its Postgres port is neither the user's $USER_PORT nor 25432 (${P[pg]:-unset})" \
  test "${P[pg]:-$USER_PORT}" != "$USER_PORT" -a "${P[pg]:-}" != 25432
ports_ok() {
  local -A seen=([$USER_PORT]=1 [25432]=1 [25051]=1 [25052]=1 [8080]=1)
  local p
  for p in "${P[pg]:-}" "${P[catalog]:-}" "${P[order]:-}" "${P[gateway]:-}"; do
    [[ -n $p && -z ${seen[$p]:-} ]] || return 1
    seen[$p]=1
  done
}
check "its four ports are all different and none is a default or the user's" ports_ok
check "its Postgres answered on its port after pg-restart, kill and pg-up (${P[select]:-no answer})" \
  test "${P[select]:-}" = 42
printf '%s\n' "${P[run]:-}" >"$WORK/probe.dir"
check_removed "after success" "$WORK/probe.dir"
check "after success: nothing listens on its Postgres port any more" eval '! listening "${P[pg]:-1}"'
(( FAILS == 0 )) || show_log probe
check "the user's postgres has the same pid and port ($(user_pg))" test "$(user_pg)" = "$BEFORE"

echo "== a failing command: its status is passed on, and the test run is cleaned up"
# shellcheck disable=SC2016
run_test_env fail bash -c 'echo "$SHOPMICRO_RUN_DIR" >"$1"; exit 3' fail "$WORK/fail.dir"
check "test-env exits 3, the command's status (got $RC)" test "$RC" = 3
check_removed "after a failure" "$WORK/fail.dir"

echo "== SIGTERM to test-env's process group while its command runs (as Ctrl-C does)"
# shellcheck disable=SC2016
setsid "$STACK" test-env bash -c 'echo "$SHOPMICRO_RUN_DIR" >"$1.part"; mv "$1.part" "$1"; exec sleep 120' \
  term "$WORK/term.dir" >"$WORK/term.log" 2>&1 &
TERM_PID=$!
for (( i = 0; i < 600; i++ )); do [[ -e $WORK/term.dir ]] && break; sleep 0.1; done
check "the command started within 60 s" test -e "$WORK/term.dir"
kill -TERM -- "-$TERM_PID" 2>/dev/null || true
RC=0
wait "$TERM_PID" || RC=$?
TERM_PID=""
check "test-env exits 143 after SIGTERM (got $RC)" test "$RC" = 143
check_removed "after SIGTERM" "$WORK/term.dir"
(( RC == 143 )) || show_log term

echo "== SHOPMICRO_TEST_KEEP=1 keeps the folder and still stops the cluster"
# shellcheck disable=SC2016
SHOPMICRO_TEST_KEEP=1 run_test_env keep bash -c 'echo "$SHOPMICRO_RUN_DIR" >"$1"' keep "$WORK/keep.dir"
KEPT=$(<"$WORK/keep.dir")
check "test-env exits 0 (got $RC)" test "$RC" = 0
check "the folder is kept ($KEPT)" test -d "$KEPT/pg/data"
check "its cluster is stopped" eval '! (SHOPMICRO_RUN_DIR=$KEPT; source "$STACK"; pg_running)'

echo "== test-env without a command"
run_test_env usage
check "exits 2 (got $RC)" test "$RC" = 2

echo "== the user's stack afterwards"
check "the user's postgres has the same pid and port ($(user_pg), before: $BEFORE)" test "$(user_pg)" = "$BEFORE"
check "the user's data is intact" test "$(marker "SELECT v FROM user_marker")" = mine
check "nothing was added to or removed from the user's run folder" test "$(user_files)" = "$FILES_BEFORE"

echo "check_test_env: $FAILS failure(s)"
(( FAILS == 0 ))
