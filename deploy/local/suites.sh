# shellcheck shell=bash
# deploy/local/suites.sh: `test` (build and ctest in the normal, ASan+UBSan and ThreadSanitizer
# trees) and `test-env` (one command), both in a test stack of their own: a run folder under
# $TMPDIR and free ports, with its own Postgres (test_env_up, test_env_down). Sourced by stack.sh
# (not a script of its own); uses lib/common.sh, postgres.sh and build.sh.

TEST_SUMMARY=()

# ctest's options for every tree: one JUnit file per suite, with every test's output kept (a
# cmocka skip() shows only there), which suite_summary reads.
CTEST_JUNIT_ARGS=(--test-output-size-passed 4194304 --test-output-size-failed 4194304)

# suite_summary LABEL DIR RC LOG T0: TEST_SUMMARY += the line of a suite whose ctest exited RC:
# passed, failed and skipped from its JUnit file (tests/lint/junit_summary.py; a skip not in
# tests/allowed-skips.txt fails the suite), and the skips under it (T0 = $SECONDS at its start).
# Returns 1 when the suite failed, by ctest's word or by an unexpected skip.
suite_summary() {
  local label=$1 dir=$2 rc=$3 log=$4 t0=$5 junit="$2/ctest-$1.xml" counts src=0 line
  local -a skips=()
  if [[ -f $junit ]]; then
    counts=$(python3 "$ROOT/tests/lint/junit_summary.py" "$junit" "$ROOT/tests/allowed-skips.txt") || src=$?
    mapfile -t skips < <(tail -n +2 <<<"$counts")
    counts=$(head -n 1 <<<"$counts")
    (( src == 0 || src == 1 )) || counts="cannot read $(rel "$junit")"
  else
    counts="no JUnit file (see $(rel "$log"))"
    src=2
  fi
  if (( src != 0 && rc == 0 )); then rc=1; fi  # an unexpected skip fails a green ctest
  if (( rc == 0 )); then
    TEST_SUMMARY+=("$(printf '%-26s passed  %s (%d s)' "$label $(rel "$dir")" "$counts" $((SECONDS - t0)))")
  else
    TEST_SUMMARY+=("$(printf '%-26s FAILED  ctest exit %d: %s (%d s, log %s)' "$label $(rel "$dir")" "$3" "$counts" \
      $((SECONDS - t0)) "$(rel "$log")")")
  fi
  for line in "${skips[@]}"; do TEST_SUMMARY+=("    $line"); done
  return $(( rc != 0 ))
}

# run_suite LABEL DIR CMAKE_ARGS... (environment for ctest from the caller)
run_suite() {
  local label=$1 dir=$2 t0=$SECONDS rc=0 log
  shift 2
  log="$dir/ctest-$label.log"
  section "$label: build $(rel "$dir")"
  if ! build_tree "$dir" "$@"; then
    TEST_SUMMARY+=("$(printf '%-26s FAILED  build failed (%d s)' "$label $(rel "$dir")" $((SECONDS - t0)))")
    return 1
  fi
  section "$label: ctest --test-dir $(rel "$dir")"
  set +e
  rm -f "$dir/ctest-$label.xml"
  ctest --test-dir "$dir" --output-on-failure -j2 --timeout 300 "${CTEST_JUNIT_ARGS[@]}" \
    --output-junit "$dir/ctest-$label.xml" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  suite_summary "$label" "$dir" "$rc" "$log" "$t0"
}

