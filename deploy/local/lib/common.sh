# shellcheck shell=bash
# deploy/local/lib/common.sh: what every part of the local stack shares. Sourced by stack.sh (not a
# script of its own): paths and the run folder, messages (say note die section rel), port helpers
# (is_port port_open port_owner free_ports set_port_vars wait_ports_closed), process helpers
# (proc_stat alive proc_state is_paused child_pids wait_gone rss_mb pid_file_field, and pause_pid
# resume_pid for a component's pause and resume verbs), elapsed and follow_logs.

abs_path() { case $1 in /*) realpath -m -- "$1" ;; *) realpath -m -- "$ROOT/$1" ;; esac; }
# set_run_dir DIR: RUN = DIR (absolute) and every run-time path in it (pg_paths: Postgres's). `test`
# calls it again to move to its own run folder.
set_run_dir() {
  RUN=$(abs_path "$1")
  # shellcheck disable=SC2034  # used by postgres.sh and services.sh
  LOGS="$RUN/logs"
  pg_paths
}

say()  { printf 'stack: %s\n' "$*"; }
note() { printf 'stack: note: %s\n' "$*" >&2; }
die()  { printf 'stack: error: %s\n' "$*" >&2; exit 1; }
section() { printf '\n==== %s ====\n' "$*"; }
rel()  { case $1 in "$ROOT"/*) printf '%s' "${1#"$ROOT"/}" ;; *) printf '%s' "$1" ;; esac; }

is_port() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= 65535 )); }

# trim VAR STRING: VAR = STRING without leading and trailing white space.
trim() {
  local s=$2
  s=${s#"${s%%[![:space:]]*}"}
  s=${s%"${s##*[![:space:]]}"}
  printf -v "$1" '%s' "$s"
}

# set_port_vars SPEC...: give every port variable its default and export it, so that the SERVICES
# table's @VAR@ references and the tests (SHOPMICRO_PG_PORT) see the same values. A SPEC is VAR=DEFAULT
# or a line of the SERVICES table (its third field is one). Sets PORT_VARS and PORT_DEFAULTS: every
# port variable, in SPEC order, and its default.
set_port_vars() {
  local _spec _var
  PORT_VARS=() PORT_DEFAULTS=()
  for _spec in "$@"; do
    if [[ $_spec == *'|'* ]]; then IFS='|' read -r _ _ _spec _ <<<"$_spec"; trim _spec "$_spec"; fi
    _var=${_spec%%=*}
    PORT_VARS+=("$_var") PORT_DEFAULTS+=("${_spec#*=}")
    if [[ -z ${!_var:-} ]]; then printf -v "$_var" '%s' "${_spec#*=}"; fi
    is_port "${!_var}" || die "$_var='${!_var}' is not a port number"
    export "${_var?}"
  done
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_ports N [AVOID...]: N different ports of 127.0.0.1, picked at random, that can be bound now
# and are none of AVOID; one a line. They lie below the kernel's ephemeral range
# (ip_local_port_range), from which client connections take their source ports: a port from that
# range can be taken by some connection while a cluster on it restarts (pg-restart).
free_ports() {
  python3 -c '
import random, socket, sys
n, avoid, held, ports = int(sys.argv[1]), set(sys.argv[2:]), [], []
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    lo = 32768
candidates = [p for p in range(10000, lo if lo > 11000 else 65536) if str(p) not in avoid]
random.shuffle(candidates)
for p in candidates:
    if len(ports) == n:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    held.append(s)
    ports.append(p)
print(*ports, sep="\n")
' "$@"
}

# Who listens on port $1 (best effort, for error messages).
port_owner() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | sed 's/^/    /' || true
}

# proc_stat PID: PROC_STAT = the fields of /proc/PID/stat after "(comm) ", i.e. from the state
# letter on; false when PID is gone. With `read`, not $(<file): when the file vanishes (the process
# exited meanwhile), bash 5.2's $(<file) ends a `set -e` script even behind `||`.
proc_stat() {
  PROC_STAT=""
  { read -r -d '' PROC_STAT </proc/"$1"/stat; } 2>/dev/null || true
  [[ $PROC_STAT == *') '* ]] || return 1
  PROC_STAT=${PROC_STAT##*) }
}

# True while pid $1 exists and is not a zombie.
alive() { proc_stat "$1" && [[ ${PROC_STAT:0:1} != Z ]]; }

# The state letter of pid $1 from /proc/<pid>/stat (R S D T Z ...); empty when it is gone.
# T is "stopped by a signal": SIGSTOP, i.e. `pause`.
proc_state() {
  proc_stat "$1" || return 0
  printf '%s' "${PROC_STAT:0:1}"
}
is_paused() { [[ $(proc_state "$1") == T ]]; }

# The pids whose parent is $1 (from /proc; procps may not be installed).
child_pids() {
  local f pid ppid
  for f in /proc/[0-9]*/stat; do
    pid=${f#/proc/} pid=${pid%/stat}
    proc_stat "$pid" || continue
    read -r _ ppid _ <<<"$PROC_STAT"
    if [[ $ppid == "$1" ]]; then printf '%s\n' "$pid"; fi
  done
}

# wait_gone PID TENTHS: true once PID is gone or a zombie, false after TENTHS tenths of a second.
wait_gone() {
  local i
  for (( i = 0; i < $2; i++ )); do
    alive "$1" || return 0
    sleep 0.1
  done
  ! alive "$1"
}

# follow_logs FILE...: follow them (tail -F: it follows a log that a restart replaces), after a note
# for each that does not exist yet. Does not return.
follow_logs() {
  local f
  for f in "$@"; do
    [[ -e $f ]] || note "$(rel "$f") does not exist yet; tail -F waits for it"
  done
  printf 'stack: following (Ctrl-C stops):' >&2
  for f in "$@"; do printf ' %s' "$(rel "$f")" >&2; done
  printf '\n' >&2
  exec tail -n 20 -F "$@"
}

# elapsed T0: seconds since T0 (an $EPOCHREALTIME), one decimal.
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# rss_mb PID: its resident memory in MB, "?" when it cannot be read.
rss_mb() { awk '/^VmRSS:/ { printf "%d", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "?"; }

# pid_file_field FILE N: line N (1-based) of a pid file, "?" when it has none.
pid_file_field() {
  local -a rec=()
  mapfile -t -n "$2" rec <"$1" 2>/dev/null || true
  printf '%s' "${rec[$2 - 1]:-?}"
}

# pause_pid NAME PID DETAIL / resume_pid NAME PID: the `pause` and `resume` verbs for a component
# whose process is PID (empty: not running, an error): SIGSTOP or SIGCONT, then wait up to 2 s
# for the state to change (T = stopped). DETAIL ends the "paused" line (what callers now see).
pause_pid() {
  [[ -n $2 ]] || die "$1: not running: nothing to pause"
  if is_paused "$2"; then say "$1: already paused (pid $2)"; return 0; fi
  signal_wait "$1" "$2" STOP
  say "$1: paused (SIGSTOP to pid $2). $3"
}
resume_pid() {
  [[ -n $2 ]] || die "$1: not running: nothing to resume"
  if ! is_paused "$2"; then say "$1: not paused (pid $2 is running)"; return 0; fi
  signal_wait "$1" "$2" CONT
  say "$1: resumed (SIGCONT to pid $2)"
}
signal_wait() {
  local i
  kill -"$3" "$2"
  for (( i = 0; i < 20; i++ )); do
    if [[ $3 == STOP ]] && is_paused "$2"; then return 0; fi
    if [[ $3 == CONT ]] && ! is_paused "$2"; then return 0; fi
    sleep 0.1
  done
  die "$1: pid $2 did not change state 2 s after SIG$3"
}

# wait_ports_closed NAME PID PORT...: after PID's exit, wait up to 5 s until none of the PORTs
# accepts connections (a VM's threads can hold its sockets a moment after its main thread
# ended), so that a start right after stop or kill does not find them in use.
wait_ports_closed() {
  local name=$1 pid=$2 i p open
  shift 2
  for (( i = 0; i < 50; i++ )); do
    open=0
    for p in "$@"; do if port_open "$p"; then open=1; fi; done
    (( open )) || return 0
    sleep 0.1
  done
  note "$name: the ports of pid $pid still accept connections 5 s after it ended"
}
