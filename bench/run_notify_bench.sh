#!/usr/bin/env bash
# bench/run_notify_bench.sh: the notification service's delivery rate beside a bare pkg/mq
# publish-and-consume loop on the same RabbitMQ node in the same run, and the end-to-end time
# from CreateOrder 200 to the webhook at the sink (issue 14, "Benchmark").
#
#   bench/run_notify_bench.sh [--jobs N] [--rate R] [--seconds S] [--no-e2e]
#                             [--service-env NOTIFY_NAME=VALUE]...
#
# The end-to-end step's gateway checks bearer tokens: `stack.sh start` gives it the run folder's
# JWKS, and its CreateOrders carry a token signed with the run folder's key (`stack.sh token`,
# through bench/lib.sh's bench_auth --stack: sub c1, scopes catalog:write orders:write
# orders:read), the orders customer c1's. The gateway runs with GATEWAY_RATE_LIMITS=off: the
# benchmark measures the pipeline, not the limiter (bench/ratelimit_bench does).
#
# 0. runs itself again under `deploy/local/stack.sh test-env`: a Postgres of its own on a free
#    port, fresh databases, free ports for Kafka, RabbitMQ and every service, a run folder in
#    $TMPDIR; all of it gone at exit (also on failure or Ctrl-C). The user's .run/ and its
#    stack are not touched.
# 1. builds the services and bench_notify (RelWithDebInfo, like the other benchmarks) in
#    $SHOPMICRO_BENCH_BUILD_DIR (default build-bench/)
# 2. `stack.sh start kafka rabbitmq` in that run folder
# 3. bare: bench_notify bare on topology base bench.bare: N jobs (default 5000; the real job
#    body, ~290 bytes) published one confirm at a time; then consumed and acked by 4 threads
#    (prefetch 4: the service's NOTIFY_WORKERS and NOTIFY_PREFETCH); then both at once
# 4. the service: notify-sink and the real notification binary (its defaults: 4 workers,
#    prefetch 4, log level info)
#    a. pipeline: N OrderConfirmed records produced to shopmicro.orders.v1 at once (CloudEvents
#       headers, protobuf value); jobs published and delivered polled on /metrics every 0.1 s:
#       jobs/s of the publish side (Kafka -> RabbitMQ) and of delivery, from the first record
#    b. pre-queued: the service stopped, N jobs put into its work queue as its publisher writes
#       them, the service started again: delivery alone, jobs/s from the sink's first to its last
#       accepted delivery (its log's ms timestamps), so the service's start is not counted
# 5. end to end (unless --no-e2e): catalog, order, relay, relay-catalog and gateway too; one
#    product with a large stock; one warm-up order; then CreateOrder through the gateway, open
#    loop, --rate/s (default 20) for --seconds (default 15); each 200 timestamped; the order's
#    OrderConfirmed outbox row (event id = the webhook's id) and the sink's log line of that id
#    give CreateOrder 200 -> webhook at the sink, p50/p90/p99/max, and the stages on the way
#    (--service-env: more settings for the notification service, e.g. NOTIFY_LOG_LEVEL=warn, to
#    compare; NOTIFY_WORKERS / NOTIFY_PREFETCH there also change the bare loop's threads and prefetch)
# 6. prints the summary, with the CPU each process used in each phase. Exit status 1 when a step
#    failed or a count did not add up.
# Figures: docs/benchmarks.md, "Results: notifications (issue 14)".
set -euo pipefail
ARGV=("$@")   # the command line, for test_env_rerun once the options are checked

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

JOBS=5000
RATE=20
SECONDS_RUN=15
E2E=1
WORKERS=4
PREFETCH=4
TOPIC=shopmicro.orders.v1
SERVICE_ENV=()

