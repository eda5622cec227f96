# shellcheck shell=bash
# deploy/local/services.sh: how the local stack runs its own services (catalog, order, the outbox
# relays of order's and of catalog's database, gateway):
# the SERVICES table, and starting each built binary in the background under setsid nohup, with
# its log in logs/<service>.log and its pid (and binary) in <service>.pid of the run folder.
# Sourced by stack.sh (not a script of its own); uses lib/common.sh.
#
# The verbs every component has (stack.sh's COMPONENTS table calls them; NAME is a service):
#   services_start services_stop services_restart services_kill services_pause services_resume
#   services_status_line services_logs services_log_files
# and services_names (the names of the table), services_up and services_down (every service, as
# `up` and `down` start and stop them).

# The services, one line each, started in this order by `up` and stopped in
# the reverse order by `down`. Fields, separated by '|':
#   name | binary, relative to the build dir | port variable=default | environment
# The port is the one `start` waits for: the gRPC or HTTP port, or for a relay (which serves no
# API) its admin port (/metrics, /healthz, /readyz). One relay program serves both outboxes: the
# second line is the same binary with another database and name (docs/events.md §3).
# Each consumer's <P>_CONSUMER_INSTANCE_ID is its static member id in its Kafka group (its name
# here, <name>-2 for the second replica): every replica of the stack shares one host, so the
# default, the host's name, would give two replicas one id (docs/operations.md).
# The environment is ';'-separated NAME=VALUE pairs. In a value, @PORT@ is this
# service's port and @VAR@ the value of any other variable, e.g.
# @SHOPMICRO_PG_PORT@ or @SHOPMICRO_CATALOG_PORT@ (every port variable gets its
# default before any line is read). @AUTH_JWKS@ is the local token issuer's public key set
# (auth.sh): a line naming it gets the issuer's keys made before it starts. @WEBHOOK_SECRET_FILE@
# is the run folder's webhook signing secret (secrets.sh), made the same way before a line naming
# it starts: the notification service and the notify-sink get the same file. Adding a service is
# one line, e.g.
#   "order | services/order/order | SHOPMICRO_ORDER_PORT=25052 | ORDER_LISTEN=127.0.0.1:@PORT@; ORDER_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=orders user=postgres; ORDER_CATALOG_ADDR=127.0.0.1:@SHOPMICRO_CATALOG_PORT@"
SERVICES=(
  "catalog | services/catalog/catalog | SHOPMICRO_CATALOG_PORT=25051 | CATALOG_LISTEN=127.0.0.1:@PORT@; CATALOG_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=catalog user=postgres; CATALOG_KAFKA_BROKERS=127.0.0.1:@SHOPMICRO_KAFKA_PORT@; CATALOG_CONSUMER_INSTANCE_ID=catalog; CATALOG_ADMIN_LISTEN=127.0.0.1:@SHOPMICRO_CATALOG_ADMIN_PORT@"
  "order | services/order/order | SHOPMICRO_ORDER_PORT=25052 | ORDER_LISTEN=127.0.0.1:@PORT@; ORDER_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=orders user=postgres; ORDER_CATALOG_ADDR=127.0.0.1:@SHOPMICRO_CATALOG_PORT@; ORDER_KAFKA_BROKERS=127.0.0.1:@SHOPMICRO_KAFKA_PORT@; ORDER_CONSUMER_INSTANCE_ID=order; ORDER_ADMIN_LISTEN=127.0.0.1:@SHOPMICRO_ORDER_ADMIN_PORT@"
  "relay | services/relay/relay | SHOPMICRO_RELAY_ADMIN_PORT=9464 | RELAY_ADMIN_LISTEN=127.0.0.1:@PORT@; RELAY_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=orders user=postgres; RELAY_KAFKA_BROKERS=127.0.0.1:@SHOPMICRO_KAFKA_PORT@"
  "relay-catalog | services/relay/relay | SHOPMICRO_RELAY_CATALOG_ADMIN_PORT=9465 | RELAY_NAME=relay-catalog; RELAY_ADMIN_LISTEN=127.0.0.1:@PORT@; RELAY_DB_DSN=host=127.0.0.1 port=@SHOPMICRO_PG_PORT@ dbname=catalog user=postgres; RELAY_KAFKA_BROKERS=127.0.0.1:@SHOPMICRO_KAFKA_PORT@"
  "notify-sink | services/notify-sink/notify-sink | SHOPMICRO_NOTIFY_SINK_PORT=8090 | NOTIFY_SINK_LISTEN=127.0.0.1:@PORT@; NOTIFY_WEBHOOK_SECRET_FILE=@WEBHOOK_SECRET_FILE@"
  "notification | services/notification/notification | SHOPMICRO_NOTIFY_ADMIN_PORT=9468 | NOTIFY_ADMIN_LISTEN=127.0.0.1:@PORT@; NOTIFY_KAFKA_BROKERS=127.0.0.1:@SHOPMICRO_KAFKA_PORT@; NOTIFY_CONSUMER_INSTANCE_ID=notification; NOTIFY_RABBITMQ_PORT=@SHOPMICRO_RABBITMQ_PORT@; NOTIFY_WEBHOOK_URL=http://127.0.0.1:@SHOPMICRO_NOTIFY_SINK_PORT@/webhooks; NOTIFY_WEBHOOK_SECRET_FILE=@WEBHOOK_SECRET_FILE@"
  "gateway | gateway/gateway | SHOPMICRO_GATEWAY_PORT=8080 | GATEWAY_LISTEN=127.0.0.1:@PORT@; GATEWAY_CATALOG_ADDR=127.0.0.1:@SHOPMICRO_CATALOG_PORT@; GATEWAY_ORDER_ADDR=127.0.0.1:@SHOPMICRO_ORDER_PORT@; GATEWAY_ADMIN_LISTEN=127.0.0.1:@SHOPMICRO_GATEWAY_ADMIN_PORT@; GATEWAY_JWKS_FILE=@AUTH_JWKS@; GATEWAY_JWT_ISSUER=@AUTH_ISSUER@; GATEWAY_JWT_AUDIENCE=@AUTH_AUDIENCE@; GATEWAY_CORS_ORIGINS=http://127.0.0.1:@SHOPMICRO_API_DOCS_PORT@"
)
SERVICE_START_TIMEOUT=10   # seconds until the port must accept TCP

