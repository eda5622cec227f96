#!/usr/bin/env bash
# bench/run_relay_bench.sh: the outbox relay's drain rate beside kcat -P, and commit-to-visible
# latency, in one run.
#
#   bench/run_relay_bench.sh [--rows N] [--rate R] [--seconds S] [--warm-up S] [--relay-env NAME=VALUE]...
#                            [--rounds N] [--drain-only] [--compare BUILD_DIR] [--saga "R1 R2 ..."]
#
# 0. runs itself again under `deploy/local/stack.sh test-env`: a Postgres of its own on a free
#    port, fresh databases catalog and orders, free ports for Kafka and the services, a run
#    folder in $TMPDIR; all of it gone at exit (also on failure or Ctrl-C)
# 1. builds catalog, order, relay and bench_relay (RelWithDebInfo) in
#    $SHOPMICRO_BENCH_BUILD_DIR (default build-bench/)
# 2. `stack.sh start kafka catalog order` in that run folder (the broker on its free ports, the
#    services at log level warn); two products in the catalog in SQL
# 3. drain: bench_relay fill writes --rows (default 100,000) unpublished outbox rows as the order
#    service writes them (OrderCreated encoded by services/order/events.c, random order ids),
#    for a topic of their own, bench.relay.v1 (so that no saga consumer works beside the drain),
#    VACUUM ANALYZE, CHECKPOINT; --rounds times (default 3) "running1".."runningN", the relay
#    already running when the backlog appears (as when Kafka comes back; paused while the rows
#    are written, the clock starts at its NOTIFY and SIGCONT: the ratio's goal is judged on
#    these), then once "start", the relay started with the backlog waiting (`stack.sh start
#    relay`; its start-up in the time);
#    events/s = rows / (until the relay's published counter has them all, looked at every
#    20 ms over /dev/tcp: no process and no Postgres query per look), the table checked after;
#    the cores each process used meanwhile
# 4. kcat: the drain's keys and values, with the relay's seven headers (constant values of the
#    same sizes) and its producer settings (enable.idempotence=true, acks=all, linger.ms=5), by
#    kcat -P to a fresh topic with shopmicro.orders.v1's partition count, before the first
#    running drain and after each (bench.kcat1.v1 .. bench.kcatN+1.v1); each from kcat's start
#    to its exit (it waits for every delivery report), the count on the topic checked, the cores
#    kcat and the broker used; each running drain's ratio relay/kcat is against the kcat runs
#    just before and after it together, and the goal (>= 0.5) against the median of those N
#    ratios (the start drain's ratio, against all kcat runs, is printed too). Before all of it,
#    unless --warm-up 0, the
#    broker is warmed up: unmeasured kcat runs of the same records until two in a row agree
#    within 10 % (6 to 20 runs), then 5 s (a fresh broker's JIT made the first drain of a run
#    the slowest, and kcat kept speeding up for more than ten runs); then unmeasured drains of
#    the running relay until two in a row agree within 10 % (2 to 6: the broker compiles for
#    the relay's requests as well)
# 5. latency: with the relay running, bench_relay latency: CreateOrder at --rate/s (default 500,
#    open loop) for --seconds (default 20, after 1 s of warm-up) through the order service while
#    a consumer reads shopmicro.orders.v1 from its end; CreateOrder reply -> record read,
#    p50/p90/p99/max (goal p99 <= 25 ms); before the first measured phase the same load runs
#    for --warm-up seconds (default 45; 0: none) unmeasured, while the fresh broker's JIT compiles
#    (--drain-only: step 3 only, e.g. to compare relay settings; --compare DIR: steps 3 and 5
#    also with the relay binary DIR/services/relay/relay, in turn: drains before, after, before,
#    after (kcat once before and once after the four; --rounds does not apply), then latency
#    before, after; the same broker, database and load for both)
# 6. prints the summary. Exit status 1 when a step failed or a check did not hold.
# --saga "200 400 ...": instead of steps 3-5, the stock saga (issue 13): both relays run (order's
#    and relay-catalog), and for each rate CreateOrder at that rate while the consumer counts only
#    OrderConfirmed records: CreateOrder reply -> OrderConfirmed on the topic, p50/p90/p99. The
#    order's status is committed in the transaction that writes that event, so GET /v1/orders/{id}
#    shows CONFIRMED no later than this (goal p99 <= 100 ms at 200/s); the highest rate whose run
#    had no failed call, every order confirmed and kept pace (95 % of the rate) is printed.
# Figures: docs/benchmarks.md, "Results: the outbox relay" and "Results: the stock saga".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