while (( $# > 0 )); do
  case $1 in
    --jobs)    JOBS=${2:?}; shift 2 ;;
    --rate)    RATE=${2:?}; shift 2 ;;
    --seconds) SECONDS_RUN=${2:?}; shift 2 ;;
    --no-e2e)  E2E=0; shift ;;
    --service-env) SERVICE_ENV+=("${2:?}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) unknown_arg "$1" ;;
  esac
done
need_positive "$JOBS" "$RATE" "$SECONDS_RUN"
need_env NOTIFY --service-env ${SERVICE_ENV[@]+"${SERVICE_ENV[@]}"}
for kv in "${SERVICE_ENV[@]}"; do
  case $kv in NOTIFY_WORKERS=*) WORKERS=${kv#*=} ;; NOTIFY_PREFETCH=*) PREFETCH=${kv#*=} ;; esac
done
(( JOBS <= 9000 )) || arg_error "--jobs at most 9000 (the sink keeps 10000 records)"

# Arguments are checked first; then the run goes on in a test stack of its own.
test_env_rerun NOTIFY_BENCH_IN_TEST_ENV ${ARGV[@]+"${ARGV[@]}"}

pg_clients "$SHOPMICRO_PG_PORT"
BROKERS=127.0.0.1:$SHOPMICRO_KAFKA_PORT
ADMIN=127.0.0.1:$SHOPMICRO_NOTIFY_ADMIN_PORT
SINK=127.0.0.1:$SHOPMICRO_NOTIFY_SINK_PORT
SINK_LOG=$SHOPMICRO_RUN_DIR/logs/notify-sink.log
TMP=$(mktemp -d /tmp/notify-bench.XXXXXX)
export SHOPMICRO_BUILD_DIR=$BUILD_DIR
export SHOPMICRO_KAFKA_LIB_CACHE=${SHOPMICRO_KAFKA_LIB_CACHE:-$BUILD_DIR/kafka-lib}
# The services' own defaults, said out loud (the bare loop uses the same two).
export NOTIFY_WORKERS=$WORKERS NOTIFY_PREFETCH=$PREFETCH
for kv in "${SERVICE_ENV[@]}"; do export "${kv?}"; done
# No line per call in the services of the end-to-end phase; the sink and the notification
# service keep info: the sink's line per delivery is the webhook's arrival time.
export CATALOG_LOG_LEVEL=warn ORDER_LOG_LEVEL=warn RELAY_LOG_LEVEL=warn GATEWAY_LOG_LEVEL=warn

ALL_SERVICES=(gateway relay-catalog relay order catalog notification notify-sink)
# cleanup RC: the services and the brokers stopped; on a failure, what their logs said last.
# shellcheck disable=SC2317  # invoked by on_exit
cleanup() {
  (( $1 == 0 )) || say "exiting with status $1: stopping the services and the brokers"
  end_pids ${bg_pid:+"$bg_pid"}
  "$STACK" stop "${ALL_SERVICES[@]}" rabbitmq kafka >"$TMP/stop.log" 2>&1 || cat "$TMP/stop.log"
  (( $1 == 0 )) || tail_logs 8 "$SHOPMICRO_RUN_DIR/logs" notification notify-sink order catalog relay gateway
}
on_exit cleanup

# cpu_snapshot: "name ticks" lines of every process of the run; a delta over a phase says where
# the time went.
cpu_snapshot() { stack_cpu_snapshot notification notify-sink rabbitmq kafka catalog order relay relay-catalog gateway; }

metric() {  # metric NAME: its value on the notification service's /metrics (0 when absent)
  curl -s --max-time 2 "http://$ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }'
}

say_machine
say_tree
T_RUN=$EPOCHREALTIME

echo "==== build ($BUILD_DIR, RelWithDebInfo)"
bench_build catalog order relay gateway shopmicro-jwt notify-sink notification bench_notify
BENCH=$BUILD_DIR/bench/bench_notify

echo "==== brokers (run folder $SHOPMICRO_RUN_DIR)"
t0=$EPOCHREALTIME
"$STACK" start kafka >"$TMP/kafka-start.log" 2>&1 &
bg_pid=$!
"$STACK" start rabbitmq || die "rabbitmq did not start"
wait "$bg_pid" || { bg_pid=""; cat "$TMP/kafka-start.log"; die "kafka did not start"; }
bg_pid=""
say "kafka on $BROKERS and rabbitmq on 127.0.0.1:$SHOPMICRO_RABBITMQ_PORT up in $(since "$t0" 3) s"

echo "==== 1. bare loop: pkg/mq only, base bench.bare, $JOBS jobs, $WORKERS consumers, prefetch $PREFETCH; loadavg $(load1)"
c0=$(cpu_snapshot) t0=$EPOCHREALTIME
"$BENCH" bare --port "$SHOPMICRO_RABBITMQ_PORT" --base bench.bare --jobs "$JOBS" \
  --workers "$WORKERS" --prefetch "$PREFETCH" | tee "$TMP/bare.log" || die "bench_notify bare failed"
CPU_BARE=$(cpu_report cores "$c0" "$(cpu_snapshot)" "$(since "$t0" 3)")
BARE=$(grep '^RESULT ' "$TMP/bare.log") || die "bench_notify bare printed no RESULT line"
say "cpu (whole bare step, bench_notify itself not listed): $CPU_BARE"

echo "==== 2. the service: notify-sink and notification ($WORKERS workers, prefetch $PREFETCH${SERVICE_ENV[*]:+, ${SERVICE_ENV[*]}})"
"$STACK" start notify-sink notification >/dev/null || die "the services did not start"
for (( i = 0; i < 200; i++ )); do
  [[ $(metric shopmicro_notification_workers_connected) == "$WORKERS" ]] && break
  sleep 0.1
done
(( i < 200 )) || die "the notification service's $WORKERS workers did not connect in 20 s"
sleep 1   # the Kafka consumer's group join

# wait_delivered TARGET T0 LABEL: polls /metrics every 0.1 s until jobs delivered >= TARGET;
# sets T_PUB (s from T0 to published >= TARGET, if it is polled) and T_DEL.
wait_delivered() {
  local target=$1 start=$2 label=$3 pub del last=$EPOCHREALTIME
  T_PUB="" T_DEL=""
  while :; do
    pub=$(metric shopmicro_notification_jobs_published_total)
    del=$(metric shopmicro_notification_jobs_delivered_total)
    [[ -z $T_PUB ]] && (( ${pub%.*} >= target )) && T_PUB=$(since "$start" 3)
    if (( ${del%.*} >= target )); then
      T_DEL=$(since "$start" 3)
      [[ -n $T_PUB ]] || T_PUB=$T_DEL   # the last jobs were published and delivered between two reads
      break
    fi
    if awk -v a="$last" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a >= 2) }'; then
      say "  $label $(since "$start" 3) s: $pub published, $del delivered"
      last=$EPOCHREALTIME
    fi
    awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 120) }' &&
      die "$label: $del of $target delivered after 120 s"
    sleep 0.1
  done
}
sink_phase_log() {  # sink_phase_log FROM_LINE OUT: the sink's log lines after FROM_LINE
  tail -n +"$(( $1 + 1 ))" "$SINK_LOG" >"$2"
}
check_counts() {  # check_counts LABEL: nothing retried, dead-lettered or duplicated
  local r d dup
  r=$(curl -s "http://$ADMIN/metrics" | awk '$1 ~ /^shopmicro_notification_jobs_retried_total/ { s += $2 } END { print s + 0 }')
  d=$(metric shopmicro_notification_jobs_dead_lettered_total)
  dup=$(curl -s "http://$SINK/received" | sed -n 's/.*"duplicates":\([0-9]*\).*/\1/p' | head -n1)
  say "$1: retried $r, dead-lettered $d, duplicates at the sink ${dup:-?}"
  [[ $r == 0 && ${d%.*} == 0 ]] || die "$1: jobs were retried or dead-lettered: the sink was not fast enough, or failed"
}