# SHOPMICRO_REPLICAS=2 (default 1): a second replica of catalog, order, both relays and the
# notification service, named <name>-2, each on ports of its own (the first's default + 10);
# order and the gateway are pointed at both replicas of each upstream (ipv4:a,b: round robin over
# health-checked addresses, docs/architecture.md "Replicas"). The relays share their outbox (rows
# claimed with SKIP LOCKED) and the consumers their topics' partitions (their Kafka groups).
REPLICAS=${SHOPMICRO_REPLICAS:-1}
[[ $REPLICAS == 1 || $REPLICAS == 2 ]] || die "SHOPMICRO_REPLICAS='$REPLICAS': 1 or 2"
REPLICA_PORT_SPECS=()   # the replicas' admin ports (stack.sh gives them to set_port_vars)
# The admin ports that no SERVICES line's port field names (stack.sh gives them to set_port_vars).
ADMIN_PORT_SPECS=("SHOPMICRO_CATALOG_ADMIN_PORT=9466" "SHOPMICRO_ORDER_ADMIN_PORT=9467"
                  "SHOPMICRO_GATEWAY_ADMIN_PORT=9469")
admin_port_default() { local s; for s in "${ADMIN_PORT_SPECS[@]}"; do [[ ${s%%=*} == "$1" ]] && echo "${s#*=}"; done; return 0; }
REPLICATED=(catalog order relay relay-catalog notification)

# replica_var VAR: the second replica's variable of a port variable (SHOPMICRO_CATALOG_PORT ->
# SHOPMICRO_CATALOG_2_PORT).
replica_var() { printf '%s\n' "${1%_PORT}_2_PORT"; }

# replica_admin LINE: the admin port variable LINE names in its environment besides its own port
# (catalog's and order's), or nothing.
replica_admin() {
  local spec envs
  IFS='|' read -r _ _ spec envs <<<"$1"
  trim spec "$spec"
  [[ $envs =~ @(SHOPMICRO_[A-Z_]*_ADMIN_PORT)@ && ${BASH_REMATCH[1]} != "${spec%%=*}" ]] &&
    printf '%s\n' "${BASH_REMATCH[1]}"
  return 0
}

