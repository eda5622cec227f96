#!/usr/bin/env bash
# deploy/local/rabbitmq.sh: how the local stack runs RabbitMQ. A private node of this run folder,
# from Debian's rabbitmq-server package (3.10 on Erlang/OTP 25): its own node name, AMQP,
# distribution and epmd ports on 127.0.0.1, its data, logs and Erlang cookie under the run folder.
# It never uses the system ports (5672, 25672, 4369) nor /var/lib/rabbitmq, so a RabbitMQ that the
# package's postinst started on the host (systemd machines) cannot clash with it, and nothing of
# ours talks to that one.
#
# A library with the verbs every component of the stack has; stack.sh sources it (its COMPONENTS
# line "rabbitmq"), so `stack.sh start|stop|restart|kill|pause|resume|logs rabbitmq` and `status`
# reach rabbitmq_start rabbitmq_stop rabbitmq_restart rabbitmq_kill rabbitmq_pause rabbitmq_resume
# rabbitmq_status_line rabbitmq_logs. It also runs on its own (pkg/mq's integration tests start
# their node this way), where `ctl` runs rabbitmqctl against the node:
#   deploy/local/rabbitmq.sh start|stop|restart|kill|pause|resume|status|logs|ctl <args>
# Run that way, it sources stack.sh (which defines everything and runs nothing when sourced) for the
# run folder and the shared helpers (say note die rel is_port port_open port_owner alive is_paused
# wait_gone SERVICE_STOP_TIMEOUT).
#
# Files, in the run folder ($SHOPMICRO_RUN_DIR, default <repo>/.run):
#   rabbitmq/env.sh        the node's environment, written at every start: `source` it, then run
#                          rabbitmqctl / rabbitmq-diagnostics from /usr/lib/rabbitmq/bin
#   rabbitmq/rabbitmq.conf, enabled_plugins, rabbitmq-env.conf   written at every start
#   rabbitmq/home/         $HOME of the node and of the CLI tools: the Erlang cookie
#   rabbitmq/mnesia/       the node's data (queues, persistent messages): kept across starts
#   rabbitmq/server.out    the launcher's stdout/stderr (boot failures land here)
#   rabbitmq/beam.pid      written by the node itself: the pid of beam.smp
#   rabbitmq.pid           that pid, the node's -home (line 2, to recognise it) and the seconds
#                          its start took (line 3, for `status`)
#   rabbitmq.lock          flock: one start/stop/kill at a time
#   logs/rabbitmq.log      the node's log (appended across starts)
# Variables: SHOPMICRO_RABBITMQ_PORT (25772, AMQP), SHOPMICRO_RABBITMQ_DIST_PORT (25773, Erlang
# distribution: the CLI tools reach the node there), SHOPMICRO_RABBITMQ_EPMD_PORT (24369), all on
# 127.0.0.1 and below the ephemeral range (defaults in RABBITMQ_PORT_SPECS, which stack.sh gives to
# set_port_vars: `test` picks free ones for them); SHOPMICRO_RABBITMQ_START_TIMEOUT (60 s).
# docs/notifications.md describes the node and what runs on it.
set -euo pipefail

RABBITMQ_BIN=/usr/lib/rabbitmq/bin
RABBITMQ_PORT_SPECS=("SHOPMICRO_RABBITMQ_PORT=25772" "SHOPMICRO_RABBITMQ_DIST_PORT=25773"
                     "SHOPMICRO_RABBITMQ_EPMD_PORT=24369")