echo "==== 2a. pipeline: $JOBS OrderConfirmed records to $TOPIC at once; loadavg $(load1)"
curl -s -XPOST "http://$SINK/control?reset=1" >/dev/null
from=$(wc -l <"$SINK_LOG")
c0=$(cpu_snapshot) t0=$EPOCHREALTIME
"$BENCH" produce --brokers "$BROKERS" --topic "$TOPIC" --events "$JOBS" >"$TMP/produce.log" ||
  { cat "$TMP/produce.log"; die "bench_notify produce failed"; }
T_PRODUCED=$(since "$t0" 3)
say "  $JOBS records on the topic after $T_PRODUCED s"
wait_delivered "$JOBS" "$t0" pipeline
CPU_PIPE=$(cpu_report cores "$c0" "$(cpu_snapshot)" "$T_DEL")
PIPE_PUB_S=$T_PUB PIPE_DEL_S=$T_DEL
sink_phase_log "$from" "$TMP/sink-pipe.log"
SINK_PIPE=$("$BENCH" sinklog --log "$TMP/sink-pipe.log")
(( $(result_field "$SINK_PIPE" accepted) == JOBS )) || die "pipeline: the sink accepted $(result_field "$SINK_PIPE" accepted), not $JOBS"
PIPE_PUB_RATE=$(awk -v n="$JOBS" -v s="$PIPE_PUB_S" 'BEGIN { printf "%.0f", n / s }')
PIPE_DEL_RATE=$(awk -v n="$JOBS" -v s="$PIPE_DEL_S" 'BEGIN { printf "%.0f", n / s }')
say "pipeline: $JOBS published in $PIPE_PUB_S s ($PIPE_PUB_RATE jobs/s), delivered in $PIPE_DEL_S s ($PIPE_DEL_RATE jobs/s) from the first record; at the sink $(result_field "$SINK_PIPE" per_s) jobs/s first to last"
say "cpu: $CPU_PIPE"
check_counts pipeline

