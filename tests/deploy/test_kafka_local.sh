#!/usr/bin/env bash
# tests/deploy/test_kafka_local.sh: deploy/local/kafka.sh with a real broker (ctest kafka_local).
#
# In a temporary run folder and on two free ports (never 19092/19093, which a stack that is up may
# use), it checks that:
#   - `start` brings the broker up: topic shopmicro.orders.v1 exists with 3 partitions;
#   - 1,000 keyed messages produced with kcat are consumed back exactly (same set, all 3 partitions);
#   - a second `start` is harmless (same pid); status says running/paused/stopped with the pid;
#   - after `kill` (SIGKILL), and with a stale pid file naming a live process that is not the
#     broker, `start` starts a new broker (timed) and leaves that process alone; the 1,000 messages
#     are still there;
#   - `stop` ends the broker: no process of this run folder is left, checked by pid and in /proc.
# Jars: SHOPMICRO_KAFKA_LIB_CACHE (ctest sets <build dir>/kafka-lib) is kept between runs, so only
# the first run fetches them with Maven; unset, they go in the temporary folder and are fetched
# each time. Everything else is removed at exit, also after a failure; a broker still running then
# is killed. Exit status: 0 pass, 1 fail.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
KAFKA_SH="$ROOT/deploy/local/kafka.sh"
STACK="$ROOT/deploy/local/stack.sh"
TOPIC=shopmicro.orders.v1
PARTITIONS=3
N=1000

CHECKS=0
pass() { CHECKS=$((CHECKS + 1)); printf 'ok:   %s\n' "$*"; }
# The first failure ends the test: the later steps depend on the earlier ones.
fail() { printf 'FAIL: %s\n' "$*"; [[ ! -s $WORK/out ]] || sed 's/^/    | /' "$WORK/out"; exit 1; }

