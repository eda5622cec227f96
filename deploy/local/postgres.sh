# shellcheck shell=bash
# deploy/local/postgres.sh: how the local stack runs Postgres. A cluster of this checkout's own
# (initdb once) on 127.0.0.1:$SHOPMICRO_PG_PORT, with the databases catalog and orders, user
# postgres, trust auth. Sourced by stack.sh (not a script of its own); uses lib/common.sh.
#
# The verbs every component has (stack.sh's COMPONENTS table calls them; NAME is "postgres"):
#   postgres_start postgres_stop postgres_restart postgres_kill postgres_pause postgres_resume
#   postgres_status_line postgres_logs postgres_log_files
# and the stack's own commands: cmd_pg_up cmd_pg_down cmd_pg_restart (pg-up, pg-down, pg-restart).
# Files, in the run folder: pg/data, pg/sock, logs/postgres.log, pg.lock (pg_paths).

PG_BIN="${SHOPMICRO_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_CONF_NAME="shopmicro.conf"       # included from postgresql.conf, rewritten at every start
PG_DATABASES=(catalog orders)

# pg_paths: Postgres's paths in the run folder RUN (set_run_dir calls it).
pg_paths() {
  PG_DIR="$RUN/pg"
  PG_DATA="$PG_DIR/data"
  PG_SOCK="$PG_DIR/sock"
  PG_LOG="$LOGS/postgres.log"
}

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
    # Lines of your own, last so that they win: e.g. pg_stat_statements for a benchmark.
    if [[ -n ${SHOPMICRO_PG_EXTRA_CONF:-} ]]; then
      printf '%s\n' "# SHOPMICRO_PG_EXTRA_CONF" "$SHOPMICRO_PG_EXTRA_CONF"
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
  # The server outlives this script: it must not inherit the caller's open
  # files (a `flock LOCK bench/...` caller's lock would be held for as long
  # as the server runs, and every other waiter would wait for it).
  as_pg "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t 60 >/dev/null \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- ||
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

# pg_restart [fast|immediate]: fast (the default) ends every session and checkpoints; immediate
# is a crash as far as the sessions can tell (no checkpoint: crash recovery at the start).
pg_restart() {
  local mode=${1:-fast}
  [[ $mode == fast || $mode == immediate ]] || die "pg-restart: mode must be fast or immediate, not '$mode'"
  if ! pg_running; then
    say "postgres: not running; starting it"
    pg_up
    return
  fi
  pg_check_port_matches
  pg_resume_quietly
  pg_write_conf
  say "postgres: restarting (pid $PG_RUN_PID, -m $mode)"
  as_pg "$PG_BIN/pg_ctl" restart -D "$PG_DATA" -l "$PG_LOG" -m "$mode" -w -t 60 >/dev/null \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- ||
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
cmd_pg_restart() { pg_lock; pg_restart "$@"; pg_unlock; }

# ---------------------------------------------------------------------------
# The component verbs (stack.sh's start/stop/restart/kill/pause/resume/status/logs postgres)

postgres_start()   { cmd_pg_up; }
postgres_stop()    { cmd_pg_down; }
postgres_restart() { cmd_pg_restart; }
postgres_kill()    { pg_lock; pg_sigkill; pg_unlock; }
postgres_pause()   { pg_pause; }
postgres_resume()  { pg_resume; }

postgres_status_line() {
  if pg_running; then
    printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s data %s, log %s\n' postgres \
      "$(pg_is_paused && echo paused || echo running)" "$PG_RUN_PID" "$PG_RUN_PORT" \
      "$(rel "$PG_DATA")" "$(rel "$PG_LOG")"
  else
    printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s data %s\n' postgres stopped - "$PG_PORT" "$(rel "$PG_DATA")"
  fi
}

# postgres_log_files [NAME]: LOG_FILES += the log `logs` follows.
postgres_log_files() { LOG_FILES+=("$PG_LOG"); }
postgres_logs()      { follow_logs "$PG_LOG"; }