if [[ -z ${RELAY_BENCH_IN_TEST_ENV:-} ]]; then
  RELAY_BENCH_IN_TEST_ENV=1 exec "$STACK" test-env "$ROOT/bench/run_relay_bench.sh" "$@"
fi

ROWS=100000
RATE=500
SECONDS_RUN=20
WARM_S=45
RELAY_ENV=()
DRAIN_ONLY=0
ROUNDS=3
COMPARE_DIR=""
SAGA_RATES=""
TARGET_RATIO=0.5
TARGET_P99_MS=25
# The drained rows go to a topic of their own: on shopmicro.orders.v1 the catalog (the stock
# saga's consumer) would reserve stock for each of them beside the relay, on the same cores and
# broker, and catch up on them during the latency phase; kcat's run has nothing beside it.
DRAIN_TOPIC=bench.relay.v1
TOPIC=shopmicro.orders.v1
KEY_DELIM='~~relay-bench-key~~'        # bench_relay.c's KEY_DELIM and MSG_DELIM
MSG_DELIM=$'~~relay-bench-end~~\n'

while (( $# > 0 )); do
  case $1 in
    --rows)      ROWS=${2:?}; shift 2 ;;
    --rate)      RATE=${2:?}; shift 2 ;;
    --seconds)   SECONDS_RUN=${2:?}; shift 2 ;;
    --warm-up)   WARM_S=${2:?}; shift 2 ;;
    --relay-env) RELAY_ENV+=("${2:?}"); shift 2 ;;
    --drain-only) DRAIN_ONLY=1; shift ;;
    --rounds)  ROUNDS=${2:?}; shift 2 ;;
    --compare) COMPARE_DIR=$(realpath -m -- "${2:?}"); shift 2 ;;
    --saga)    SAGA_RATES=${2:?}; shift 2 ;;
    -h|--help)   usage; exit 0 ;;
    *) unknown_arg "$1" ;;
  esac
done
need_positive "$ROWS" "$RATE" "$SECONDS_RUN" "$ROUNDS"
[[ $WARM_S =~ ^[0-9]+$ ]] || arg_error "--warm-up wants whole seconds (0: none)"
need_env RELAY --relay-env ${RELAY_ENV[@]+"${RELAY_ENV[@]}"}

pg_clients "$SHOPMICRO_PG_PORT"
BROKERS=127.0.0.1:$SHOPMICRO_KAFKA_PORT
TMP=$(mktemp -d /tmp/relay-bench.XXXXXX)
export SHOPMICRO_BUILD_DIR=$BUILD_DIR
export SHOPMICRO_KAFKA_LIB_CACHE=${SHOPMICRO_KAFKA_LIB_CACHE:-$BUILD_DIR/kafka-lib}
# The services' environment (stack.sh start passes its own on top): no line per call or batch.
export CATALOG_LOG_LEVEL=warn ORDER_LOG_LEVEL=warn RELAY_LOG_LEVEL=warn

# cleanup RC: the relays, the services and the broker stopped; on a failure, what their logs
# said last.
# shellcheck disable=SC2317  # invoked by on_exit
cleanup() {
  (( $1 == 0 )) || say "exiting with status $1: stopping the relay, the services and the broker"
  end_pids ${lat_pid:+"$lat_pid"}
  "$STACK" stop relay relay-catalog order catalog kafka >"$TMP/stop.log" 2>&1 || cat "$TMP/stop.log"
  (( $1 == 0 )) || tail_logs 10 "$SHOPMICRO_RUN_DIR/logs" relay order catalog
}
on_exit cleanup

unpublished() { sql orders "SELECT count(*) FROM outbox_pending"; }
# drained: whether no row is unpublished, cheaply (one index probe per shard, where count(*)
# reads every row left: ten of those a second cost the drain's Postgres a fifth of a core).
drained() { [[ $(sql orders "SELECT NOT EXISTS (SELECT 1 FROM outbox_pending)") == t ]]; }

say_machine
say_tree
say "postgres $(sql postgres "SHOW server_version") on 127.0.0.1:$SHOPMICRO_PG_PORT; synchronous_commit=$(sql postgres "SHOW synchronous_commit") fsync=$(sql postgres "SHOW fsync")"

echo "==== build ($BUILD_DIR, RelWithDebInfo)"
bench_build catalog order relay bench_relay
BENCH=$BUILD_DIR/bench/bench_relay

