#!/usr/bin/env bash
# deploy/local/stack.sh: the ShopMicro stack without Docker.
#
# Installs the Debian packages in packages.txt, runs a Postgres cluster of the
# repository's own on loopback, builds, starts the services and runs every test.
# All run-time state lives in <repo>/.run/ (git-ignored), or in $SHOPMICRO_RUN_DIR when set
# (an isolated second stack, e.g. the walkthrough test; use other ports with it):
#   .run/pg/data  .run/pg/sock   the Postgres cluster and its socket directory
#   .run/logs/    postgres.log, <service>.log
#   .run/<svc>.pid               pid and binary of each service started by `up` or `start`
# `test` runs in a run folder of its own ($TMPDIR/shopmicro-test.*, free ports; removed at exit),
# so it never touches a stack that is up.
# See deploy/local/README.md for every subcommand and SHOPMICRO_* variable.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
SELF="$ROOT/deploy/local/stack.sh"
PACKAGES_FILE="$ROOT/deploy/local/packages.txt"
abs_path() { case $1 in /*) realpath -m -- "$1" ;; *) realpath -m -- "$ROOT/$1" ;; esac; }
# set_run_dir DIR: RUN = DIR (absolute) and every run-time path in it. `test` calls it again to
# move to its own run folder.
set_run_dir() {
  RUN=$(abs_path "$1")
  LOGS="$RUN/logs"
  PG_DIR="$RUN/pg"
  PG_DATA="$PG_DIR/data"
  PG_SOCK="$PG_DIR/sock"
  PG_LOG="$LOGS/postgres.log"
}
set_run_dir "${SHOPMICRO_RUN_DIR:-.run}"

PG_BIN="${SHOPMICRO_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_CONF_NAME="shopmicro.conf"       # included from postgresql.conf, rewritten at every start
PG_DATABASES=(catalog orders)

BUILD_DIR=$(abs_path "${SHOPMICRO_BUILD_DIR:-build}")
ASAN_BUILD_DIR=$(abs_path "${SHOPMICRO_ASAN_BUILD_DIR:-build-asan}")
TSAN_BUILD_DIR=$(abs_path "${SHOPMICRO_TSAN_BUILD_DIR:-build-tsan}")

# ---------------------------------------------------------------------------
# The services, one line each, started in this order by `up` and stopped in
# the reverse order by `down`. Fields, separated by '|':
#   name | binary, relative to the build dir | port variable=default | environment
# The environment is ';'-separated NAME=VALUE pairs. In a value, @PORT@ is this
# service's port and @VAR@ the value of any other variable, e.g.
# @SHOPMICRO_PG_PORT@ or @SHOPMICRO_CATALOG_PORT@ (every port variable gets its
# default before any line is read). Adding a service is one line, e.g.
#   "order | services/order/order | SHOPMICRO_ORDER_PORT=50052 | ORDER_LISTEN=127.0.0.1:@PORT@; ORDER_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=orders user=postgres; ORDER_CATALOG_ADDR=127.0.0.1:@SHOPMICRO_CATALOG_PORT@"
SERVICES=(
  "catalog | services/catalog/catalog | SHOPMICRO_CATALOG_PORT=50051 | CATALOG_LISTEN=127.0.0.1:@PORT@; CATALOG_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=catalog user=postgres"
  "order | services/order/order | SHOPMICRO_ORDER_PORT=50052 | ORDER_LISTEN=127.0.0.1:@PORT@; ORDER_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=orders user=postgres; ORDER_CATALOG_ADDR=127.0.0.1:@SHOPMICRO_CATALOG_PORT@"
  "gateway | gateway/gateway | SHOPMICRO_GATEWAY_PORT=8080 | GATEWAY_LISTEN=127.0.0.1:@PORT@; GATEWAY_CATALOG_ADDR=127.0.0.1:@SHOPMICRO_CATALOG_PORT@; GATEWAY_ORDER_ADDR=127.0.0.1:@SHOPMICRO_ORDER_PORT@"
)
SERVICE_START_TIMEOUT=10   # seconds until the port must accept TCP
# Seconds between SIGTERM and SIGKILL. The services drain in-flight calls for up to 10 s after
# SIGTERM (*_DRAIN_MS), so the default leaves them time to finish that and exit 0.
SERVICE_STOP_TIMEOUT="${SHOPMICRO_STOP_TIMEOUT:-15}"

# ---------------------------------------------------------------------------
say()  { printf 'stack: %s\n' "$*"; }
note() { printf 'stack: note: %s\n' "$*" >&2; }
die()  { printf 'stack: error: %s\n' "$*" >&2; exit 1; }
section() { printf '\n==== %s ====\n' "$*"; }
rel()  { case $1 in "$ROOT"/*) printf '%s' "${1#"$ROOT"/}" ;; *) printf '%s' "$1" ;; esac; }

is_port() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= 65535 )); }
[[ $SERVICE_STOP_TIMEOUT =~ ^[0-9]+$ ]] || die "SHOPMICRO_STOP_TIMEOUT='$SERVICE_STOP_TIMEOUT' is not a number of seconds"

# trim VAR STRING: VAR = STRING without leading and trailing white space.
trim() {
  local s=$2
  s=${s#"${s%%[![:space:]]*}"}
  s=${s%"${s##*[![:space:]]}"}
  printf -v "$1" '%s' "$s"
}

# Give every port variable its default and export it, so that the table's
# @VAR@ references and the tests (SHOPMICRO_PG_PORT) see the same values.
# PORT_VARS and PORT_DEFAULTS: every port variable (Postgres's, then the table's) and its default.
PORT_VARS=() PORT_DEFAULTS=()
for _spec in "SHOPMICRO_PG_PORT=55432" "${SERVICES[@]}"; do
  if [[ $_spec == *'|'* ]]; then IFS='|' read -r _ _ _spec _ <<<"$_spec"; trim _spec "$_spec"; fi
  _var=${_spec%%=*}
  PORT_VARS+=("$_var") PORT_DEFAULTS+=("${_spec#*=}")
  if [[ -z ${!_var:-} ]]; then printf -v "$_var" '%s' "${_spec#*=}"; fi
  is_port "${!_var}" || die "$_var='${!_var}' is not a port number"
  export "${_var?}"
done
unset _spec _var
PG_PORT=$SHOPMICRO_PG_PORT

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

# ---------------------------------------------------------------------------
# deps

read_packages() { sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$PACKAGES_FILE"; }

missing_packages() {
  local -A have=()
  local st pkg
  while read -r st pkg; do
    [[ $st == ii ]] && have[$pkg]=1
  done < <(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$@" 2>/dev/null || true)
  for pkg in "$@"; do [[ -n ${have[$pkg]:-} ]] || printf '%s\n' "$pkg"; done
}

cmd_deps() {
  [[ -r $PACKAGES_FILE ]] || die "cannot read $PACKAGES_FILE"
  command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: deps needs Debian 12 (apt/dpkg)"
  local -a pkgs missing sudo=()
  mapfile -t pkgs < <(read_packages)
  mapfile -t missing < <(missing_packages "${pkgs[@]}")
  if (( ${#missing[@]} == 0 )); then
    say "deps: all ${#pkgs[@]} packages of $(rel "$PACKAGES_FILE") are installed"
    return 0
  fi
  say "deps: missing: ${missing[*]}"
  if (( EUID != 0 )); then
    command -v sudo >/dev/null 2>&1 ||
      die "deps: these Debian packages are missing and I am not root and there is no sudo: ${missing[*]}
  install them as root: apt-get install --no-install-recommends ${missing[*]}"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -q || die "deps: apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "deps: apt-get install failed for: ${missing[*]}"
  mapfile -t missing < <(missing_packages "${pkgs[@]}")
  (( ${#missing[@]} == 0 )) || die "deps: still not installed after apt-get install: ${missing[*]}"
  say "deps: installed; all ${#pkgs[@]} packages present"
}

# ---------------------------------------------------------------------------
# Postgres

# Run a command as the cluster's owner: initdb and pg_ctl refuse to run as
# root, so root runs them as the `postgres` system user. fd 9 (the pg lock) is
# closed so that the postmaster never inherits the lock.
as_pg() {
  if (( EUID == 0 )); then
    (cd / && exec runuser -u postgres -- "$@") 9>&-
  else
    "$@" 9>&-
  fi
}

# Serialise pg-up/pg-down/pg-restart: ctest fixtures may call pg-up in parallel.
pg_lock()   { mkdir -p "$RUN"; exec 9>>"$RUN/pg.lock"; flock -w 120 9 || die "timed out waiting for $RUN/pg.lock"; }
pg_unlock() { exec 9>&-; }

# Sets PG_RUN_PID and PG_RUN_PORT when this repo's cluster runs; false otherwise.
pg_running() {
  local f="$PG_DATA/postmaster.pid" lines cmd
  PG_RUN_PID="" PG_RUN_PORT=""
  [[ -r $f ]] || return 1
  mapfile -t -n 4 lines <"$f" 2>/dev/null || return 1
  (( ${#lines[@]} >= 4 )) || return 1
  [[ ${lines[0]} =~ ^[0-9]+$ ]] && alive "${lines[0]}" || return 1
  # A stale pid file whose pid was reused by another process is not our server.
  cmd=$(tr '\0' ' ' <"/proc/${lines[0]}/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *postgres* ]] || return 1
  PG_RUN_PID=${lines[0]} PG_RUN_PORT=${lines[3]}
}

pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -t 2 >/dev/null 2>&1; }

# A postmaster.pid whose pid is a zombie (killed server not yet reaped) or an
# unrelated process (pid reused) makes postgres refuse to start. pg_running has
# already said no server of ours runs: give a zombie 5 s, then drop the file.
pg_clear_stale_pidfile() {
  local f="$PG_DATA/postmaster.pid" pid i
  [[ -f $f ]] || return 0
  read -r pid <"$f" || pid=""
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  for (( i = 0; i < 50; i++ )); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  note "removing stale $(rel "$f"): pid $pid is not a running postgres"
  rm -f "$f"
}

pg_wait_ready() {
  local i
  for (( i = 0; i < 300; i++ )); do
    pg_ready && return 0
    pg_running || { pg_log_tail; die "postgres exited during start-up"; }
    sleep 0.1
  done
  pg_log_tail
  die "postgres on 127.0.0.1:$PG_PORT not ready after 30 s"
}

pg_log_tail() {
  [[ -r $PG_LOG ]] || return 0
  printf 'stack: last lines of %s:\n' "$(rel "$PG_LOG")" >&2
  tail -n 20 "$PG_LOG" | sed 's/^/    /' >&2
}

pg_check_port_matches() {
  [[ $PG_RUN_PORT == "$PG_PORT" ]] ||
    die "this repo's postgres already runs on port $PG_RUN_PORT (pid $PG_RUN_PID), not $PG_PORT:
  use SHOPMICRO_PG_PORT=$PG_RUN_PORT, or run '$(rel "$SELF") pg-down' first"
}

pg_user_can_reach() {
  # shellcheck disable=SC2016  # $d is expanded by the inner sh
  runuser -u postgres -- sh -c 'for d; do [ -x "$d" ] || exit 1; done' sh "$@" 9>&-
}

# Make .run/pg usable by the postgres user: owned by it, and every directory
# above it traversable (the repo may sit under a root-owned 0700 directory).
pg_prepare_dirs() {
  mkdir -p "$LOGS" "$PG_DATA" "$PG_SOCK"
  touch "$PG_LOG"
  if (( EUID == 0 )); then
    id -u postgres >/dev/null 2>&1 || die "there is no 'postgres' system user: run '$(rel "$SELF") deps' (package postgresql)"
    chown postgres:postgres "$PG_DIR" "$PG_DATA" "$PG_SOCK" "$PG_LOG"
    local -a dirs=() fix=()
    local d=$RUN
    while [[ $d != / ]]; do dirs+=("$d"); d=$(dirname "$d"); done
    dirs+=("$LOGS")
    if ! pg_user_can_reach "${dirs[@]}"; then
      # A directory below a blocked one looks blocked too: only change those that lack o+x.
      for d in "${dirs[@]}"; do
        [[ $(stat -c %A "$d") == *[xt] ]] || fix+=("$d")
      done
      if (( ${#fix[@]} > 0 )); then
        note "giving other users search (x) permission on ${fix[*]} so that the postgres user can reach $(rel "$PG_DIR")"
        chmod o+x "${fix[@]}"
      fi
      pg_user_can_reach "${dirs[@]}" ||
        die "the postgres user still cannot reach $(rel "$PG_DIR") (ACLs? a noexec or root-squashed mount?)"
    fi
  fi
  chmod 700 "$PG_DATA"
}

pg_write_conf() {
  local conf="$PG_DATA/$PG_CONF_NAME" sockdir="$PG_SOCK"
  # sun_path holds 107 bytes: a deep checkout gets no Unix socket (TCP still works).
  if (( ${#PG_SOCK} + 20 > 107 )); then
    note "socket path under $PG_SOCK is too long for a Unix socket; postgres listens on TCP only"
    sockdir=""
  fi
  {
    echo "# Written by deploy/local/stack.sh at every start; change the script, not this file."
    echo "port = $PG_PORT"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = '$sockdir'"
    echo "max_connections = 200"
    if [[ ${SHOPMICRO_PG_FAST:-0} == 1 ]]; then
      echo "synchronous_commit = off   # SHOPMICRO_PG_FAST=1"
    fi
  } >"$conf"
  if (( EUID == 0 )); then chown postgres:postgres "$conf"; fi
  chmod 600 "$conf"
}

pg_initdb() {
  [[ -f $PG_DATA/PG_VERSION ]] && return 0
  [[ -x $PG_BIN/initdb ]] || die "$PG_BIN/initdb not found: run '$(rel "$SELF") deps' or set SHOPMICRO_PG_BIN"
  say "postgres: initdb $(rel "$PG_DATA")"
  as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
    >>"$PG_LOG" 2>&1 || { pg_log_tail; die "initdb failed (full output in $(rel "$PG_LOG"))"; }
  printf "\ninclude_if_exists = '%s'\n" "$PG_CONF_NAME" >>"$PG_DATA/postgresql.conf"
}

pg_create_databases() {
  local -a psql=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres)
  local have db
  have=$(PGCONNECT_TIMEOUT=5 "${psql[@]}" -tAc "SELECT datname FROM pg_database") ||
    die "cannot query postgres on 127.0.0.1:$PG_PORT"
  for db in "${PG_DATABASES[@]}"; do
    if ! grep -qxF "$db" <<<"$have"; then
      PGCONNECT_TIMEOUT=5 "${psql[@]}" -c "CREATE DATABASE \"$db\"" || die "CREATE DATABASE $db failed"
      say "postgres: created database $db"
    fi
  done
}

pg_up() {
  if pg_running; then
    pg_check_port_matches
    if pg_is_paused; then
      die "postgres is paused (SIGSTOP, pid $PG_RUN_PID): run '$(rel "$SELF") resume postgres' first"
    fi
    pg_wait_ready
    pg_create_databases
    say "postgres: already running (pid $PG_RUN_PID, 127.0.0.1:$PG_PORT)"
    return 0
  fi
  if port_open "$PG_PORT"; then
    die "port $PG_PORT on 127.0.0.1 is in use by another process, not this repo's postgres ($(rel "$PG_DATA")):
$(port_owner "$PG_PORT")
  stop that process or choose a free port: SHOPMICRO_PG_PORT=<port> $(rel "$SELF") pg-up"
  fi
  [[ -x $PG_BIN/pg_ctl ]] || die "$PG_BIN/pg_ctl not found: run '$(rel "$SELF") deps' or set SHOPMICRO_PG_BIN"
  pg_prepare_dirs
  pg_clear_stale_pidfile
  pg_initdb
  pg_write_conf
  say "postgres: starting on 127.0.0.1:$PG_PORT (data $(rel "$PG_DATA"), log $(rel "$PG_LOG"))"
  as_pg "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t 60 >/dev/null ||
    { pg_log_tail; die "pg_ctl start failed"; }
  pg_running || { pg_log_tail; die "postgres did not stay up"; }
  pg_wait_ready
  pg_create_databases
  say "postgres: running (pid $PG_RUN_PID, 127.0.0.1:$PG_PORT, databases: ${PG_DATABASES[*]})"
}

pg_down() {
  if ! pg_running; then
    say "postgres: not running"
    return 0
  fi
  pg_resume_quietly
  say "postgres: stopping (pid $PG_RUN_PID, port $PG_RUN_PORT)"
  as_pg "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m fast -w -t 60 >/dev/null || die "pg_ctl stop failed"
  say "postgres: stopped"
}

pg_restart() {
  if ! pg_running; then
    say "postgres: not running; starting it"
    pg_up
    return
  fi
  pg_check_port_matches
  pg_resume_quietly
  pg_write_conf
  say "postgres: restarting (pid $PG_RUN_PID)"
  as_pg "$PG_BIN/pg_ctl" restart -D "$PG_DATA" -l "$PG_LOG" -m fast -w -t 60 >/dev/null ||
    { pg_log_tail; die "pg_ctl restart failed"; }
  pg_running || { pg_log_tail; die "postgres did not come back"; }
  pg_wait_ready
  pg_create_databases
  say "postgres: running again (pid $PG_RUN_PID, 127.0.0.1:$PG_PORT)"
}

# Pausing Postgres (a hung database) stops the postmaster and every child process: backends,
# checkpointer, WAL writer... The postmaster is stopped first, so that it forks no child after the
# list of children is read. (After pg_running: PG_RUN_PID is the postmaster.)
pg_is_paused() { is_paused "$PG_RUN_PID"; }

# pg_signal_all STOP|CONT|KILL: sets PG_KIDS (the children signalled) and PG_CHILDREN (their count).
pg_signal_all() {
  local sig=$1 pid
  PG_KIDS=()
  if [[ $sig == CONT ]]; then
    mapfile -t PG_KIDS < <(child_pids "$PG_RUN_PID")
    for pid in "${PG_KIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
    kill -CONT "$PG_RUN_PID" 2>/dev/null || true
  else
    kill -STOP "$PG_RUN_PID" 2>/dev/null || true
    mapfile -t PG_KIDS < <(child_pids "$PG_RUN_PID")
    [[ $sig == STOP ]] || kill -"$sig" "$PG_RUN_PID" 2>/dev/null || true
    for pid in "${PG_KIDS[@]}"; do kill -"$sig" "$pid" 2>/dev/null || true; done
  fi
  PG_CHILDREN=${#PG_KIDS[@]}
}

# Before pg_ctl stop/restart: a paused cluster would never answer it.
pg_resume_quietly() {
  local was=0
  pg_is_paused && was=1
  pg_signal_all CONT
  if (( was )); then note "postgres was paused; resumed it (SIGCONT) first"; fi
}

pg_pause() {
  pg_running || die "postgres: not running: nothing to pause"
  if pg_is_paused; then
    say "postgres: already paused (pid $PG_RUN_PID)"
    return 0
  fi
  pg_signal_all STOP
  say "postgres: paused: SIGSTOP to the postmaster (pid $PG_RUN_PID) and its $PG_CHILDREN child processes."
  say "postgres: its port still accepts TCP connections, but nothing answers: clients hang until their deadlines."
  say "postgres: '$(rel "$SELF") resume postgres' continues it"
}

pg_resume() {
  pg_running || die "postgres: not running: nothing to resume"
  local pid stopped=0
  pg_is_paused && stopped=1
  for pid in $(child_pids "$PG_RUN_PID"); do is_paused "$pid" && stopped=1; done
  if (( ! stopped )); then
    say "postgres: not paused (pid $PG_RUN_PID is running)"
    return 0
  fi
  pg_signal_all CONT
  say "postgres: resumed (SIGCONT to the postmaster, pid $PG_RUN_PID, and its $PG_CHILDREN child processes)"
}

# SIGKILL to the postmaster and every child at once, as a crash or the OOM killer would. The next
# pg-up removes the stale postmaster.pid and Postgres runs crash recovery.
pg_sigkill() {
  pg_running || die "postgres: not running: nothing to kill"
  local pid pm=$PG_RUN_PID
  pg_signal_all KILL
  for pid in "$pm" "${PG_KIDS[@]}"; do
    wait_gone "$pid" 50 || die "postgres: pid $pid survived SIGKILL"
  done
  say "postgres: killed with SIGKILL (postmaster pid $pm and ${#PG_KIDS[@]} child processes)."
  say "postgres: '$(rel "$SELF") start postgres' starts it again (with crash recovery)"
}

cmd_pg_up()      { pg_lock; pg_up;      pg_unlock; }
cmd_pg_down()    { pg_lock; pg_down;    pg_unlock; }
cmd_pg_restart() { pg_lock; pg_restart; pg_unlock; }

# ---------------------------------------------------------------------------
# build

# configure_tree DIR CMAKE_ARGS...: configure DIR once (ninja re-runs cmake by
# itself when a CMakeLists.txt changes). Returns non-zero with a message on
# failure; never exits, so that `test` can go on to the next tree.
configure_tree() {
  local dir=$1 gen rc=0
  shift
  if [[ -f $dir/CMakeCache.txt ]]; then
    gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt")
    if [[ $gen != Ninja ]]; then
      printf 'stack: error: %s was configured with generator "%s", not Ninja: remove it or set SHOPMICRO_BUILD_DIR\n' \
        "$(rel "$dir")" "$gen" >&2
      return 1
    fi
  fi
  if [[ ! -f $dir/CMakeCache.txt || ! -f $dir/build.ninja ]]; then
    say "build: configuring $(rel "$dir")"
    cmake -S "$ROOT" -B "$dir" -G Ninja "$@" || rc=$?
    if (( rc != 0 )); then
      printf 'stack: error: BUILD FAILED: cmake configure of %s exited %d (see the output above)\n' "$(rel "$dir")" "$rc" >&2
      return 1
    fi
  fi
}

# ninja_tree DIR [TARGET...]: build DIR (every target, or only those given).
ninja_tree() {
  local dir=$1 rc=0
  shift
  say "build: ninja -C $(rel "$dir") $*"
  ninja -C "$dir" "$@" || rc=$?
  if (( rc != 0 )); then
    printf 'stack: error: BUILD FAILED: ninja -C %s %s exited %d (see the compiler output above)\n' "$(rel "$dir")" "$*" "$rc" >&2
    return 1
  fi
  say "build: $(rel "$dir") ${*:-(all targets)} up to date"
}

# build_tree DIR CMAKE_ARGS...: configure_tree, then build every target.
build_tree() {
  configure_tree "$@" || return 1
  ninja_tree "$1"
}

cmd_build() { build_tree "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo || exit 1; }

# ---------------------------------------------------------------------------
# services

# svc_load LINE: parse one SERVICES line into S_NAME S_BIN S_PORT_VAR S_PORT
# S_ENV (array of NAME=VALUE with @...@ expanded), S_PID_FILE and S_LOG.
svc_load() {
  local name bin spec envs kv
  IFS='|' read -r name bin spec envs <<<"$1"
  trim S_NAME "$name"
  trim bin "$bin"
  S_BIN=$(realpath -m -- "$BUILD_DIR/$bin")
  trim spec "$spec"
  S_PORT_VAR=${spec%%=*}
  S_PORT=${!S_PORT_VAR}
  S_PID_FILE="$RUN/$S_NAME.pid"
  S_LOG="$LOGS/$S_NAME.log"
  S_ENV=()
  IFS=';' read -r -a envs <<<"$envs"
  for kv in "${envs[@]}"; do
    trim kv "$kv"
    if [[ -n $kv ]]; then
      svc_expand "$kv"
      S_ENV+=("$S_EXPANDED")
    fi
  done
}

# svc_expand STRING: S_EXPANDED = STRING with @PORT@ and @VAR@ replaced.
svc_expand() {
  local s=$1 out="" name
  while [[ $s =~ ^([^@]*)@([A-Za-z_][A-Za-z0-9_]*)@(.*)$ ]]; do
    name=${BASH_REMATCH[2]}
    out+=${BASH_REMATCH[1]}
    s=${BASH_REMATCH[3]}
    if [[ $name == PORT ]]; then
      out+=$S_PORT
    else
      [[ -n ${!name:-} ]] || die "service $S_NAME: @$name@ in the SERVICES table is not set"
      out+=${!name}
    fi
  done
  S_EXPANDED=$out$s
}

# The pid file holds the pid and the binary it runs (line 2), so that a pid
# reused by another program is never taken for the service, whatever
# SHOPMICRO_BUILD_DIR says now.
# Sets S_PID (empty when not running), S_RUN_BIN, and S_STALE=1 when the binary
# was rebuilt since the start. Removes a stale pid file.
svc_find_pid() {
  local -a rec=()
  local exe
  S_PID="" S_RUN_BIN="" S_STALE=0
  [[ -f $S_PID_FILE ]] || return 0
  mapfile -t -n 2 rec <"$S_PID_FILE"
  if [[ ${rec[0]:-} =~ ^[0-9]+$ ]] && alive "${rec[0]}"; then
    exe=$(readlink "/proc/${rec[0]}/exe" 2>/dev/null) || exe=""
    if [[ $exe == *" (deleted)" ]]; then S_STALE=1; exe=${exe% (deleted)}; fi
    if [[ -z $exe || -z ${rec[1]:-} || $exe == "${rec[1]}" ]]; then
      S_PID=${rec[0]} S_RUN_BIN=${rec[1]:-$exe}
      return 0
    fi
  fi
  rm -f "$S_PID_FILE"
}

# svc_start LINE [EXPLICIT]: start one service. `up` skips a service that is not built yet;
# `start <svc>` (EXPLICIT=1) fails instead.
svc_start() {
  local explicit=${2:-0}
  svc_load "$1"
  if [[ ! -x $S_BIN ]]; then
    if (( explicit )); then
      die "$S_NAME: $(rel "$S_BIN") is not built yet: run '$(rel "$SELF") build' (or 'up') first"
    fi
    say "$S_NAME: $(rel "$S_BIN") is not built yet; skipped"
    return 0
  fi
  svc_find_pid
  if [[ -n $S_PID ]]; then
    if is_paused "$S_PID"; then
      say "$S_NAME: already running (pid $S_PID, 127.0.0.1:$S_PORT) but PAUSED; left alone: '$(rel "$SELF") resume $S_NAME' continues it"
    else
      say "$S_NAME: already running (pid $S_PID, 127.0.0.1:$S_PORT); left alone"
    fi
    if [[ $S_RUN_BIN != "$S_BIN" ]]; then
      note "$S_NAME runs $(rel "$S_RUN_BIN"), not $(rel "$S_BIN"): '$(rel "$SELF") down' and 'up' to switch"
    elif (( S_STALE )); then
      note "$S_NAME runs an older build of $(rel "$S_BIN"): '$(rel "$SELF") down' and 'up' to restart it"
    fi
    return 0
  fi
  if port_open "$S_PORT"; then
    die "$S_NAME: port $S_PORT on 127.0.0.1 is in use by another process:
$(port_owner "$S_PORT")
  stop it or set $S_PORT_VAR to a free port"
  fi
  if (( explicit )) && [[ $1 == *@SHOPMICRO_PG_PORT@* ]] && ! pg_running; then
    note "postgres is not running: $S_NAME waits for it for a while ('$(rel "$SELF") start postgres')"
  fi
  mkdir -p "$LOGS"
  [[ -f $S_LOG ]] && mv -f "$S_LOG" "$S_LOG.1"
  say "$S_NAME: starting $(rel "$S_BIN") on 127.0.0.1:$S_PORT"
  (cd "$ROOT" && exec setsid nohup env "${S_ENV[@]}" "$S_BIN" >"$S_LOG" 2>&1 </dev/null) 9>&- &
  local pid=$! i st=0
  printf '%s\n%s\n' "$pid" "$S_BIN" >"$S_PID_FILE"
  for (( i = 0; i < SERVICE_START_TIMEOUT * 10; i++ )); do
    if ! alive "$pid"; then
      rm -f "$S_PID_FILE"
      wait "$pid" || st=$?
      printf 'stack: error: %s exited with status %d during start-up; last lines of %s:\n' \
        "$S_NAME" "$st" "$(rel "$S_LOG")" >&2
      tail -n 20 "$S_LOG" | sed 's/^/    /' >&2
      exit 1
    fi
    if port_open "$S_PORT"; then
      say "$S_NAME: running (pid $pid, 127.0.0.1:$S_PORT, log $(rel "$S_LOG"))"
      return 0
    fi
    sleep 0.1
  done
  printf 'stack: error: %s (pid %s) does not accept TCP on 127.0.0.1:%s after %d s; last lines of %s:\n' \
    "$S_NAME" "$pid" "$S_PORT" "$SERVICE_START_TIMEOUT" "$(rel "$S_LOG")" >&2
  tail -n 20 "$S_LOG" | sed 's/^/    /' >&2
  svc_kill "$pid"
  rm -f "$S_PID_FILE"
  exit 1
}

# SIGTERM, up to SERVICE_STOP_TIMEOUT seconds' grace, then SIGKILL. SIGCONT right after SIGTERM:
# a paused (SIGSTOPped) process only handles the pending SIGTERM once it runs again.
svc_kill() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  kill -CONT "$pid" 2>/dev/null || true
  wait_gone "$pid" $((SERVICE_STOP_TIMEOUT * 10)) && return 0
  note "pid $pid ignored SIGTERM for ${SERVICE_STOP_TIMEOUT} s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || return 0
  wait_gone "$pid" 50 || die "pid $pid survived SIGKILL"
}

svc_stop() {
  svc_load "$1"
  svc_find_pid
  if [[ -z $S_PID ]]; then
    say "$S_NAME: not running"
    return 0
  fi
  if is_paused "$S_PID"; then
    say "$S_NAME: stopping (pid $S_PID, paused: SIGTERM, then SIGCONT so that it handles it)"
  else
    say "$S_NAME: stopping (pid $S_PID: SIGTERM, SIGKILL after ${SERVICE_STOP_TIMEOUT} s)"
  fi
  svc_kill "$S_PID"
  rm -f "$S_PID_FILE"
  say "$S_NAME: stopped"
}

svc_sigkill() {
  svc_load "$1"
  svc_find_pid
  [[ -n $S_PID ]] || die "$S_NAME: not running: nothing to kill"
  kill -KILL "$S_PID" 2>/dev/null || true
  wait_gone "$S_PID" 50 || die "$S_NAME: pid $S_PID survived SIGKILL"
  rm -f "$S_PID_FILE"
  say "$S_NAME: killed with SIGKILL (pid $S_PID; no drain, no clean shutdown)"
  say "$S_NAME: '$(rel "$SELF") start $S_NAME' starts it again"
}

# The kernel completes TCP handshakes for a stopped process, so callers connect and then hang:
# this is a hung dependency, not a dead one.
svc_pause() {
  svc_load "$1"
  svc_find_pid
  [[ -n $S_PID ]] || die "$S_NAME: not running: nothing to pause"
  if is_paused "$S_PID"; then
    say "$S_NAME: already paused (pid $S_PID)"
    return 0
  fi
  kill -STOP "$S_PID"
  local i
  for (( i = 0; i < 20; i++ )); do is_paused "$S_PID" && break; sleep 0.1; done
  is_paused "$S_PID" || die "$S_NAME: pid $S_PID is not in state T (stopped) 2 s after SIGSTOP"
  say "$S_NAME: paused (SIGSTOP to pid $S_PID). 127.0.0.1:$S_PORT still accepts TCP connections, but nothing answers"
  say "$S_NAME: '$(rel "$SELF") resume $S_NAME' continues it"
}

svc_resume() {
  svc_load "$1"
  svc_find_pid
  [[ -n $S_PID ]] || die "$S_NAME: not running: nothing to resume"
  if ! is_paused "$S_PID"; then
    say "$S_NAME: not paused (pid $S_PID is running)"
    return 0
  fi
  kill -CONT "$S_PID"
  local i
  for (( i = 0; i < 20; i++ )); do is_paused "$S_PID" || break; sleep 0.1; done
  ! is_paused "$S_PID" || die "$S_NAME: pid $S_PID is still stopped 2 s after SIGCONT"
  say "$S_NAME: resumed (SIGCONT to pid $S_PID)"
}

# ---------------------------------------------------------------------------
# per-service commands: start stop restart kill pause resume logs

service_names() {
  local line name
  printf 'postgres'
  for line in "${SERVICES[@]}"; do
    IFS='|' read -r name _ <<<"$line"
    trim name "$name"
    printf ' %s' "$name"
  done
}

# svc_line NAME: SVC_LINE = NAME's line of the SERVICES table; false when there is none.
svc_line() {
  local line name
  for line in "${SERVICES[@]}"; do
    IFS='|' read -r name _ <<<"$line"
    trim name "$name"
    if [[ $name == "$1" ]]; then SVC_LINE=$line; return 0; fi
  done
  return 1
}

# Check every name before acting on any, so that a typo does nothing.
check_names() {
  local cmd=$1 n
  shift
  if (( $# == 0 )); then
    printf 'stack: error: usage: %s %s <service>...\n  services: %s\n' "$(rel "$SELF")" "$cmd" "$(service_names)" >&2
    exit 2
  fi
  for n in "$@"; do
    [[ $n == postgres ]] && continue
    svc_line "$n" && continue
    printf 'stack: error: unknown service "%s"\n  services: %s\n' "$n" "$(service_names)" >&2
    exit 2
  done
}

cmd_service() {
  local cmd=$1 n
  shift
  check_names "$cmd" "$@"
  for n in "$@"; do
    if [[ $n == postgres ]]; then
      case $cmd in
        start)   cmd_pg_up ;;
        stop)    cmd_pg_down ;;
        restart) cmd_pg_restart ;;
        kill)    pg_lock; pg_sigkill; pg_unlock ;;
        pause)   pg_pause ;;
        resume)  pg_resume ;;
      esac
      continue
    fi
    svc_line "$n"
    case $cmd in
      start)   svc_start "$SVC_LINE" 1 ;;
      stop)    svc_stop "$SVC_LINE" ;;
      restart) svc_stop "$SVC_LINE"; svc_start "$SVC_LINE" 1 ;;
      kill)    svc_sigkill "$SVC_LINE" ;;
      pause)   svc_pause "$SVC_LINE" ;;
      resume)  svc_resume "$SVC_LINE" ;;
    esac
  done
}

# logs [<service>...]: follow the logs (tail -F: it follows a log that a restart replaces);
# every log when no service is named.
cmd_logs() {
  local n line
  local -a files=()
  if (( $# == 0 )); then
    files+=("$PG_LOG")
    for line in "${SERVICES[@]}"; do
      svc_load "$line"
      if [[ -e $S_LOG || -x $S_BIN ]]; then files+=("$S_LOG"); fi
    done
  else
    check_names logs "$@"
    for n in "$@"; do
      if [[ $n == postgres ]]; then
        files+=("$PG_LOG")
      else
        svc_line "$n"
        svc_load "$SVC_LINE"
        files+=("$S_LOG")
      fi
    done
  fi
  for n in "${files[@]}"; do
    [[ -e $n ]] || note "$(rel "$n") does not exist yet; tail -F waits for it"
  done
  printf 'stack: following (Ctrl-C stops):' >&2
  for n in "${files[@]}"; do printf ' %s' "$(rel "$n")" >&2; done
  printf '\n' >&2
  exec tail -n 20 -F "${files[@]}"
}

# ---------------------------------------------------------------------------
# status, up, down

cmd_status() {
  local line
  if pg_running; then
    printf '%-10s %-8s pid %-8s 127.0.0.1:%-6s data %s, log %s\n' postgres \
      "$(pg_is_paused && echo paused || echo running)" "$PG_RUN_PID" "$PG_RUN_PORT" \
      "$(rel "$PG_DATA")" "$(rel "$PG_LOG")"
  else
    printf '%-10s %-8s pid %-8s 127.0.0.1:%-6s data %s\n' postgres stopped - "$PG_PORT" "$(rel "$PG_DATA")"
  fi
  for line in "${SERVICES[@]}"; do
    svc_load "$line"
    svc_find_pid
    if [[ -n $S_PID ]]; then
      printf '%-10s %-8s pid %-8s 127.0.0.1:%-6s log %s, binary %s%s\n' "$S_NAME" \
        "$(is_paused "$S_PID" && echo paused || echo running)" "$S_PID" "$S_PORT" \
        "$(rel "$S_LOG")" "$(rel "$S_RUN_BIN")" "$( (( S_STALE )) && echo ' (rebuilt since start)')"
    elif [[ -x $S_BIN ]]; then
      printf '%-10s %-8s pid %-8s 127.0.0.1:%s\n' "$S_NAME" stopped - "$S_PORT"
    else
      printf '%-10s %-8s pid %-8s 127.0.0.1:%-6s (%s not built)\n' "$S_NAME" stopped - "$S_PORT" "$(rel "$S_BIN")"
    fi
  done
}

cmd_up() {
  local line
  section "deps";     cmd_deps
  section "postgres"; cmd_pg_up
  section "build";    build_tree "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo || die "build failed: no service started"
  section "services"
  for line in "${SERVICES[@]}"; do svc_start "$line"; done
  section "summary"
  cmd_status
  echo
  echo "Postgres DSN: host=127.0.0.1 port=$PG_PORT dbname=catalog|orders user=postgres"
  echo "REST gateway: http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT/ (curl it at /healthz, /v1/products)"
  echo "Logs:         $(rel "$LOGS")/"
  echo "Stop:         $(rel "$SELF") down"
}

cmd_down() {
  local i
  for (( i = ${#SERVICES[@]} - 1; i >= 0; i-- )); do svc_stop "${SERVICES[i]}"; done
  cmd_pg_down
}

# ---------------------------------------------------------------------------
# test

TEST_SUMMARY=()

# run_suite LABEL DIR CMAKE_ARGS... (environment for ctest from the caller)
run_suite() {
  local label=$1 dir=$2 t0=$SECONDS rc=0 log counts
  shift 2
  log="$dir/ctest-$label.log"
  section "$label: build $(rel "$dir")"
  if ! build_tree "$dir" "$@"; then
    TEST_SUMMARY+=("$(printf '%-26s FAILED  build failed (%d s)' "$label $(rel "$dir")" $((SECONDS - t0)))")
    return 1
  fi
  section "$label: ctest --test-dir $(rel "$dir")"
  set +e
  ctest --test-dir "$dir" --output-on-failure -j2 --timeout 300 2>&1 | tee "$log"
  rc=$?
  set -e
  counts=$(grep -E 'tests passed, [0-9]+ tests failed out of|No tests were found' "$log" | tail -n 1 || true)
  [[ -n $counts ]] || counts="no ctest summary line (see $(rel "$log"))"
  if (( rc == 0 )); then
    TEST_SUMMARY+=("$(printf '%-26s passed  %s (%d s)' "$label $(rel "$dir")" "$counts" $((SECONDS - t0)))")
  else
    TEST_SUMMARY+=("$(printf '%-26s FAILED  ctest exit %d: %s (%d s, log %s)' "$label $(rel "$dir")" "$rc" "$counts" \
      $((SECONDS - t0)) "$(rel "$log")")")
  fi
  return "$rc"
}

# ThreadSanitizer run of the concurrent unit tests: configure TSAN_BUILD_DIR with
# -DSVC_SANITIZE=thread, build only the executables of the unit tests whose name contains
# "concurrent", and run them with TSAN_OPTIONS=halt_on_error=1.
# Only pure-C unit tests run under TSan. gRPC, absl and libpq from Debian are not
# TSan-instrumented, so the services and the integration tests would report races inside those
# uninstrumented libraries (false positives) or miss real ones. The concurrency that is ours, the
# pkg/resilience engine shared by many threads, is what these tests exercise.
run_tsan_suite() {
  local label=tsan dir=$TSAN_BUILD_DIR t0=$SECONDS rc=0 log counts
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
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir "$dir" -L unit -R concurrent --output-on-failure -j2 --timeout 300 2>&1 |
    tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  counts=$(grep -E 'tests passed, [0-9]+ tests failed out of|No tests were found' "$log" | tail -n 1 || true)
  [[ -n $counts ]] || counts="no ctest summary line (see $(rel "$log"))"
  if (( rc == 0 )); then
    TEST_SUMMARY+=("$(printf '%-26s passed  %s (%d s)' "$label $(rel "$dir")" "$counts" $((SECONDS - t0)))")
  else
    TEST_SUMMARY+=("$(printf '%-26s FAILED  ctest exit %d: %s (%d s, log %s)' "$label $(rel "$dir")" "$rc" "$counts" \
      $((SECONDS - t0)) "$(rel "$log")")")
  fi
  return "$rc"
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

  run_suite normal "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo || failed=1
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite asan "$ASAN_BUILD_DIR" -DSVC_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug || failed=1
  run_tsan_suite || failed=1

  section "test summary ($((SECONDS - t0)) s)"
  for line in "${TEST_SUMMARY[@]}"; do echo "  $line"; done
  if (( failed )); then
    echo "  RESULT: FAILED"
    exit 1
  fi
  echo "  RESULT: all tests passed"
}

# ---------------------------------------------------------------------------

usage() {
  cat <<EOF
usage: $(rel "$SELF") <command> [<service>...]

The whole stack:
  deps        install the missing Debian packages of deploy/local/packages.txt
  pg-up       start this repo's Postgres (127.0.0.1:\$SHOPMICRO_PG_PORT, default 55432,
              data in .run/pg/data) and create the databases ${PG_DATABASES[*]}; idempotent
  pg-down     stop that Postgres (fast mode); harmless when it is not running
  pg-restart  restart that Postgres (pg_ctl restart -m fast -w)
  build       configure (once) and build \$SHOPMICRO_BUILD_DIR (default build/) with Ninja
  up          deps + pg-up + build, then start every built service in the background
  down        stop the services (SIGTERM, SIGKILL after ${SERVICE_STOP_TIMEOUT} s; paused ones are
              continued first), then pg-down
  status      show Postgres and each service: running/paused/stopped, pid, port
  test        deps, then build + ctest in build/ and in the ASan+UBSan tree build-asan/, and the
              concurrent unit tests under ThreadSanitizer in build-tsan/. The tests get a Postgres
              of their own (run folder in \$TMPDIR, free ports): a running stack is not touched
  test-env    <command> [<arg>...]: run one command (e.g. ctest) with that test Postgres

One service or more (services: $(service_names)):
  start       start it (it must be built; postgres: pg-up)
  stop        SIGTERM, wait up to ${SERVICE_STOP_TIMEOUT} s (\$SHOPMICRO_STOP_TIMEOUT), then SIGKILL (postgres: pg-down)
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
    pg-restart)   cmd_pg_restart ;;
    build)        cmd_build ;;
    up)           cmd_up ;;
    down)         cmd_down ;;
    status)       cmd_status ;;
    test)         cmd_test ;;
    test-env)     cmd_test_env "$@" ;;
    start|stop|restart|kill|pause|resume) cmd_service "$cmd" "$@" ;;
    logs)         cmd_logs "$@" ;;
    -h|--help|help) usage ;;
    "")           usage >&2; exit 2 ;;
    *)            printf 'stack: unknown command: %s\n\n' "$cmd" >&2; usage >&2; exit 2 ;;
  esac
}

# Sourcing the script (a test reusing its functions) defines everything and runs nothing.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