# rabbitmq_paths: every RABBITMQ_* path and port from RUN and the variables as they are now. Each
# verb calls it first: stack.sh's `test` moves RUN after this file is sourced.
rabbitmq_paths() {
  RABBITMQ_DIR=$RUN/rabbitmq
  RABBITMQ_ENV=$RABBITMQ_DIR/env.sh
  RABBITMQ_LOG=$LOGS/rabbitmq.log
  RABBITMQ_OUT=$RABBITMQ_DIR/server.out
  RABBITMQ_BEAM_PID=$RABBITMQ_DIR/beam.pid
  RABBITMQ_PID_FILE=$RUN/rabbitmq.pid
  RABBITMQ_AMQP_PORT=$SHOPMICRO_RABBITMQ_PORT        # all three set by stack.sh's set_port_vars
  RABBITMQ_DIST=$SHOPMICRO_RABBITMQ_DIST_PORT
  RABBITMQ_EPMD=$SHOPMICRO_RABBITMQ_EPMD_PORT
  RABBITMQ_START_TIMEOUT=${SHOPMICRO_RABBITMQ_START_TIMEOUT:-60}
  local v
  for v in SHOPMICRO_RABBITMQ_PORT SHOPMICRO_RABBITMQ_DIST_PORT SHOPMICRO_RABBITMQ_EPMD_PORT; do
    is_port "${!v}" || die "$v='${!v}' is not a port number"
  done
  [[ $(printf '%s\n' "$RABBITMQ_AMQP_PORT" "$RABBITMQ_DIST" "$RABBITMQ_EPMD" | sort -u | wc -l) == 3 ]] ||
    die "SHOPMICRO_RABBITMQ_PORT, _DIST_PORT and _EPMD_PORT must differ ($RABBITMQ_AMQP_PORT $RABBITMQ_DIST $RABBITMQ_EPMD)"
  [[ $RABBITMQ_START_TIMEOUT =~ ^[0-9]+$ ]] ||
    die "SHOPMICRO_RABBITMQ_START_TIMEOUT='$RABBITMQ_START_TIMEOUT' is not a number of seconds"
  RABBITMQ_URL=amqp://guest:guest@127.0.0.1:$RABBITMQ_AMQP_PORT/
}

# fd 7 (8 is kafka.sh's lock, 9 postgres.sh's). Closed in the node, which must never hold it.
rabbitmq_lock() {
  mkdir -p "$RUN"
  exec 7>>"$RUN/rabbitmq.lock"
  flock -w 120 7 || die "rabbitmq: timed out waiting for $(rel "$RUN/rabbitmq.lock")"
}
rabbitmq_unlock() { exec 7>&-; }

rabbitmq_log_tail() {
  local f
  for f in "$RABBITMQ_OUT" "$RABBITMQ_LOG"; do
    [[ -s $f ]] || continue
    printf 'stack: last lines of %s:\n' "$(rel "$f")" >&2
    tail -n 15 "$f" | sed 's/^/    /' >&2
  done
}

# ---------------------------------------------------------------------------
# The node's environment and configuration

# Debian's /usr/sbin/rabbitmq* wrappers cd to /var/lib/rabbitmq and `su rabbitmq`, which drops
# this environment: everything here runs /usr/lib/rabbitmq/bin/* directly, as the calling user.
# RABBITMQ_CONF_ENV_FILE points at an empty file of ours, and the other config paths at our folder
# (conf.d empty, no advanced.config), so that nothing in /etc/rabbitmq (the host's node) can change
# ours. The dist listener would bind 0.0.0.0 without
# inet_dist_use_interface.
rabbitmq_write_config() {
  mkdir -p "$RABBITMQ_DIR/home" "$RABBITMQ_DIR/mnesia" "$RABBITMQ_DIR/conf.d" "$LOGS"
  cat >"$RABBITMQ_ENV" <<EOF
# Written by deploy/local/rabbitmq.sh at every start; change the script, not this file.
# source it, then e.g.: rabbitmqctl list_queues name durable messages arguments
export HOME='$RABBITMQ_DIR/home'
export RABBITMQ_NODENAME=shopmicro@localhost
export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$RABBITMQ_AMQP_PORT RABBITMQ_DIST_PORT=$RABBITMQ_DIST
export ERL_EPMD_PORT=$RABBITMQ_EPMD ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_MNESIA_BASE='$RABBITMQ_DIR/mnesia' RABBITMQ_LOG_BASE='$LOGS'
export RABBITMQ_CONFIG_FILE='$RABBITMQ_DIR/rabbitmq.conf' RABBITMQ_CONFIG_FILES='$RABBITMQ_DIR/conf.d'
export RABBITMQ_ADVANCED_CONFIG_FILE='$RABBITMQ_DIR/advanced.config'
export RABBITMQ_ENABLED_PLUGINS_FILE='$RABBITMQ_DIR/enabled_plugins'
export RABBITMQ_CONF_ENV_FILE='$RABBITMQ_DIR/rabbitmq-env.conf'
export RABBITMQ_PID_FILE='$RABBITMQ_BEAM_PID'
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'
export PATH='$RABBITMQ_BIN':"\$PATH"
EOF
  # guest may log in from loopback only (RabbitMQ's default, stated). The disk alarm at 100 MB
  # instead of the default 50 MB leaves room to see it coming on a small test disk.
  cat >"$RABBITMQ_DIR/rabbitmq.conf" <<'EOF'
# Written by deploy/local/rabbitmq.sh at every start; change the script, not this file.
loopback_users.guest = true
log.console = false
log.file = rabbitmq.log
log.file.level = info
disk_free_limit.absolute = 100MB
vm_memory_high_watermark.relative = 0.4
EOF
  echo '[].' >"$RABBITMQ_DIR/enabled_plugins"
  : >"$RABBITMQ_DIR/rabbitmq-env.conf"
}

