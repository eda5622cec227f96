#!/usr/bin/env bash
# deploy/local/stack.sh: the ShopMicro stack without Docker. Installs the Debian packages in
# packages.txt, runs a Postgres cluster of the repository's own on loopback, builds, starts the
# services and runs every test. Run-time state: <repo>/.run/ (git-ignored), or $SHOPMICRO_RUN_DIR
# (an isolated second stack, e.g. the walkthrough test; use other ports with it). `test` runs in a
# run folder and on free ports of its own ($TMPDIR/shopmicro-test.*), so it never touches a stack
# that is up. This file: the stack-wide variables, the COMPONENTS table and the verbs; each part
# is in a file it sources. deploy/local/README.md lists those files ("Where things are"), the
# run-time files, every subcommand and every variable: SHOPMICRO_RUN_DIR, SHOPMICRO_BUILD_DIR,
# SHOPMICRO_ASAN_BUILD_DIR, SHOPMICRO_TSAN_BUILD_DIR, SHOPMICRO_STOP_TIMEOUT and the ports
# SHOPMICRO_PG_PORT, SHOPMICRO_CATALOG_PORT, SHOPMICRO_ORDER_PORT, SHOPMICRO_GATEWAY_PORT,
# SHOPMICRO_RELAY_ADMIN_PORT, SHOPMICRO_CATALOG_ADMIN_PORT, SHOPMICRO_ORDER_ADMIN_PORT,
# SHOPMICRO_GATEWAY_ADMIN_PORT (here and services.sh), SHOPMICRO_KAFKA_PORT and
# SHOPMICRO_KAFKA_CONTROLLER_PORT (kafka.sh), SHOPMICRO_RABBITMQ_PORT, SHOPMICRO_RABBITMQ_DIST_PORT and
# SHOPMICRO_RABBITMQ_EPMD_PORT (rabbitmq.sh); SHOPMICRO_PG_BIN, SHOPMICRO_PG_FAST,
# SHOPMICRO_PG_EXTRA_CONF (postgres.sh);
# SHOPMICRO_KAFKA_LIB_CACHE, SHOPMICRO_KAFKA_START_TIMEOUT, SHOPMICRO_KAFKA_HEAP (kafka.sh);
# SHOPMICRO_RABBITMQ_START_TIMEOUT (rabbitmq.sh); the token issuer's constants are in auth.sh;
# SHOPMICRO_TEST_KEEP (suites.sh); SHOPMICRO_SHOP_VENV (shop.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
SELF="$ROOT/deploy/local/stack.sh"
PACKAGES_FILE="$ROOT/deploy/local/packages.txt"

# shellcheck source=SCRIPTDIR/lib/common.sh
source "$ROOT/deploy/local/lib/common.sh"
# shellcheck source=SCRIPTDIR/lib/components.sh
source "$ROOT/deploy/local/lib/components.sh"
# shellcheck source=SCRIPTDIR/postgres.sh
source "$ROOT/deploy/local/postgres.sh"
# shellcheck source=SCRIPTDIR/kafka.sh
source "$ROOT/deploy/local/kafka.sh"
# shellcheck source=SCRIPTDIR/rabbitmq.sh
source "$ROOT/deploy/local/rabbitmq.sh"
# shellcheck source=SCRIPTDIR/services.sh
source "$ROOT/deploy/local/services.sh"
# shellcheck source=SCRIPTDIR/build.sh
source "$ROOT/deploy/local/build.sh"
# shellcheck source=SCRIPTDIR/suites.sh
source "$ROOT/deploy/local/suites.sh"
# shellcheck source=SCRIPTDIR/auth.sh
source "$ROOT/deploy/local/auth.sh"
# shellcheck source=SCRIPTDIR/secrets.sh
source "$ROOT/deploy/local/secrets.sh"
# shellcheck source=SCRIPTDIR/apidocs.sh
source "$ROOT/deploy/local/apidocs.sh"
# shellcheck source=SCRIPTDIR/shop.sh
source "$ROOT/deploy/local/shop.sh"

set_run_dir "${SHOPMICRO_RUN_DIR:-.run}"

BUILD_DIR=$(abs_path "${SHOPMICRO_BUILD_DIR:-build}")
ASAN_BUILD_DIR=$(abs_path "${SHOPMICRO_ASAN_BUILD_DIR:-build-asan}")
TSAN_BUILD_DIR=$(abs_path "${SHOPMICRO_TSAN_BUILD_DIR:-build-tsan}")