echo "==== 2b. pre-queued: service stopped, $JOBS jobs into its work queue, service started; loadavg $(load1)"
"$STACK" stop notification >/dev/null
curl -s -XPOST "http://$SINK/control?reset=1" >/dev/null
from=$(wc -l <"$SINK_LOG")
NOTIFY_RABBITMQ_PORT=$SHOPMICRO_RABBITMQ_PORT "$BENCH" enqueue --jobs "$JOBS" | tee "$TMP/enqueue.log" ||
  die "bench_notify enqueue failed"
c0=$(cpu_snapshot) t0=$EPOCHREALTIME
"$STACK" start notification >/dev/null || die "notification did not start again"
wait_delivered "$JOBS" "$t0" pre-queued
CPU_PREQ=$(cpu_report cores "$c0" "$(cpu_snapshot)" "$T_DEL")
PREQ_DEL_S=$T_DEL
sink_phase_log "$from" "$TMP/sink-preq.log"
SINK_PREQ=$("$BENCH" sinklog --log "$TMP/sink-preq.log")
(( $(result_field "$SINK_PREQ" accepted) == JOBS )) || die "pre-queued: the sink accepted $(result_field "$SINK_PREQ" accepted), not $JOBS"
PREQ_RATE=$(result_field "$SINK_PREQ" per_s)
say "pre-queued: $JOBS delivered $PREQ_DEL_S s after the start command; at the sink ${PREQ_RATE} jobs/s from the first to the last ($(result_field "$SINK_PREQ" span_s) s)"
say "cpu (the service's start included): $CPU_PREQ"
check_counts pre-queued

if (( E2E )); then
  echo "==== 3. end to end: catalog, order, relay, relay-catalog, gateway; CreateOrder at $RATE/s for $SECONDS_RUN s"
  bench_auth --stack
  "$STACK" start catalog order relay relay-catalog gateway >/dev/null || die "the services did not start"
  PRODUCT=$(sql catalog "INSERT INTO products (name, price_cents, stock) VALUES ('Bench lamp', 1299, 100000000) RETURNING id")
  [[ -n $PRODUCT ]] || die "cannot create the product"
  curl -s -XPOST "http://$SINK/control?reset=1" >/dev/null
  GW=http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT
  # One warm-up order, until its webhook arrived: every consumer group has joined.
  t0=$EPOCHREALTIME
  for (( i = 0; ; i++ )); do
    curl -s --max-time 5 "${AUTH_HDR[@]}" -XPOST "$GW/v1/orders" \
      -d "{\"customer_id\":\"$BENCH_SUB\",\"items\":[{\"product_id\":\"$PRODUCT\",\"quantity\":1}]}" | grep -q '"id"' && break
    (( i < 50 )) || die "CreateOrder through the gateway fails"
    sleep 0.2
  done
  while [[ $(curl -s "http://$SINK/metrics" | awk '$1 == "shopmicro_notify_sink_recorded" { print $2 }') != 1 ]]; do
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 60) }' && die "the warm-up order's webhook did not arrive in 60 s"
    sleep 0.1
  done
  say "warm-up order's webhook arrived $(since "$t0" 3) s after it was placed; loadavg $(load1)"
  from=$(wc -l <"$SINK_LOG")
  c0=$(cpu_snapshot) t0=$EPOCHREALTIME
  "$BENCH" orders --url "$GW" --product "$PRODUCT" --rate "$RATE" --seconds "$SECONDS_RUN" \
    --out "$TMP/orders.txt" --header "Authorization: Bearer $TOKEN" --customer "$BENCH_SUB" |
    tee "$TMP/orders.log" || die "bench_notify orders failed"
  ORDERS=$(grep '^RESULT ' "$TMP/orders.log")
  OK=$(result_field "$ORDERS" ok)
  # Every confirmed order's webhook (plus the warm-up's), at most 60 s.
  while :; do
    got=$(curl -s "http://$SINK/metrics" | awk '$1 == "shopmicro_notify_sink_recorded" { print $2 }')
    (( ${got:-0} >= OK + 1 )) && break
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 60 + '"$SECONDS_RUN"') }' && {
      say "warning: $(( ${got:-0} - 1 )) of $OK webhooks after 60 s"; break; }
    sleep 0.2
  done
  CPU_E2E=$(cpu_report cores "$c0" "$(cpu_snapshot)" "$(since "$t0" 3)")
  sql orders "SELECT aggregate_id, id,
                     round(extract(epoch FROM created_at) * 1000, 3)
              FROM outbox WHERE event_type = 'OrderConfirmed'" | tr '|' ' ' >"$TMP/outbox.txt"
  sink_phase_log "$from" "$TMP/sink-e2e.log"
  "$BENCH" e2e --orders "$TMP/orders.txt" --outbox "$TMP/outbox.txt" --log "$TMP/sink-e2e.log" |
    tee "$TMP/e2e.log" || die "bench_notify e2e: not every order's webhook was found"
  E2E_R=$(grep '^RESULT ' "$TMP/e2e.log")
  say "cpu: $CPU_E2E"