# ThreadSanitizer run of the concurrent unit tests: configure TSAN_BUILD_DIR with
# -DSVC_SANITIZE=thread, build only the executables of the unit tests whose name contains
# "concurrent", and run them with TSAN_OPTIONS=halt_on_error=1.
# Only pure-C unit tests run under TSan. gRPC, absl and libpq from Debian are not
# TSan-instrumented, so the services and the integration tests would report races inside those
# uninstrumented libraries (false positives) or miss real ones. The concurrency that is ours, the
# pkg/resilience engine shared by many threads, is what these tests exercise.
run_tsan_suite() {
  local label=tsan dir=$TSAN_BUILD_DIR t0=$SECONDS rc=0 log
  local -a targets=()
  log="$dir/ctest-$label.log"
  section "$label: configure $(rel "$dir"), build the unit tests named *concurrent*"
  if ! configure_tree "$dir" -DSVC_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug; then
    TEST_SUMMARY+=("$(printf '%-26s FAILED  configure failed (%d s)' "$label $(rel "$dir")" $((SECONDS - t0)))")
    return 1
  fi
  # The ninja target of each matching test: its executable's path relative to the build dir once
  # it exists, else the test's name (svc_unit_test names the test after its executable's target).
  mapfile -t targets < <(ctest --test-dir "$dir" -N -L unit -R concurrent --show-only=json-v1 2>/dev/null |
    python3 -c '
import json, os, sys
d = sys.argv[1]
for t in json.load(sys.stdin).get("tests", []):
    cmd = t.get("command") or []
    print(os.path.relpath(cmd[0], d) if cmd and cmd[0].startswith(d + "/") else t["name"])
' "$dir")
  if (( ${#targets[@]} == 0 )); then
    echo "stack: error: no unit test whose name contains 'concurrent' in $(rel "$dir")" >&2
    TEST_SUMMARY+=("$(printf '%-26s FAILED  no unit test named *concurrent* (%d s)' "$label $(rel "$dir")" $((SECONDS - t0)))")
    return 1
  fi
  local t
  for t in "${targets[@]}"; do
    if ! ninja -C "$dir" -t query "$t" >/dev/null 2>&1; then
      echo "stack: error: $(rel "$dir"): no ninja target '$t' for a test named *concurrent* (name the test after its executable)" >&2
      TEST_SUMMARY+=("$(printf '%-26s FAILED  no build target %s (%d s)' "$label $(rel "$dir")" "$t" $((SECONDS - t0)))")
      return 1
    fi
  done
  if ! ninja_tree "$dir" "${targets[@]}"; then
    TEST_SUMMARY+=("$(printf '%-26s FAILED  build failed (%d s)' "$label $(rel "$dir")" $((SECONDS - t0)))")
    return 1
  fi
  section "$label: ctest --test-dir $(rel "$dir") -L unit -R concurrent"
  set +e
  rm -f "$dir/ctest-$label.xml"
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir "$dir" -L unit -R concurrent --output-on-failure -j2 --timeout 300 \
    "${CTEST_JUNIT_ARGS[@]}" --output-junit "$dir/ctest-$label.xml" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  suite_summary "$label" "$dir" "$rc" "$log" "$t0"
}

# The test run's own stack, so that tests never touch the user's (its run folder, its Postgres and
# its services): a fresh run folder under $TMPDIR, and a free port for Postgres and for each
# service, none of them a default port or a port the user has set. Both are exported, so ctest and
# every test see them: the fixtures' `stack.sh pg-up`, `pg-restart` and `kill postgres` act on this
# cluster. At exit (failure and Ctrl-C included) test_env_down stops the cluster and removes the
# folder, unless SHOPMICRO_TEST_KEEP=1.
TEST_RUN_DIR=""
test_env_up() {
  local user_run=$RUN user_pg=$PG_PORT i tmp=${TMPDIR:-/tmp} list=""
  local -a avoid=("${PORT_DEFAULTS[@]}") ports=()
  for i in "${!PORT_VARS[@]}"; do avoid+=("${!PORT_VARS[i]}"); done
  mapfile -t ports < <(free_ports "${#PORT_VARS[@]}" "${avoid[@]}")
  (( ${#ports[@]} == ${#PORT_VARS[@]} )) || die "test: cannot find ${#PORT_VARS[@]} free ports on 127.0.0.1"
  trap test_env_down EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  TEST_RUN_DIR=$(mktemp -d "$tmp/shopmicro-test.XXXXXX") || die "test: cannot make a run folder in $tmp (TMPDIR)"
  chmod 755 "$TEST_RUN_DIR"   # run as root, the cluster belongs to the postgres user, who must reach it
  set_run_dir "$TEST_RUN_DIR"
  export SHOPMICRO_RUN_DIR=$RUN
  for i in "${!PORT_VARS[@]}"; do
    printf -v "${PORT_VARS[i]}" '%s' "${ports[i]}"
    export "${PORT_VARS[i]?}"
    list+=" ${PORT_VARS[i]}=${ports[i]}"
  done
  PG_PORT=$SHOPMICRO_PG_PORT
  # Services that a test starts without naming a broker consume nothing: by default they would
  # join the user's broker on 127.0.0.1:19092 and take the user's events (and commit the user's
  # consumer groups' offsets). A test that wants a broker names its own.
  # ("none": an empty variable would mean the default.)
  export CATALOG_KAFKA_BROKERS=none ORDER_KAFKA_BROKERS=none NOTIFY_KAFKA_BROKERS=none
  # Tests start many services at once: each admin port on one the kernel picks.
  export CATALOG_ADMIN_LISTEN=127.0.0.1:0 ORDER_ADMIN_LISTEN=127.0.0.1:0 NOTIFY_ADMIN_LISTEN=127.0.0.1:0
  export GATEWAY_ADMIN_LISTEN=127.0.0.1:0
  say "test: own run folder $RUN, own ports:$list"
  say "test: the stack of $(rel "$user_run") (postgres port $user_pg) is not touched"
  cmd_pg_up
}

test_env_down() {
  [[ -n $TEST_RUN_DIR ]] || return 0
  pg_unlock   # interrupted inside pg-up: the lock is ours, and pg-down below takes it again
  section "test: stopping the test run's postgres"
  # Subshells: a failing step (die exits) must not skip the next one.
  if ! (cmd_pg_down); then
    note "test: pg_ctl stop failed; killing the test run's postgres"
    (pg_lock; if pg_running; then pg_sigkill; fi) || note "test: could not kill it either"
  fi
  if [[ ${SHOPMICRO_TEST_KEEP:-0} == 1 ]]; then
    say "test: kept $TEST_RUN_DIR (SHOPMICRO_TEST_KEEP=1; logs/postgres.log is its log): rm -rf it when done"
  else
    rm -rf -- "$TEST_RUN_DIR"
    say "test: removed $TEST_RUN_DIR (SHOPMICRO_TEST_KEEP=1 keeps it)"
  fi
  TEST_RUN_DIR=""
}

# test-env COMMAND [ARG...]: run one command in the test run's own stack (test_env_up), e.g.
# `stack.sh test-env ctest --test-dir build -L integration`. Exits with the command's status.
cmd_test_env() {
  local rc=0
  if (( $# == 0 )); then
    printf 'stack: error: usage: %s test-env <command> [<arg>...]\n' "$(rel "$SELF")" >&2
    exit 2
  fi
  section "test-env: postgres"
  test_env_up
  section "test-env: $*"
  "$@" || rc=$?
  exit "$rc"
}

cmd_test() {
  local t0=$SECONDS failed=0 line
  section "deps"; cmd_deps
  section "postgres"
  test_env_up

  # One copy of the Kafka jars, one venv of Python tools and one set of Go tools for every tree
  # (the plain tree's).
  local -a shared=("-DSHOPMICRO_KAFKA_LIB_CACHE=$BUILD_DIR/kafka-lib" "-DSHOPMICRO_PY_VENV=$BUILD_DIR/venv-tools"
                   "-DSHOPMICRO_GO_TOOLS=$BUILD_DIR/go-tools")
  run_suite normal "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${shared[@]}" || failed=1
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite asan "$ASAN_BUILD_DIR" -DSVC_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug "${shared[@]}" || failed=1
  run_tsan_suite || failed=1

  section "test summary ($((SECONDS - t0)) s)"
  for line in "${TEST_SUMMARY[@]}"; do echo "  $line"; done
  if (( failed )); then
    echo "  RESULT: FAILED"
    exit 1
  fi
  echo "  RESULT: all tests passed"
}