echo "==== broker and services (run folder $SHOPMICRO_RUN_DIR)"
t0=$EPOCHREALTIME
"$STACK" start kafka || die "kafka.sh start failed"
say "broker up on $BROKERS in $(since "$t0") s"
"$STACK" start catalog order || die "the services did not start"
mapfile -t PRODUCTS < <(sql catalog "INSERT INTO products (name, price_cents, stock) VALUES
  ('Mug', 1299, 100000000), ('Tea', 250, 100000000) RETURNING id")
(( ${#PRODUCTS[@]} == 2 )) || die "cannot create the two products"
PRODUCT_A=${PRODUCTS[0]} PRODUCT_B=${PRODUCTS[1]}
PARTS=$(kcat -L -b "$BROKERS" -t "$TOPIC" 2>/dev/null | sed -n "s/^  topic \"$TOPIC\" with \([0-9]*\) partitions:$/\1/p")
[[ $PARTS =~ ^[0-9]+$ ]] || die "cannot read the partition count of $TOPIC"
say "products $PRODUCT_A $PRODUCT_B; $TOPIC has $PARTS partitions"
# shellcheck disable=SC1090  # stack.sh, checked on its own
(source "$STACK" && kafka_paths && kafka_create_topic "$DRAIN_TOPIC" "$PARTS") || die "cannot create $DRAIN_TOPIC"

# The relay's seven headers, constant values of the same sizes, for kcat.
HDRS=(-H ce_specversion=1.0 -H ce_id=0b7c6f1e-3a52-4d7e-9a44-5f0e2b8c9d11
      -H ce_type=shopmicro.order.v1.OrderCreated -H ce_source=/shopmicro/order
      -H ce_time=2026-12-03T12:00:00.000000Z -H content-type=application/protobuf
      -H x-request-id=6f2d3c1a-8b4e-4f5a-9c7d-1e2f3a4b5c6d)
# kcat_produce TOPIC: kcat -P of the drain's keys and values ($TMP/kcat.in) to a fresh TOPIC
# (created with shopmicro.orders.v1's partition count) with the relay's producer settings; waits
# for every delivery report. Sets KCAT_SECONDS.
kcat_produce() {
  local t0 cpu0 c0
  # shellcheck disable=SC1090  # stack.sh, checked on its own
  (source "$STACK" && kafka_paths && kafka_create_topic "$1" "$PARTS") >/dev/null || die "cannot create $1"
  children_ticks
  cpu0=$(cpu_snapshot) c0=$CHILD_TICKS t0=$EPOCHREALTIME
  kcat -P -b "$BROKERS" -t "$1" -K "$KEY_DELIM" -D "$MSG_DELIM" -l "$TMP/kcat.in" "${HDRS[@]}" \
    -X enable.idempotence=true -X acks=all -X linger.ms=5 >"$TMP/kcat.log" 2>&1 ||
    { cat "$TMP/kcat.log"; die "kcat -P failed"; }
  KCAT_SECONDS=$(since "$t0")
  children_ticks
  KCAT_CPU=$(cpu_report cores "$cpu0" "$(cpu_snapshot; echo "kcat $(( CHILD_TICKS - c0 ))")" "$KCAT_SECONDS")
}
# children_ticks: CHILD_TICKS, the CPU ticks used by this shell's ended children (kcat's; the
# relay's come from /proc): `times` in this shell, never in a $(...) subshell, whose children
# would be its own.
children_ticks() {
  times >"$TMP/times"
  CHILD_TICKS=$(awk -v hz="$(getconf CLK_TCK)" 'NR == 2 { t = 0
      for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] }
      printf "%d\n", t * hz }' "$TMP/times")
}
# rows_per_s S: ROWS in S seconds, per second, rounded.
rows_per_s() { awk -v n="$ROWS" -v s="$1" 'BEGIN { printf "%.0f", n / s }'; }
# kcat_measured LABEL TOPIC: kcat_produce, the records on the topic counted; KCAT_RATE[LABEL].
declare -A KCAT_RATE=() KCAT_S=()
kcat_measured() {
  local n
  say "kcat $1: $ROWS records to $2; loadavg $(load1)"
  kcat_produce "$2"
  n=$(kcat -C -b "$BROKERS" -t "$2" -o beginning -e -q -f '%p\n' 2>/dev/null | wc -l)
  (( n == ROWS )) || die "kcat -P: $n records on $2, not $ROWS"
  KCAT_S[$1]=$KCAT_SECONDS
  KCAT_RATE[$1]=$(rows_per_s "$KCAT_SECONDS")
  say "kcat $1: $ROWS records in ${KCAT_S[$1]} s: ${KCAT_RATE[$1]} events/s (all $n on the topic)"
  say "kcat $1 cpu: $KCAT_CPU"
}
# warm_broker: before anything is measured, the broker's produce path under the drain's load,
# unmeasured: a broker started a minute before compiles its hot code meanwhile (C2), and the
# first drain measured that (2026-12-06: 38,000-55,000 events/s where the same relay drained
# 72,000-73,000 two drains later). kcat runs of the drain's records until two in a row are
# within 10 % of each other and at least WARM_MIN_ROUNDS ran (at most WARM_MAX_ROUNDS), then a
# pause for the compiler's queue. Four fixed rounds were not enough: sixteen kcat runs in a row
# on one fresh broker went 64,000, 109,000, 170,000, 201,000 ... 420,000, 481,000, 507,000
# records/s, so kcat before and after the drains of one run differed by up to 1.6x.
# within_10pct A B: whether two rates agree within 10 % of each other (the warm-ups' "steady").
within_10pct() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(b <= 1.1 * a && a <= 1.1 * b) }'; }
WARM_MIN_ROUNDS=6
WARM_MAX_ROUNDS=20
warm_broker() {
  local i prev=0 rate
  (( WARM_S > 0 )) || return 0
  sql orders "TRUNCATE outbox" >/dev/null
  "$BENCH" fill --dsn "host=127.0.0.1 port=$SHOPMICRO_PG_PORT dbname=orders user=postgres" \
    --rows "$ROWS" --kcat-file "$TMP/kcat.in" --topic "$DRAIN_TOPIC" >/dev/null || die "bench_relay fill failed"
  for (( i = 1; i <= WARM_MAX_ROUNDS; i++ )); do
    kcat_produce "bench.warm$i.v1"
    rate=$(rows_per_s "$KCAT_SECONDS")
    say "warm-up: kcat -P round $i, $ROWS records in $KCAT_SECONDS s ($rate/s), not measured"
    if (( i >= WARM_MIN_ROUNDS )) &&
       within_10pct "$prev" "$rate"; then
      say "warm-up: two rounds in a row within 10 % of each other"
      break
    fi
    prev=$rate
  done
  (( i <= WARM_MAX_ROUNDS )) || say "warning: kcat still not steady after $WARM_MAX_ROUNDS rounds"
  sleep 5
}

# warm_relay: the broker compiles for the relay's requests too. kcat's rounds do not cover them:
# perf -a through three 1,000,000-row drains after kcat's warm-up (2026-12-06, fifth session)
# found the broker's C2 compiler threads at 11 % of the machine in the first drain and absent
# from the next two, which drained 12-16 % faster (245,098 against 284,900 and 273,973 events/s).
# A production broker has long compiled for its producers, so the running relay drains, unmeasured,
# until two drains in a row are within 10 % of each other (at least WARM_RELAY_MIN, at most
# WARM_RELAY_MAX), as kcat did above.
WARM_RELAY_MIN=2
WARM_RELAY_MAX=6
warm_relay() {
  local i prev=0 rate
  (( WARM_S > 0 )) || return 0
  for (( i = 1; i <= WARM_RELAY_MAX; i++ )); do
    drain "warm$i" "$BUILD_DIR" running >/dev/null
    rate=${DRAIN_RATE[warm$i]}
    say "warm-up: relay drain $i, $ROWS rows in ${DRAIN_S[warm$i]} s ($rate/s), not measured"
    if (( i >= WARM_RELAY_MIN )) &&
       within_10pct "$prev" "$rate"; then
      say "warm-up: two relay drains in a row within 10 % of each other"
      return 0
    fi
    prev=$rate
  done
  say "warning: the relay's drains still not steady after $WARM_RELAY_MAX"
}

# fill_outbox: an empty outbox filled with ROWS rows (and the kcat input), vacuumed and
# checkpointed, as a backlog that waited while Kafka was away looks.
fill_outbox() {
  sql orders "TRUNCATE outbox" >/dev/null
  "$BENCH" fill --dsn "host=127.0.0.1 port=$SHOPMICRO_PG_PORT dbname=orders user=postgres" \
    --rows "$ROWS" --kcat-file "$TMP/kcat.in" --topic "$DRAIN_TOPIC" || die "bench_relay fill failed"
  sql orders "VACUUM ANALYZE outbox" >/dev/null
  sql postgres "CHECKPOINT" >/dev/null
  (( $(unpublished) == ROWS )) || die "the outbox does not hold $ROWS unpublished rows"
}
# relay_metric NAME: the running relay's shopmicro_relay_NAME into METRIC (false when the page
# or the sample is missing), over bash's /dev/tcp: no process per look, so the drain's clock can
# stop on the published counter (the NOT EXISTS over outbox_pending polled before cost Postgres
# 59 ms a call, pg_stat_statements 2026-12-06: a third of a core beside the drain).
relay_metric() {
  local line fd
  METRIC=""
  exec {fd}<>"/dev/tcp/127.0.0.1/$SHOPMICRO_RELAY_ADMIN_PORT" 2>/dev/null || return 1
  printf 'GET /metrics HTTP/1.1\r\nHost: relay\r\n\r\n' >&"$fd"
  while IFS= read -r line <&"$fd"; do
    [[ $line == "shopmicro_relay_$1 "* ]] && METRIC=${line#* }
  done
  exec {fd}<&-
  [[ -n $METRIC ]]
}
# need_metric NAME: relay_metric NAME, or the run stops saying which sample is missing.
need_metric() { relay_metric "$1" || die "the relay's /metrics has no shopmicro_relay_$1"; }
# wait_published N S: until the relay counts N rows published (false after S seconds); a line
# every 2 s.
# (Times in microseconds by bash arithmetic, the pause by nap: no process per look.)
wait_published() {
  local t0=${EPOCHREALTIME/./} last=${EPOCHREALTIME/./} now
  until relay_metric published_total && (( METRIC >= $1 )); do
    now=${EPOCHREALTIME/./}
    if (( now - last >= 2000000 )); then
      say "  $(( (now - t0) / 1000 )) ms: ${METRIC:-?} published of $1"
      last=$now
    fi
    (( now - t0 <= $2 * 1000000 )) || return 1
    nap 0.02
  done
}
# start_relay DIR: the relay of build dir DIR started (the command returns once its admin port
# is open).
start_relay() {
  SHOPMICRO_BUILD_DIR=$1 "$STACK" start relay >"$TMP/relay-start.log" 2>&1 ||
    { cat "$TMP/relay-start.log"; die "the relay did not start"; }
}
# drain LABEL DIR MODE: the relay of build dir DIR drains ROWS outbox rows, timed until it
# counts them published (then checked in the table); it keeps running. MODE:
#   running  the relay already runs, as it does when a backlog builds up while Kafka is away:
#            started on an empty outbox, one row published (its connections, the producer and
#            the topic's metadata are up), then SIGSTOPped while the backlog is written, and
#            the clock starts at the NOTIFY and SIGCONT that let it see the backlog at once.
#            kcat's clock includes its own start (a few milliseconds), so this is the like for
#            like comparison of the two producers, and the one the goal is judged on
#   start    the relay is started with the backlog waiting: its process start, Postgres
#            connections, leases and producer set-up are in the time, as after a deploy or a
#            crash (on 2026-12-06 both modes drained alike: the start overlaps the first read)
# Sets DRAIN_RATE[LABEL], DRAIN_S[LABEL], BATCHES[LABEL].
declare -A DRAIN_RATE=() DRAIN_S=() BATCHES=() PHASES=() DRAIN_CPU=() DRAIN_MODE=()
drain() {
  local label=$1 dir=$2 mode=$3 t0 p0=0 errs cpu0 b0=0
  DRAIN_MODE[$label]=$mode
  "$STACK" stop relay >/dev/null
  if [[ $mode == running ]]; then
    sql orders "TRUNCATE outbox" >/dev/null
    start_relay "$dir"
    "$BENCH" fill --dsn "host=127.0.0.1 port=$SHOPMICRO_PG_PORT dbname=orders user=postgres" \
      --rows 1 --kcat-file "$TMP/one.in" --topic "$DRAIN_TOPIC" >/dev/null || die "bench_relay fill failed"
    sql orders "NOTIFY outbox" >/dev/null
    wait_published 1 30 || die "the relay did not publish one row in 30 s"
    p0=$METRIC
    need_metric batches_total
    b0=$METRIC
    "$STACK" pause relay >/dev/null || die "cannot pause the relay"
  fi
  fill_outbox
  say "relay $label ($dir/services/relay/relay, $mode), settings: defaults${RELAY_ENV[*]:+ and ${RELAY_ENV[*]}}; loadavg $(load1)"
  cpu0=$(cpu_snapshot) t0=$EPOCHREALTIME
  if [[ $mode == running ]]; then
    sql orders "NOTIFY outbox" >/dev/null
    "$STACK" resume relay >/dev/null || die "cannot resume the relay"
  else
    start_relay "$dir"
    say "relay $label: started (admin port open) $(since "$t0") s after the start command"
  fi
  wait_published $(( p0 + ROWS )) 600 || die "not drained after 600 s"
  DRAIN_S[$label]=$(since "$t0")
  # Cores each process used while draining: says whether the drain waited for CPU or for I/O.
  # Taken before the table is checked, whose query is not the drain's work.
  DRAIN_CPU[$label]=$(cpu_report cores "$cpu0" "$(cpu_snapshot)" "${DRAIN_S[$label]}")
  drained || die "the relay counts $ROWS rows published, but $(unpublished) are not"
  DRAIN_RATE[$label]=$(rows_per_s "${DRAIN_S[$label]}")
  need_metric batches_total
  BATCHES[$label]=$(( METRIC - b0 ))
  need_metric produce_errors_total
  errs=$METRIC
  say "relay $label: $ROWS rows published in ${DRAIN_S[$label]} s: ${DRAIN_RATE[$label]} events/s (${BATCHES[$label]} batches, $errs produce errors)"
  # With --relay-env RELAY_LOG_LEVEL=debug the relay logs each batch's phases: where the time went.
  PHASES[$label]=$(awk -F'[(),]' '/msg="batch: [1-9]/ {
      for (i = 2; i <= NF; i++) { if (split($i, f, " ") < 3) continue
        if (f[1] == "mark") { k = "mark+commit"; v = f[4] } else { k = f[1]; v = f[2] }
        sum[k] += v; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
      n++ }
    END { if (n) { printf "%d batches, ms per batch:", n
                   for (i = 1; i <= m; i++) printf " %s %.1f", order[i], sum[order[i]] / n } }' \
    "$SHOPMICRO_RUN_DIR/logs/relay.log")
  say "relay $label cpu: ${DRAIN_CPU[$label]}"
  [[ -z ${PHASES[$label]} ]] || say "relay $label phases: ${PHASES[$label]}"
}

for kv in "${RELAY_ENV[@]}"; do export "${kv?}"; done

# latency LABEL DIR: the relay of build dir DIR (restarted), then bench_relay latency; its RESULT
# line in LAT[LABEL]. The first one of a run is preceded by the warm-up.
declare -A LAT=() CPU=()
WARMED=0
# LAT_RATE (default RATE), LAT_ARGS (more bench_relay arguments) and LAT_TOLERANT=1 (a run with
# failed calls or unread records is reported, not fatal) serve --saga.
latency() {
  local label=$1 dir=$2 rc=0 cpu0 cpu1 t_cpu
  "$STACK" stop relay >/dev/null
  start_relay "$dir"
  say "relay $label ($dir/services/relay/relay); loadavg $(load1)"
  (( WARMED )) || warm_up
  "$BENCH" latency --order "127.0.0.1:$SHOPMICRO_ORDER_PORT" --brokers "$BROKERS" --topic "$TOPIC" \
    --product "$PRODUCT_A" --product "$PRODUCT_B" --rate "${LAT_RATE:-$RATE}" --seconds "$SECONDS_RUN" \
    ${LAT_ARGS[@]+"${LAT_ARGS[@]}"} >"$TMP/latency.log" 2>&1 &
  lat_pid=$!
  cpu0=$(cpu_snapshot) t_cpu=$EPOCHREALTIME
  wait "$lat_pid" || rc=$?
  cpu1=$(cpu_snapshot)
  (( rc == 0 || ${LAT_TOLERANT:-0} )) || { cat "$TMP/latency.log"; die "bench_relay latency failed (failed calls or unread records)"; }
  lat_pid=""
  cat "$TMP/latency.log"
  LAT[$label]=$(grep '^RESULT ' "$TMP/latency.log") || die "bench_relay printed no RESULT line"
  CPU[$label]=$(cpu_report per-order "$cpu0" "$cpu1" "$(since "$t_cpu")" "$(field "$label" calls)")
  say "cpu $label: ${CPU[$label]}"
  (( $(unpublished) == 0 )) || say "warning: $(unpublished) rows still unpublished after the latency run"
}
# warm_up: the latency phase's load for --warm-up seconds, not measured. The broker is a JVM that
# started a minute before: under this load its C2 compiler threads took as much CPU as its request
# handlers for 30-40 s (perf and /proc, 2026-12-05: 0.58-0.68 cores in the first 30 s, then
# 0.22-0.25), so a phase measured at once measured the JIT's work on the same two cores.
warm_up() {
  local rc=0
  WARMED=1
  (( WARM_S > 0 )) || return 0
  say "warm-up: CreateOrder at ${LAT_RATE:-$RATE}/s for $WARM_S s, not measured (the broker's JIT compiles meanwhile)"
  "$BENCH" latency --order "127.0.0.1:$SHOPMICRO_ORDER_PORT" --brokers "$BROKERS" --topic "$TOPIC" \
    --product "$PRODUCT_A" --product "$PRODUCT_B" --rate "${LAT_RATE:-$RATE}" --seconds "$WARM_S" --warmup 0 \
    ${LAT_ARGS[@]+"${LAT_ARGS[@]}"} >"$TMP/warm-up.log" 2>&1 &
  lat_pid=$!
  wait "$lat_pid" || rc=$?
  lat_pid=""
  (( rc == 0 || ${LAT_TOLERANT:-0} )) || { cat "$TMP/warm-up.log"; die "the warm-up failed (failed calls or unread records)"; }
  say "warm-up: $(grep '^RESULT ' "$TMP/warm-up.log" || echo 'no RESULT line')"
}

# field LABEL KEY: KEY of latency run LABEL's RESULT line.
field() { result_field "${LAT[$1]}" "$2"; }

# cpu_snapshot: "name ticks" lines of every process of the run; a delta over a latency run
# divided by its orders is each process's CPU per order, which says where a saturated machine
# spends its time.
# "pg:relay" is the relays' own backends (their read and cursor session and their LISTEN
# session), also counted in "postgres" (every Postgres process): what the relay costs Postgres,
# apart from the background writers and the other services.
cpu_snapshot() {
  local -a pids=()
  stack_cpu_snapshot order catalog relay relay-catalog kafka
  mapfile -t pids < <(sql postgres "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'relay%'")
  proc_ticks ${pids[@]+"${pids[@]}"} | awk '{ s += $2 } END { print "pg:relay", s + 0 }'
}

if [[ -n $SAGA_RATES ]]; then
  echo "==== the stock saga: both relays; CreateOrder -> OrderConfirmed at: $SAGA_RATES orders/s"
  "$STACK" start relay-catalog >/dev/null || die "relay-catalog did not start"
  LAT_ARGS=(--ce-type shopmicro.order.v1.OrderConfirmed)
  LAT_TOLERANT=1
  best=0
  for r in $SAGA_RATES; do
    LAT_RATE=$r
    latency "saga-$r" "$BUILD_DIR"
    sustained=$(awk -v want="$r" -v got="$(field "saga-$r" rate)" -v e="$(field "saga-$r" errors)" \
      -v m="$(field "saga-$r" missing)" 'BEGIN { print (e == 0 && m == 0 && got >= 0.95 * want) ? 1 : 0 }')
    (( sustained )) && best=$r
  done
  echo "==== summary: the stock saga"
  printf 'nproc                       %s; loadavg after the run %s\n' "$(nproc)" "$(loadavg)"
  for r in $SAGA_RATES; do
    printf 'CreateOrder -> OrderConfirmed at %4s/s: p50 %s ms  p90 %s ms  p99 %s ms  max %s ms  (%s orders, %s/s reached, %s failed, %s never confirmed)\n' \
      "$r" "$(field "saga-$r" p50_ms)" "$(field "saga-$r" p90_ms)" "$(field "saga-$r" p99_ms)" \
      "$(field "saga-$r" max_ms)" "$(field "saga-$r" measured)" "$(field "saga-$r" rate)" \
      "$(field "saga-$r" errors)" "$(field "saga-$r" missing)"
    printf '  cpu                       %s\n' "${CPU[saga-$r]}"
  done
  printf 'highest rate sustained (no failure, all confirmed, >= 95 %% of the rate): %s orders/s\n' "$best"
  exit 0
fi
echo "==== warm-up of the broker, then kcat -P: the drain's $ROWS keys and values ($PARTS partitions)"
warm_broker
warm_relay
# kcat and the running relay take turns, ROUNDS times, then kcat once more: each running drain
# is judged against the kcat runs just before and after it (what the machine gave both within a
# few seconds), and the goal against the median of those ratios. One pair moved by 20-30 % with
# the machine (2026-12-06: kcat 196,000-435,000 records/s in one day's runs).
KCATS=(k1)
(( DRAIN_ONLY )) || kcat_measured k1 bench.kcat1.v1
if [[ -n $COMPARE_DIR ]]; then
  echo "==== drain: $ROWS outbox rows, relay 'before' ($COMPARE_DIR) and 'after' ($BUILD_DIR) in turn, each running when the backlog appears"
  LABELS=(before after before2 after2)
  for l in "${LABELS[@]}"; do
    case $l in
      before*) drain "$l" "$COMPARE_DIR" running ;;
      after*) drain "$l" "$BUILD_DIR" running ;;
    esac
  done
  (( DRAIN_ONLY )) || { kcat_measured k2 bench.kcat2.v1; KCATS+=(k2); }
else
  echo "==== drain: $ROWS outbox rows, the relay running when the backlog appears ($ROUNDS rounds, kcat between), then started with it"
  LABELS=()
  for (( k = 1; k <= ROUNDS; k++ )); do
    LABELS+=("running$k")
    drain "running$k" "$BUILD_DIR" running
    (( DRAIN_ONLY )) || { kcat_measured "k$(( k + 1 ))" "bench.kcat$(( k + 1 )).v1"; KCATS+=("k$(( k + 1 ))"); }
  done
  LABELS+=(start)
  drain start "$BUILD_DIR" start
fi
(( DRAIN_ONLY )) && exit 0
# kcat_mean LABEL...: kcat's rate over those runs together (rows over their summed time).
kcat_mean() {
  local l t=0
  for l; do t=$(awk -v a="$t" -v b="${KCAT_S[$l]}" 'BEGIN { print a + b }'); done
  awk -v n="$ROWS" -v k="$#" -v t="$t" 'BEGIN { printf "%.0f", k * n / t }'
}
# median X...: the middle value (the mean of the two middle ones for an even count).
median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
KCAT_ALL=$(kcat_mean "${KCATS[@]}")
# The kcat runs around each drain: before/after the four drains of --compare; k and k+1 else.
declare -A DRAIN_KCAT=()
for l in "${LABELS[@]}"; do
  case $l in
    running*) k=${l#running}; DRAIN_KCAT[$l]=$(kcat_mean "k$k" "k$(( k + 1 ))") ;;
    *) DRAIN_KCAT[$l]=$KCAT_ALL ;;
  esac