for tool in java mvn kcat python3; do
  command -v "$tool" >/dev/null 2>&1 ||
    { echo "FAIL: '$tool' is not installed: run 'deploy/local/stack.sh deps'"; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/shopmicro-kafka-test.XXXXXX")
BROKER_PIDS=()
# The pids of processes whose command line names this test's folder: its brokers, and any JVM
# (format, TopicCommand) still running.
ours() {
  local f
  for f in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' <"$f" 2>/dev/null | grep -qF "$WORK/"; then f=${f#/proc/}; echo "${f%/cmdline}"; fi
  done
}
cleanup() {
  local pid
  for pid in $(ours); do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf -- "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export SHOPMICRO_RUN_DIR="$WORK/run"
export SHOPMICRO_KAFKA_LIB_CACHE="${SHOPMICRO_KAFKA_LIB_CACHE:-$WORK/lib}"
# shellcheck source=SCRIPTDIR/../../deploy/local/stack.sh
mapfile -t PORTS < <(source "$STACK"; free_ports 2 9092 9093 19092 19093)
(( ${#PORTS[@]} == 2 )) || fail "cannot find 2 free ports on 127.0.0.1"
export SHOPMICRO_KAFKA_PORT=${PORTS[0]} SHOPMICRO_KAFKA_CONTROLLER_PORT=${PORTS[1]}
B=127.0.0.1:$SHOPMICRO_KAFKA_PORT
echo "== run folder $SHOPMICRO_RUN_DIR, ports $SHOPMICRO_KAFKA_PORT/$SHOPMICRO_KAFKA_CONTROLLER_PORT, jars $SHOPMICRO_KAFKA_LIB_CACHE"

# kafka VERB: run kafka.sh VERB with its output in $WORK/out: printed on success, by fail otherwise.
kafka() { local rc=0; "$KAFKA_SH" "$@" >"$WORK/out" 2>&1 || rc=$?; (( rc != 0 )) || cat "$WORK/out"; return "$rc"; }
# timed VAR VERB: kafka VERB, and VAR = its wall time in seconds.
timed() { local t0=$EPOCHREALTIME; kafka "$2" || fail "kafka.sh $2"; printf -v "$1" '%s' "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"; }
pidfile() { local p=""; read -r p <"$SHOPMICRO_RUN_DIR/kafka.pid" 2>/dev/null || true; echo "$p"; }
alive() { [[ -d /proc/$1 ]] && [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) != Z ]]; }
expect_status() {
  local line
  line=$("$KAFKA_SH" status)
  [[ $line =~ ^kafka\ +$1\ +pid\ +$2\  ]] || fail "status says '$line', expected $1 with pid $2"
  pass "status: $1, pid $2"
}
# The topic's key:value pairs, sorted; and the set of partitions they are in.
consume() { kcat -C -b "$B" -t "$TOPIC" -o beginning -e -q -f '%k:%s\n' | sort; }
expected() { for (( i = 1; i <= N; i++ )); do echo "order-$i:event-$i"; done | sort; }

echo "== start (fresh run folder)"
timed T_FIRST start
P1=$(pidfile)
BROKER_PIDS+=("$P1")
alive "$P1" || fail "no live broker pid in the pid file after start ('$P1')"
pass "start: broker pid $P1 ($T_FIRST s, jar fetch included when the cache was empty)"
kcat -L -b "$B" -t "$TOPIC" >"$WORK/out" 2>&1 || fail "kcat -L $TOPIC"
grep -q "topic \"$TOPIC\" with $PARTITIONS partitions:" "$WORK/out" || fail "$TOPIC does not have $PARTITIONS partitions"
pass "$TOPIC has $PARTITIONS partitions"

echo "== produce $N, consume them back"
expected | kcat -P -b "$B" -t "$TOPIC" -K: -X message.timeout.ms=15000 >"$WORK/out" 2>&1 || fail "kcat -P of $N messages"
consume >"$WORK/got" 2>"$WORK/out" || fail "kcat -C"
[[ $(wc -l <"$WORK/got") -eq $N ]] || fail "consumed $(wc -l <"$WORK/got") messages, expected $N"
expected | cmp -s - "$WORK/got" || fail "the consumed messages are not the $N produced"
pass "consumed exactly the $N messages produced"
parts=$(kcat -C -b "$B" -t "$TOPIC" -o beginning -e -q -f '%p\n' | sort -u | wc -l)
[[ $parts -eq $PARTITIONS ]] || fail "the messages are in $parts partitions, expected $PARTITIONS"
pass "the keyed messages are spread over all $PARTITIONS partitions"

echo "== a second start, status, pause, resume"
kafka start || fail "second start"
grep -q 'already running' "$WORK/out" || fail "the second start did not say 'already running'"
[[ $(pidfile) == "$P1" ]] || fail "the second start changed the pid ($P1 -> $(pidfile))"
pass "a second start leaves the broker alone (pid $P1)"
expect_status running "$P1"
kafka pause || fail "pause"
expect_status paused "$P1"
kafka resume || fail "resume"
expect_status running "$P1"

echo "== kill -9, stale pid file, start again"
kafka kill || fail "kill"
alive "$P1" && fail "pid $P1 is still there after kill"
pass "kill: pid $P1 is gone"
expect_status stopped -
sleep 600 &
DECOY=$!
printf '%s\n%s\n' "$DECOY" "$SHOPMICRO_RUN_DIR/kafka/server.properties" >"$SHOPMICRO_RUN_DIR/kafka.pid"
timed T_RESTART start
P2=$(pidfile)
BROKER_PIDS+=("$P2")
{ [[ $P2 != "$DECOY" ]] && alive "$P2"; } || fail "start took the stale pid file's process $DECOY for the broker"
alive "$DECOY" || fail "start ended the process $DECOY that the stale pid file named"
kill "$DECOY"
pass "start after kill -9 with a stale pid file: new broker pid $P2 ($T_RESTART s)"
consume >"$WORK/got" 2>"$WORK/out" || fail "kcat -C after the restart"
expected | cmp -s - "$WORK/got" || fail "after kill -9 and start, consumed $(wc -l <"$WORK/got") messages, not the $N produced"
pass "after kill -9 and start: still exactly the $N messages"
expect_status running "$P2"

echo "== stop"
timed T_STOP stop
expect_status stopped -
for pid in "${BROKER_PIDS[@]}"; do alive "$pid" && fail "broker pid $pid is still there after stop"; done
pass "no broker pid left (${BROKER_PIDS[*]})"
left=$(ours | tr '\n' ' ')
[[ -z $left ]] || fail "processes of this run folder are left: $left"
pass "no process of this run folder is left"

echo "kafka_local: all $CHECKS checks passed. first start $T_FIRST s, start after kill -9 $T_RESTART s, stop $T_STOP s"