# Seconds between SIGTERM and SIGKILL. The services drain in-flight calls for up to 10 s after
# SIGTERM (*_DRAIN_MS), so the default leaves them time to finish that and exit 0.
SERVICE_STOP_TIMEOUT="${SHOPMICRO_STOP_TIMEOUT:-15}"
[[ $SERVICE_STOP_TIMEOUT =~ ^[0-9]+$ ]] || die "SHOPMICRO_STOP_TIMEOUT='$SERVICE_STOP_TIMEOUT' is not a number of seconds"
# Ports that no SERVICES line's own port field names: admin ports of services whose main port is
# gRPC (they appear as @VAR@ in the table's environment).
set_port_vars "SHOPMICRO_PG_PORT=25432" "${KAFKA_PORT_SPECS[@]}" "${RABBITMQ_PORT_SPECS[@]}" \
  "${ADMIN_PORT_SPECS[@]}" "${API_DOCS_PORT_SPECS[@]}" ${REPLICA_PORT_SPECS[@]+"${REPLICA_PORT_SPECS[@]}"} "${SERVICES[@]}"
PG_PORT=$SHOPMICRO_PG_PORT

# The components, in start order: `up` starts them in this order (building first when the next
# one is marked "build"), `down` stops them in the reverse order. Fields, separated by '|':
#   name (and `up`'s section) | function prefix | "build" when it runs binaries of the build tree
# The verbs each component offers are in lib/components.sh. Adding one is a `source` line above
# and a line here.
COMPONENTS=(
  "postgres | postgres |"
  "kafka    | kafka    |"
  "rabbitmq | rabbitmq |"
  "services | services | build"
)

# ---------------------------------------------------------------------------
# The verbs

# start|stop|restart|kill|pause|resume <service>...
cmd_service() {
  local cmd=$1 n
  shift
  check_names "$cmd" "$@"
  for n in "$@"; do
    comp_of "$n"
    "${COMP_PREFIX}_$cmd" "$n"
  done
}