# rabbitmq_cli TOOL ARG...: one CLI tool with the node's environment, bounded (a CLI waiting on a
# paused node would otherwise wait for its own long default).
rabbitmq_cli() {
  local tool=$1
  shift
  (
    # shellcheck source=/dev/null
    source "$RABBITMQ_ENV"
    exec timeout 30 "$RABBITMQ_BIN/$tool" "$@"
  ) 7>&-
}

# ---------------------------------------------------------------------------
# Which process is the node

# True when pid $1 is this run folder's beam.smp: its -home argument is our folder.
rabbitmq_is_ours() {
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *beam.smp*" -home $RABBITMQ_DIR/home "* ]]
}

# rabbitmq_find_pid: RABBITMQ_PID = the running node's beam.smp, empty when none; a stale pid file
# is removed.
rabbitmq_find_pid() {
  local pid=""
  RABBITMQ_PID=""
  [[ -f $RABBITMQ_PID_FILE ]] || return 0
  read -r pid <"$RABBITMQ_PID_FILE" || true
  if [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && rabbitmq_is_ours "$pid"; then
    RABBITMQ_PID=$pid
    return 0
  fi
  note "rabbitmq: removing stale $(rel "$RABBITMQ_PID_FILE"): pid ${pid:-?} is not this run folder's node"
  rm -f "$RABBITMQ_PID_FILE"
}

# The AMQP port the running node was started with (from the env file it got).
rabbitmq_running_port() { sed -n 's/.* RABBITMQ_NODE_PORT=\([0-9]*\) .*/\1/p' "$RABBITMQ_ENV" 2>/dev/null; }

# epmd is started by the node as a daemon (parent pid 1) and outlives it; it is ours when it
# listens on our epmd port. Killed by `epmd -kill`, which ends it whatever is registered.
rabbitmq_kill_epmd() {
  port_open "$RABBITMQ_EPMD" || return 0
  ERL_EPMD_ADDRESS=127.0.0.1 timeout 10 epmd -port "$RABBITMQ_EPMD" -kill >/dev/null 2>&1 ||
    note "rabbitmq: epmd -port $RABBITMQ_EPMD -kill failed: $(port_owner "$RABBITMQ_EPMD")"
}

# ---------------------------------------------------------------------------
# Start-up

rabbitmq_check_tools() {
  [[ -x $RABBITMQ_BIN/rabbitmq-server ]] && command -v epmd >/dev/null 2>&1 ||
    die "rabbitmq: $RABBITMQ_BIN/rabbitmq-server not found: run 'deploy/local/stack.sh deps' (package rabbitmq-server)"
}

# Refuse ports that something else holds. The epmd port may be held by our own epmd, left from a
# node that was killed: it takes the new node's registration as well.
rabbitmq_check_ports() {
  local p
  for p in "$RABBITMQ_AMQP_PORT" "$RABBITMQ_DIST" "$RABBITMQ_EPMD"; do
    port_open "$p" || continue
    if [[ $p == "$RABBITMQ_EPMD" ]] && [[ $(port_owner "$p") == *'"epmd"'* ]]; then continue; fi
    die "rabbitmq: port $p on 127.0.0.1 is in use by another process:
$(port_owner "$p")
  stop it, or choose free ports: SHOPMICRO_RABBITMQ_PORT / _DIST_PORT / _EPMD_PORT"
  done
}

# The launcher is the package's rabbitmq-server script: it stays as the parent of beam.smp and
# turns a SIGTERM into a clean stop. setsid: a Ctrl-C in the starting terminal does not reach it.
rabbitmq_launch() {
  : >"$RABBITMQ_OUT"
  rm -f "$RABBITMQ_BEAM_PID"
  (
    # shellcheck source=/dev/null
    source "$RABBITMQ_ENV"
    cd "$RABBITMQ_DIR" && exec setsid nohup "$RABBITMQ_BIN/rabbitmq-server" >>"$RABBITMQ_OUT" 2>&1 </dev/null
  ) 7>&- 8>&- 9>&- &
  RABBITMQ_LAUNCHER=$!
  disown "$RABBITMQ_LAUNCHER"
}

# Ready = the AMQP port is open and the node answers a ping over distribution. `await_startup`
# would exit at once while the node is not registered yet, so the port is polled first.
# RABBITMQ_WAIT: "ready", "exited" (the launcher is gone) or "timeout".
rabbitmq_wait_ready() {
  local deadline=$((SECONDS + RABBITMQ_START_TIMEOUT))
  RABBITMQ_WAIT=timeout
  while (( SECONDS < deadline )); do
    if port_open "$RABBITMQ_AMQP_PORT" && rabbitmq_cli rabbitmq-diagnostics -q ping >/dev/null 2>&1; then
      RABBITMQ_WAIT=ready
      return 0
    fi
    if ! alive "$RABBITMQ_LAUNCHER"; then RABBITMQ_WAIT=exited; return 1; fi
    sleep 0.2
  done
  return 1
}

# The pid the node wrote itself (beam.smp), recorded with what recognises it.
rabbitmq_record_pid() {
  local pid=""
  read -r pid <"$RABBITMQ_BEAM_PID" 2>/dev/null || true
  [[ $pid =~ ^[0-9]+$ ]] && rabbitmq_is_ours "$pid" || { rabbitmq_log_tail; die "rabbitmq: no beam.smp pid in $(rel "$RABBITMQ_BEAM_PID")"; }
  RABBITMQ_PID=$pid
  printf '%s\n%s\n%s\n' "$pid" "$RABBITMQ_DIR/home" "$1" >"$RABBITMQ_PID_FILE"
}

# One launch and its wait; on a timeout the node is killed. False when it did not come up.
rabbitmq_try_start() {
  rabbitmq_launch
  rabbitmq_wait_ready && return 0
  if [[ $RABBITMQ_WAIT == timeout ]]; then
    kill -KILL "$RABBITMQ_LAUNCHER" 2>/dev/null || true
    local pid=""
    read -r pid <"$RABBITMQ_BEAM_PID" 2>/dev/null || true
    if [[ $pid =~ ^[0-9]+$ ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  return 1
}

rabbitmq_start_running() {
  local port
  port=$(rabbitmq_running_port)
  [[ $port == "$RABBITMQ_AMQP_PORT" ]] ||
    die "rabbitmq: this run folder's node already runs on port ${port:-?} (pid $RABBITMQ_PID), not $RABBITMQ_AMQP_PORT: use SHOPMICRO_RABBITMQ_PORT=$port, or stop it first"
  if is_paused "$RABBITMQ_PID"; then
    say "rabbitmq: already running (pid $RABBITMQ_PID, 127.0.0.1:$RABBITMQ_AMQP_PORT) but PAUSED; left alone: 'resume' continues it"
    return 0
  fi
  rabbitmq_cli rabbitmq-diagnostics -q ping >/dev/null 2>&1 ||
    die "rabbitmq: the running node (pid $RABBITMQ_PID) does not answer a ping"
  say "rabbitmq: already running (pid $RABBITMQ_PID, 127.0.0.1:$RABBITMQ_AMQP_PORT); left alone"
}

rabbitmq_start_locked() {
  local t0=$EPOCHREALTIME try
  rabbitmq_find_pid
  if [[ -n $RABBITMQ_PID ]]; then rabbitmq_start_running; return 0; fi
  rabbitmq_check_tools
  rabbitmq_check_ports
  rabbitmq_write_config
  say "rabbitmq: starting node shopmicro@localhost on 127.0.0.1:$RABBITMQ_AMQP_PORT (dist :$RABBITMQ_DIST, epmd :$RABBITMQ_EPMD, log $(rel "$RABBITMQ_LOG"))"
  # Seen once in the measured notes: BOOT FAILED with eaddrinuse on a port nothing held, and an
  # identical start later worked. One retry, only for that.
  for try in 1 2; do
    rabbitmq_try_start && break
    if (( try == 1 )) && [[ $RABBITMQ_WAIT == exited ]] && grep -q 'BOOT FAILED' "$RABBITMQ_OUT" 2>/dev/null; then
      note "rabbitmq: BOOT FAILED; retrying once in 2 s"
      sleep 2
      continue
    fi
    rabbitmq_log_tail
    rabbitmq_kill_epmd
    die "rabbitmq: the node did not answer within $RABBITMQ_START_TIMEOUT s ($RABBITMQ_WAIT)"
  done
  t0=$(elapsed "$t0")
  rabbitmq_record_pid "$t0"
  say "rabbitmq: running (pid $RABBITMQ_PID, $RABBITMQ_URL): answered a ping $t0 s after the start command, RSS $(rss_mb "$RABBITMQ_PID") MB"
}

rabbitmq_wait_closed() { wait_ports_closed rabbitmq "$1" "$RABBITMQ_AMQP_PORT" "$RABBITMQ_DIST"; }

# ---------------------------------------------------------------------------
# The verbs

rabbitmq_start() { rabbitmq_paths; rabbitmq_lock; rabbitmq_start_locked; rabbitmq_unlock; }

# `rabbitmqctl stop <pidfile>` is a clean stop that returns once the VM has exited (~2.5 s); a
# paused node is continued first, and one that is still there after SERVICE_STOP_TIMEOUT s gets
# SIGKILL. Then the private epmd, which would outlive the node.
rabbitmq_stop_locked() {
  local t0=$EPOCHREALTIME
  rabbitmq_find_pid
  if [[ -z $RABBITMQ_PID ]]; then
    rabbitmq_kill_epmd
    say "rabbitmq: not running"
    return 0
  fi
  say "rabbitmq: stopping (pid $RABBITMQ_PID: rabbitmqctl stop, SIGKILL after ${SERVICE_STOP_TIMEOUT} s)"
  kill -CONT "$RABBITMQ_PID" 2>/dev/null || true
  rabbitmq_cli rabbitmqctl -q stop "$RABBITMQ_BEAM_PID" >/dev/null 2>&1 || true
  if ! wait_gone "$RABBITMQ_PID" $((SERVICE_STOP_TIMEOUT * 10)); then
    note "rabbitmq: pid $RABBITMQ_PID still there after ${SERVICE_STOP_TIMEOUT} s; sending SIGKILL"
    kill -KILL "$RABBITMQ_PID" 2>/dev/null || true
    wait_gone "$RABBITMQ_PID" 50 || die "rabbitmq: pid $RABBITMQ_PID survived SIGKILL"
  fi
  rabbitmq_wait_closed "$RABBITMQ_PID"
  rabbitmq_kill_epmd
  rm -f "$RABBITMQ_PID_FILE"
  say "rabbitmq: stopped ($(elapsed "$t0") s)"
}
rabbitmq_stop()    { rabbitmq_paths; rabbitmq_lock; rabbitmq_stop_locked; rabbitmq_unlock; }
rabbitmq_restart() { rabbitmq_paths; rabbitmq_lock; rabbitmq_stop_locked; rabbitmq_start_locked; rabbitmq_unlock; }

# A crash: SIGKILL to beam.smp, no clean shutdown. Persistent messages in durable queues survive
# (written to the message store before the publisher's confirm). epmd is left running, as after a
# real crash; the next start reuses it and `stop` ends it.
rabbitmq_kill() {
  rabbitmq_paths
  rabbitmq_lock
  rabbitmq_find_pid
  [[ -n $RABBITMQ_PID ]] || die "rabbitmq: not running: nothing to kill"
  kill -KILL "$RABBITMQ_PID" 2>/dev/null || true
  wait_gone "$RABBITMQ_PID" 50 || die "rabbitmq: pid $RABBITMQ_PID survived SIGKILL"
  rabbitmq_wait_closed "$RABBITMQ_PID"
  rm -f "$RABBITMQ_PID_FILE"
  rabbitmq_unlock
  say "rabbitmq: killed with SIGKILL (pid $RABBITMQ_PID; no clean shutdown)"
}

# A hung broker: the kernel still completes TCP handshakes on the AMQP port, nothing answers, and
# clients wait until their own timeouts (or miss heartbeats).
rabbitmq_pause() {
  rabbitmq_paths
  rabbitmq_find_pid
  pause_pid rabbitmq "$RABBITMQ_PID" "127.0.0.1:$RABBITMQ_AMQP_PORT still accepts TCP connections, but nothing answers"
}
rabbitmq_resume() { rabbitmq_paths; rabbitmq_find_pid; resume_pid rabbitmq "$RABBITMQ_PID"; }

# One line in the shape of stack.sh status.
rabbitmq_status_line() {
  rabbitmq_paths
  rabbitmq_find_pid
  if [[ -z $RABBITMQ_PID ]]; then
    printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s log %s\n' rabbitmq stopped - "$RABBITMQ_AMQP_PORT" "$(rel "$RABBITMQ_LOG")"
    return 0
  fi
  printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s rss %s MB, started in %s s, dist :%s, epmd :%s, log %s\n' rabbitmq \
    "$(is_paused "$RABBITMQ_PID" && echo paused || echo running)" "$RABBITMQ_PID" "$(rabbitmq_running_port)" \
    "$(rss_mb "$RABBITMQ_PID")" "$(pid_file_field "$RABBITMQ_PID_FILE" 3)" "$RABBITMQ_DIST" "$RABBITMQ_EPMD" \
    "$(rel "$RABBITMQ_LOG")"
}

rabbitmq_logs() {
  rabbitmq_paths
  [[ -e $RABBITMQ_LOG ]] || note "$(rel "$RABBITMQ_LOG") does not exist yet; tail -F waits for it"
  printf 'stack: following (Ctrl-C stops): %s\n' "$(rel "$RABBITMQ_LOG")" >&2
  exec tail -n 20 -F "$RABBITMQ_LOG"
}

# ctl ARG...: rabbitmqctl against this run folder's node, e.g. `ctl list_queues name messages`.
rabbitmq_ctl() {
  rabbitmq_paths
  [[ -r $RABBITMQ_ENV ]] || die "rabbitmq: no $(rel "$RABBITMQ_ENV") yet: start the node first"
  rabbitmq_cli rabbitmqctl "$@"
}

# ---------------------------------------------------------------------------
# Run on its own (not when sourced)

rabbitmq_usage() {
  cat <<EOF
usage: deploy/local/rabbitmq.sh start|stop|restart|kill|pause|resume|status|logs|ctl <args>

  start    write the node's config, start it on 127.0.0.1:\$SHOPMICRO_RABBITMQ_PORT (25772) and
           wait until it answers a ping; harmless when it runs already
  stop     rabbitmqctl stop (clean), SIGKILL after \$SHOPMICRO_STOP_TIMEOUT s; then its epmd
  restart  stop, then start
  kill     SIGKILL of beam.smp at once: a crash
  pause    SIGSTOP: a hung broker;  resume: SIGCONT
  status   running/paused/stopped, pid, port, RSS, log
  logs     follow its log (tail -F)
  ctl      rabbitmqctl with the node's environment, e.g. ctl list_queues name messages arguments
Run folder: \$SHOPMICRO_RUN_DIR (default .run). See docs/notifications.md.
EOF
}

rabbitmq_main() {
  case ${1:-} in
    start)   rabbitmq_start ;;
    stop)    rabbitmq_stop ;;
    restart) rabbitmq_restart ;;
    kill)    rabbitmq_kill ;;
    pause)   rabbitmq_pause ;;
    resume)  rabbitmq_resume ;;
    status)  rabbitmq_status_line ;;
    logs)    rabbitmq_logs ;;
    ctl)     shift; rabbitmq_ctl "$@" ;;
    -h|--help|help) rabbitmq_usage ;;
    *)       rabbitmq_usage >&2; exit 2 ;;
  esac
}

# RABBITMQ_SH_MAIN: stack.sh sources this file in turn; that nested copy must not run main again.
if [[ ${BASH_SOURCE[0]} == "$0" && -z ${RABBITMQ_SH_MAIN:-} ]]; then
  RABBITMQ_SH_MAIN=1
  # shellcheck source=SCRIPTDIR/stack.sh
  source "$(dirname "${BASH_SOURCE[0]}")/stack.sh"
  rabbitmq_main "$@"
fi