# replica_line LINE: the SERVICES line of LINE's second replica: name-2, its own ports (+10).
replica_line() {
  local name bin spec envs var admin
  IFS='|' read -r name bin spec envs <<<"$1"
  trim name "$name"; trim bin "$bin"; trim spec "$spec"
  var=${spec%%=*}
  envs=${envs//RELAY_NAME=$name/RELAY_NAME=$name-2}
  # Its own static member id in the consumer group (the first's is its name): two replicas under
  # one id would fence each other.
  envs=${envs//_CONSUMER_INSTANCE_ID=$name;/_CONSUMER_INSTANCE_ID=$name-2;}
  [[ $name == relay ]] && envs=" RELAY_NAME=relay-2;$envs"
  admin=$(replica_admin "$1")
  [[ -n $admin ]] && envs=${envs//@$admin@/@$(replica_var "$admin")@}
  printf '%s-2 | %s | %s=%s | %s\n' "$name" "$bin" "$(replica_var "$var")" $(( ${spec#*=} + 10 )) "$envs"
}

# replica_targets LINE: LINE with both replicas' addresses where it names the catalog or order
# (ipv4:127.0.0.1:A,127.0.0.1:B).
replica_targets() {
  local line=$1 var
  for var in SHOPMICRO_CATALOG_PORT SHOPMICRO_ORDER_PORT; do
    line=${line//=127.0.0.1:@$var@/=ipv4:127.0.0.1:@$var@,127.0.0.1:@$(replica_var "$var")@}
  done
  printf '%s\n' "$line"
}

if (( REPLICAS == 2 )); then
  replicated=()
  for line in "${SERVICES[@]}"; do
    IFS='|' read -r name _ <<<"$line"
    trim name "$name"
    line=$(replica_targets "$line")
    replicated+=("$line")
    [[ " ${REPLICATED[*]} " == *" $name "* ]] || continue
    replicated+=("$(replica_line "$line")")
    admin=$(replica_admin "$line")
    # the replica's admin port: the first's default (stack.sh's list) + 10
    if [[ -n $admin ]]; then
      REPLICA_PORT_SPECS+=("$(replica_var "$admin")=$(( $(admin_port_default "$admin") + 10 ))")
    fi
  done
  SERVICES=("${replicated[@]}")
  unset replicated line name admin
fi

# svc_load LINE: parse one SERVICES line into S_NAME S_BIN S_PORT_VAR S_PORT
# S_ENV (array of NAME=VALUE with @...@ expanded), S_PID_FILE and S_LOG.
svc_load() {
  local name bin spec envs kv
  auth_paths
  webhook_secret_paths
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
  [[ $1 == *@AUTH_JWKS@* ]] && auth_keys_ensure
  [[ $1 == *@WEBHOOK_SECRET_FILE@* ]] && webhook_secret_ensure
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

# ---------------------------------------------------------------------------
# The component verbs (stack.sh's start/stop/restart/kill/pause/resume/status/logs <service>)

services_names() {
  local line name
  for line in "${SERVICES[@]}"; do
    IFS='|' read -r name _ <<<"$line"
    trim name "$name"
    printf '%s\n' "$name"
  done
}

# `start <svc>` fails when the service is not built; `up` skips it.
services_start()   { svc_line "$1"; svc_start "$SVC_LINE" 1; }
services_stop()    { svc_line "$1"; svc_stop "$SVC_LINE"; }
services_restart() { svc_line "$1"; svc_stop "$SVC_LINE"; svc_start "$SVC_LINE" 1; }
services_kill()    { svc_line "$1"; svc_sigkill "$SVC_LINE"; }
services_pause()   { svc_line "$1"; svc_pause "$SVC_LINE"; }
services_resume()  { svc_line "$1"; svc_resume "$SVC_LINE"; }

# In table order; down stops them in the reverse order.
services_up() {
  local line
  for line in "${SERVICES[@]}"; do svc_start "$line"; done
}
services_down() {
  local i
  for (( i = ${#SERVICES[@]} - 1; i >= 0; i-- )); do svc_stop "${SERVICES[i]}"; done
}

# The line's admin port besides its own (catalog's, order's, the gateway's), as "admin
# 127.0.0.1:PORT, ", or nothing.
status_admin() {
  local var
  var=$(replica_admin "$1")
  [[ -n $var ]] && printf 'admin 127.0.0.1:%s, ' "${!var}"
  return 0
}

services_status_line() {
  local adm
  svc_line "$1"
  svc_load "$SVC_LINE"
  svc_find_pid
  adm=$(status_admin "$SVC_LINE")
  if [[ -n $S_PID ]]; then
    printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s %slog %s, binary %s%s\n' "$S_NAME" \
      "$(is_paused "$S_PID" && echo paused || echo running)" "$S_PID" "$S_PORT" "$adm" \
      "$(rel "$S_LOG")" "$(rel "$S_RUN_BIN")" "$( (( S_STALE )) && echo ' (rebuilt since start)')"
  elif [[ -x $S_BIN && -n $adm ]]; then
    printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s %s\n' "$S_NAME" stopped - "$S_PORT" "${adm%, }"
  elif [[ -x $S_BIN ]]; then
    printf '%-14s %-8s pid %-8s 127.0.0.1:%s\n' "$S_NAME" stopped - "$S_PORT"
  else
    printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s %s(%s not built)\n' "$S_NAME" stopped - "$S_PORT" "$adm" "$(rel "$S_BIN")"
  fi
}

# services_log_files [NAME]: LOG_FILES += NAME's log; with no NAME, the log of every service that
# is built or has a log.
services_log_files() {
  local line
  if (( $# > 0 )); then
    svc_line "$1"
    svc_load "$SVC_LINE"
    LOG_FILES+=("$S_LOG")
    return 0
  fi
  for line in "${SERVICES[@]}"; do
    svc_load "$line"
    if [[ -e $S_LOG || -x $S_BIN ]]; then LOG_FILES+=("$S_LOG"); fi
  done
}
services_logs() { LOG_FILES=(); services_log_files "$1"; follow_logs "${LOG_FILES[@]}"; }