fi

# ---- summary
r() { result_field "$BARE" "$1"; }
echo "==== summary ($JOBS jobs per step; nproc $(nproc); loadavg after the run $(loadavg); $(since "$T_RUN" 3) s in all)"
printf '%-58s %10s %10s %7s\n' "" "service" "bare" "ratio"
printf '%-58s %10s %10s %7s\n' "publish (service: Kafka record -> confirmed job)" "$PIPE_PUB_RATE" "$(r bare_publish_per_s)" "$(ratio "$PIPE_PUB_RATE" "$(r bare_publish_per_s)")"
printf '%-58s %10s %10s %7s\n' "deliver pre-queued jobs (service: webhook + ack)" "$PREQ_RATE" "$(r bare_consume_per_s)" "$(ratio "$PREQ_RATE" "$(r bare_consume_per_s)")"
printf '%-58s %10s %10s %7s\n' "pipeline (service: record -> webhook; bare: pub+consume)" "$PIPE_DEL_RATE" "$(r bare_combined_per_s)" "$(ratio "$PIPE_DEL_RATE" "$(r bare_combined_per_s)")"
printf '  (jobs/s; body %s bytes; %s workers, prefetch %s%s; bare publish into its own queue, enqueue into the service'"'"'s: %s jobs/s)\n' \
  "$(r body_bytes)" "$WORKERS" "$PREFETCH" "${SERVICE_ENV[*]:+; ${SERVICE_ENV[*]}}" "$(result_field "$(grep '^RESULT ' "$TMP/enqueue.log")" enqueue_per_s)"
printf 'cpu, bare step (bench_notify itself not listed): %s\n' "$CPU_BARE"
printf 'cpu, pipeline:   %s\n' "$CPU_PIPE"
printf 'cpu, pre-queued: %s\n' "$CPU_PREQ"
if (( E2E )); then
  printf 'CreateOrder 200 -> webhook at the sink: p50 %s ms  p90 %s ms  p99 %s ms  max %s ms  (%s orders at %s/s for %s s; %s failed calls; CreateOrder call p50 %s ms p99 %s ms)\n' \
    "$(result_field "$E2E_R" e2e_p50_ms)" "$(result_field "$E2E_R" e2e_p90_ms)" "$(result_field "$E2E_R" e2e_p99_ms)" \
    "$(result_field "$E2E_R" e2e_max_ms)" "$(result_field "$E2E_R" e2e_n)" "$RATE" "$SECONDS_RUN" \
    "$(result_field "$ORDERS" failed)" "$(result_field "$ORDERS" call_p50_ms)" "$(result_field "$ORDERS" call_p99_ms)"
  sed -n '/stages/,$p' "$TMP/e2e.log"
  printf 'cpu, end to end: %s\n' "$CPU_E2E"
fi