done

echo "==== latency: CreateOrder at $RATE/s for $SECONDS_RUN s, relay running, consumer on $TOPIC"
if [[ -n $COMPARE_DIR ]]; then
  LAT_LABELS=(before after)
  latency before "$COMPARE_DIR"
  latency after "$BUILD_DIR"
else
  LAT_LABELS=(after)
  latency after "$BUILD_DIR"
fi

echo "==== summary"
printf 'nproc                       %s; loadavg after the run %s\n' "$(nproc)" "$(loadavg)"
kcat_runs=""
for l in "${KCATS[@]}"; do kcat_runs+="${kcat_runs:+, }$l ${KCAT_RATE[$l]}"; done
printf 'kcat -P, same payloads      %s events/s  (%s records a run, %s runs: %s events/s)\n' \
  "$KCAT_ALL" "$ROWS" "${#KCATS[@]}" "$kcat_runs"
RATIOS=()
for l in "${LABELS[@]}"; do
  ratio=$(ratio "${DRAIN_RATE[$l]}" "${DRAIN_KCAT[$l]}")
  if [[ ${DRAIN_MODE[$l]} == running ]]; then
    [[ $l == running* ]] && RATIOS+=("$ratio")
    printf 'relay drain %-15s %s events/s  (%s rows in %s s, %s batches, the relay running); ratio to kcat %s (its kcat %s/s)\n' \
      "$l" "${DRAIN_RATE[$l]}" "$ROWS" "${DRAIN_S[$l]}" "${BATCHES[$l]}" "$ratio" "${DRAIN_KCAT[$l]}"
  else
    printf 'relay drain %-15s %s events/s  (%s rows in %s s, %s batches, the relay started with the backlog: its start in the time); ratio to kcat %s\n' \
      "$l" "${DRAIN_RATE[$l]}" "$ROWS" "${DRAIN_S[$l]}" "${BATCHES[$l]}" "$ratio"
  fi
  printf '  cpu                       %s\n' "${DRAIN_CPU[$l]}"
  [[ -z ${PHASES[$l]} ]] || printf '  phases                    %s\n' "${PHASES[$l]}"
done
if (( ${#RATIOS[@]} > 0 )); then
  m=$(median "${RATIOS[@]}")
  printf 'relay/kcat, relay running   median %s of %s rounds (%s; goal >= %s: %s)\n' "$m" "${#RATIOS[@]}" \
    "${RATIOS[*]}" "$TARGET_RATIO" "$(goal_met "$m" '>=' "$TARGET_RATIO")"
fi
for l in "${LAT_LABELS[@]}"; do
  printf 'commit-to-visible %-9s p50 %s ms  p90 %s ms  p99 %s ms  max %s ms  (%s orders at %s/s, %s failed; p99 goal <= %s ms: %s)\n' \
    "$l" "$(field "$l" p50_ms)" "$(field "$l" p90_ms)" "$(field "$l" p99_ms)" "$(field "$l" max_ms)" \
    "$(field "$l" measured)" "$(field "$l" rate)" "$(field "$l" errors)" "$TARGET_P99_MS" \
    "$(goal_met "$(field "$l" p99_ms)" '<=' "$TARGET_P99_MS")"
  printf '  CreateOrder call          p50 %s ms  p99 %s ms\n' "$(field "$l" call_p50_ms)" "$(field "$l" call_p99_ms)"
done