# logs [<service>...]: follow the logs (tail -F: it follows a log that a restart replaces);
# every log when no service is named.
cmd_logs() {
  local n entry
  LOG_FILES=()
  if (( $# == 0 )); then
    for entry in "${COMPONENTS[@]}"; do comp_parse "$entry"; comp_log_files; done
  else
    check_names logs "$@"
    if (( $# == 1 )); then comp_of "$1"; "${COMP_PREFIX}_logs" "$1"; fi
    for n in "$@"; do comp_of "$n"; comp_log_files "$n"; done
  fi
  follow_logs "${LOG_FILES[@]}"
}

cmd_status() {
  local entry u
  for entry in "${COMPONENTS[@]}"; do
    comp_parse "$entry"
    comp_units
    for u in "${COMP_UNITS[@]}"; do "${COMP_PREFIX}_status_line" "$u"; done
  done
}

cmd_up() {
  local entry built=0
  section "deps"; cmd_deps
  for entry in "${COMPONENTS[@]}"; do
    comp_parse "$entry"
    if [[ $COMP_BUILD == build ]] && (( ! built )); then
      section "build"; build_tree "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo || die "build failed: no service started"
      built=1
      section "auth"; auth_keys_ensure; webhook_secret_ensure
    fi
    section "$COMP_NAME"; comp_up
  done
  section "summary"
  cmd_status
  echo
  echo "Postgres DSN: host=127.0.0.1 port=$PG_PORT dbname=catalog|orders user=postgres"
  echo "Kafka:        $KAFKA_BOOTSTRAP (order events on shopmicro.orders.v1: kcat -C -b $KAFKA_BOOTSTRAP -t shopmicro.orders.v1)"
  echo "RabbitMQ:     $RABBITMQ_URL (queues: $(rel "$ROOT/deploy/local/rabbitmq.sh") ctl list_queues name messages)"
  echo "REST gateway: http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT/ (curl it at /healthz, /v1/products)"
  auth_paths
  echo "Tokens:       $(rel "$SELF") token [--sub ID] [--scope \"...\"] [--ttl SECONDS] (JWKS: $(rel "$AUTH_JWKS"))"
  echo "Gateway admin: http://127.0.0.1:$SHOPMICRO_GATEWAY_ADMIN_PORT/ (/metrics, /readyz, /debug/resilience)"
  echo "Logs:         $(rel "$LOGS")/"
  echo "Stop:         $(rel "$SELF") down"
}

cmd_down() {
  local i
  for (( i = ${#COMPONENTS[@]} - 1; i >= 0; i-- )); do comp_parse "${COMPONENTS[i]}"; comp_down; done
}

# ---------------------------------------------------------------------------

usage() {
  cat <<EOF
usage: $(rel "$SELF") <command> [<service>...]

The whole stack:
  deps        install the missing Debian packages of deploy/local/packages.txt
  pg-up       start this repo's Postgres (127.0.0.1:\$SHOPMICRO_PG_PORT, default 25432,
              data in .run/pg/data) and create the databases ${PG_DATABASES[*]}; idempotent
  pg-down     stop that Postgres (fast mode); harmless when it is not running
  pg-restart [fast|immediate]
              restart that Postgres (pg_ctl restart -m fast -w; immediate: no checkpoint, crash recovery)
  build       configure (once) and build \$SHOPMICRO_BUILD_DIR (default build/) with Ninja
  up          deps + pg-up, Kafka (127.0.0.1:\$SHOPMICRO_KAFKA_PORT, default 19092; the jars are
              fetched once), RabbitMQ (127.0.0.1:\$SHOPMICRO_RABBITMQ_PORT, default 25772), build,
              auth-keys, the webhook secret .run/webhook-secret (mode 0600, made once), then start
              every built service in the background
  down        stop the services (SIGTERM, SIGKILL after ${SERVICE_STOP_TIMEOUT} s; paused ones are
              continued first), then RabbitMQ, Kafka, then pg-down
  status      show Postgres, Kafka, RabbitMQ and each service: running/paused/stopped, pid, port
  test        deps, then build + ctest in build/ and in the ASan+UBSan tree build-asan/, and the
              concurrent unit tests under ThreadSanitizer in build-tsan/. The tests get a Postgres
              of their own (run folder in \$TMPDIR, free ports): a running stack is not touched
  test-env    <command> [<arg>...]: run one command (e.g. ctest) with that test Postgres
  auth-keys   create the local token issuer's signing key .run/auth/signing-key.pem (ES256, mode
              0600) and its public JWKS .run/auth/jwks.json, once (up does it); kept when they exist
  token [--sub ID] [--scope "SCOPE ..."] [--ttl SECONDS]
              print a bearer token signed with that key on stdout (iss $AUTH_ISSUER, aud
              $AUTH_AUDIENCE; defaults: --sub $AUTH_DEFAULT_SUB --scope "$AUTH_DEFAULT_SCOPE"
              --ttl $AUTH_DEFAULT_TTL; --scope catalog:write for an admin). Needs the build
  api-docs [--no-serve]
              browse the gateway's OpenAPI document: Swagger UI (PyPI swagger-ui-py, installed once in
              the run folder's venv-apidocs/) and the build's build/gateway/openapi.json, written to
              the run folder's api-docs/ and served on http://127.0.0.1:$SHOPMICRO_API_DOCS_PORT/ until
              Ctrl-C ("Try it out" calls this stack's gateway); --no-serve: only write the page
  shop [--rate R] [--duration S] [--users N]
              shoppers for this stack (Locust, PyPI, installed once in the run folder's
              venv-shopper/): browse, order with an Idempotency-Key, replay it, read the order, at
              about R requests/s (default 2) in all, headless, printing Locust's statistics, for S
              seconds or until Ctrl-C; the last run's statistics in the run folder's shop/

One service or more (services: $(service_names)):
  start       start it (it must be built; postgres: pg-up; kafka, rabbitmq: as in up)
  stop        SIGTERM, wait up to ${SERVICE_STOP_TIMEOUT} s (\$SHOPMICRO_STOP_TIMEOUT), then SIGKILL (postgres: pg-down;
              kafka, rabbitmq: a controlled shutdown)
  restart     stop, then start (postgres: pg-restart)
  kill        SIGKILL at once: a crash, no drain (postgres: the postmaster and every child)
  pause       SIGSTOP: a hung service; its port accepts connections that are never answered
  resume      SIGCONT after pause
  logs        follow its log (tail -F); every log when no service is named

  help        this text

Run-time files: .run/ (logs in .run/logs/; \$SHOPMICRO_RUN_DIR moves it). Variables: see deploy/local/README.md.
EOF
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case $cmd in
    deps)         cmd_deps ;;
    pg-up)        cmd_pg_up ;;
    pg-down)      cmd_pg_down ;;
    pg-restart)   cmd_pg_restart "$@" ;;
    build)        cmd_build ;;
    up)           cmd_up ;;
    down)         cmd_down ;;
    status)       cmd_status ;;
    test)         cmd_test ;;
    test-env)     cmd_test_env "$@" ;;
    auth-keys)    cmd_auth_keys ;;
    token)        cmd_token "$@" ;;
    api-docs)     cmd_api_docs "$@" ;;
    shop)         cmd_shop "$@" ;;
    start|stop|restart|kill|pause|resume) cmd_service "$cmd" "$@" ;;
    logs)         cmd_logs "$@" ;;
    -h|--help|help) usage ;;
    "")           usage >&2; exit 2 ;;
    *)            printf 'stack: unknown command: %s\n\n' "$cmd" >&2; usage >&2; exit 2 ;;
  esac
}

# Sourcing the script (a test reusing its functions) defines everything and runs nothing.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
