#!/usr/bin/env bash
# tests/deploy/test_rabbitmq_local.sh: deploy/local/rabbitmq.sh with a real node (ctest rabbitmq_local).
#
# In a temporary run folder and on three free ports (never 5672/25672/4369 nor any default port of
# the stack, which a stack that is up may use), it checks that:
#   - `start` brings the node up: the AMQP port is open, `ctl status` answers, the node's files
#     (data, log, cookie) are in the run folder and every listener is on 127.0.0.1 only;
#   - a durable queue and a persistent message (amqp-tools) are still there after `restart` (the
#     data folder is reused), and after `kill` (SIGKILL) and `start` the node comes back with them
#     (that confirmed messages survive kill -9 is test_mq_broker's: amqp-publish does not wait for
#     a confirm, so a kill right after it may legitimately lose the message);
#   - a second `start` is harmless (same pid); status says running/paused/stopped with the pid;
#   - `stop` ends the node and its private epmd: nothing listens on the three ports, no process
#     names the run folder.
# Everything is removed at exit, also after a failure. Exit status: 0 pass, 1 fail.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
RMQ_SH="$ROOT/deploy/local/rabbitmq.sh"
STACK="$ROOT/deploy/local/stack.sh"

CHECKS=0
pass() { CHECKS=$((CHECKS + 1)); printf 'ok:   %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; [[ ! -s $WORK/out ]] || sed 's/^/    | /' "$WORK/out"; exit 1; }

for tool in /usr/lib/rabbitmq/bin/rabbitmq-server amqp-declare-queue amqp-publish amqp-get ss; do
  command -v "$tool" >/dev/null 2>&1 ||
    { echo "FAIL: '$tool' is not installed: run 'deploy/local/stack.sh deps'"; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/shopmicro-rabbitmq-test.XXXXXX")
ours() {
  local f
  for f in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' 2>/dev/null <"$f" | grep -qF "$WORK/"; then f=${f#/proc/}; echo "${f%/cmdline}"; fi
  done
}
cleanup() {
  local pid
  "$RMQ_SH" stop >/dev/null 2>&1 || true
  for pid in $(ours); do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf -- "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export SHOPMICRO_RUN_DIR="$WORK/run"
# shellcheck source=SCRIPTDIR/../../deploy/local/stack.sh
mapfile -t PORTS < <(source "$STACK"; free_ports 3 5672 25672 4369 "${PORT_DEFAULTS[@]}")
(( ${#PORTS[@]} == 3 )) || fail "cannot find 3 free ports on 127.0.0.1"
export SHOPMICRO_RABBITMQ_PORT=${PORTS[0]} SHOPMICRO_RABBITMQ_DIST_PORT=${PORTS[1]} SHOPMICRO_RABBITMQ_EPMD_PORT=${PORTS[2]}
URL=amqp://guest:guest@127.0.0.1:$SHOPMICRO_RABBITMQ_PORT
echo "== run folder $SHOPMICRO_RUN_DIR, ports ${PORTS[*]}"

rmq() { local rc=0; "$RMQ_SH" "$@" >"$WORK/out" 2>&1 || rc=$?; (( rc != 0 )) || cat "$WORK/out"; return "$rc"; }
timed() { local t0=$EPOCHREALTIME; rmq "$2" || fail "rabbitmq.sh $2"; printf -v "$1" '%s' "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"; }
pidfile() { local p=""; read -r p <"$SHOPMICRO_RUN_DIR/rabbitmq.pid" 2>/dev/null || true; echo "$p"; }
alive() { [[ -n $1 && -e /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
expect_status() {
  local line
  line=$("$RMQ_SH" status)
  [[ $line =~ ^rabbitmq\ +$1\ +pid\ +$2\  ]] || fail "status says '$line', expected $1 with pid $2"
  pass "status: $1, pid $2"
}

echo "== start"
timed T_FIRST start
P1=$(pidfile)
alive "$P1" || fail "no live pid in rabbitmq.pid after start"
rmq ctl -q list_queues name || fail "ctl list_queues"
pass "start: node answers (pid $P1, $T_FIRST s)"
for f in rabbitmq/env.sh rabbitmq/home/.erlang.cookie rabbitmq/mnesia logs/rabbitmq.log; do
  [[ -e $SHOPMICRO_RUN_DIR/$f ]] || fail "$f is not in the run folder"
done
pass "env, cookie, data and log are in the run folder"
for p in "${PORTS[@]}"; do
  listening "$p" || fail "nothing listens on port $p"
  ss -Hltn "sport = :$p" | awk '{ print $4 }' | grep -qvE '^(127\.0\.0\.1|\[::1\]):' &&
    fail "port $p listens beyond loopback: $(ss -Hltn "sport = :$p" | awk '{ print $4 }' | tr '\n' ' ')"
done
pass "AMQP, distribution and epmd listen on loopback only"

echo "== data kept across restart, and kill -9"
amqp-declare-queue --url="$URL" -d -q it-durable >/dev/null || fail "amqp-declare-queue"
amqp-publish --url="$URL" -r it-durable -p -b survivor || fail "amqp-publish"
amqp-publish --url="$URL" -r it-durable -p -b second || fail "amqp-publish"
rmq restart || fail "restart"
[[ $(amqp-get --url="$URL" -q it-durable) == survivor ]] || fail "the persistent message is gone after restart"
pass "after restart (pid $(pidfile)): the persistent message is still there"
P1=$(pidfile)
rmq kill || fail "kill"
alive "$P1" && fail "pid $P1 is still there after kill"
expect_status stopped -
timed T_RESTART start
P2=$(pidfile)
# At least "second" (written at the clean stop); "survivor" may be back too: its ack by amqp-get
# need not have reached the disk before the kill (at least once, never less).
rmq ctl -q list_queues name messages || fail "ctl list_queues after kill -9"
n=$(awk '$1 == "it-durable" { print $2 }' "$WORK/out")
[[ $n =~ ^[0-9]+$ ]] && (( n >= 1 )) || fail "after kill -9 and start, it-durable holds '${n:-no queue}' messages, expected at least 1"
pass "after kill -9 and start (pid $P2, $T_RESTART s): the durable queue is there with $n message(s)"

echo "== a second start, status, pause, resume"
rmq start || fail "second start"
grep -q 'already running' "$WORK/out" || fail "the second start did not say 'already running'"
[[ $(pidfile) == "$P2" ]] || fail "the second start changed the pid"
pass "a second start leaves the node alone (pid $P2)"
expect_status running "$P2"
rmq pause || fail "pause"
expect_status paused "$P2"
rmq resume || fail "resume"
expect_status running "$P2"

echo "== stop"
timed T_STOP stop
expect_status stopped -
alive "$P2" && fail "pid $P2 is still there after stop"
for p in "${PORTS[@]}"; do listening "$p" && fail "port $p still listens after stop (epmd?)"; done
pass "stop: node and its epmd gone, no port listens"
left=$(ours | tr '\n' ' ')
[[ -z $left ]] || fail "processes of this run folder are left: $left"
pass "no process of this run folder is left"

echo "rabbitmq_local: all $CHECKS checks passed. first start $T_FIRST s, start after kill -9 $T_RESTART s, stop $T_STOP s"
