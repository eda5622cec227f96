#!/usr/bin/env bash
# bench/lib.sh: helpers the bench/run_*.sh scripts share. Source it after setting ROOT (the
# checkout); the helpers that need them also read TMP, PG_PORT and PSQL/PGB (set by pg_clients).
# Sourcing it sets STACK (deploy/local/stack.sh) and BUILD_DIR (the bench tree:
# $SHOPMICRO_BENCH_BUILD_DIR, default build-bench/, as an absolute path). Nothing here runs on
# its own.

STACK=$ROOT/deploy/local/stack.sh
BUILD_DIR=$(realpath -m -- "${SHOPMICRO_BENCH_BUILD_DIR:-$ROOT/build-bench}")

# ---- messages and arguments

# say MSG...: a line of the script's own, told apart from the tools' output it shows.
say() { printf '[bench] %s\n' "$*"; }
# die MSG...: the error on stderr and exit 1; the scripts' EXIT trap (on_exit) cleans up.
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }

# usage: the calling script's header comment (from its line 2 to the first line that is not a
# comment), the one place its options are described.
usage() { sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }

# arg_error MSG: "run_x_bench: MSG" on stderr, exit 2 (a bad command line, not a failed run).
arg_error() { local me=${0##*/}; printf '%s: %s\n' "${me%.sh}" "$*" >&2; exit 2; }

# unknown_arg ARG: arg_error for an option the script does not know, with the usage.
unknown_arg() { local me=${0##*/}; printf '%s: unknown argument %s\n' "${me%.sh}" "$1" >&2; usage >&2; exit 2; }

# need_env PREFIX OPTION NAME=VALUE...: arg_error unless every setting given with OPTION is one
# of PREFIX_NAME=VALUE (only the service that reads PREFIX_ settings is meant to get them).
need_env() {
  local prefix=$1 opt=$2 kv
  shift 2
  for kv; do
    [[ $kv =~ ^${prefix}_[A-Z_]+=.*$ ]] || arg_error "$opt '$kv' is not ${prefix}_NAME=VALUE"
  done
}

# need_positive VALUE...: arg_error unless every VALUE is an integer > 0.
need_positive() {
  local v
  for v; do
    if ! [[ $v =~ ^[0-9]+$ ]] || (( v == 0 )); then arg_error "'$v' is not a positive integer"; fi
  done
}

# exe_path OPTION PATH: PATH made absolute (the binary an option names); arg_error when it is not
# an executable. Use as a plain assignment, v=$(exe_path ...), so that set -e stops on the error.
exe_path() {
  [[ -x $2 ]] || arg_error "$1: $2 is not an executable"
  printf '%s/%s\n' "$(cd "$(dirname "$2")" && pwd -P)" "$(basename "$2")"
}

# dir_path OPTION DIR: DIR made absolute (the directory an option names); arg_error when it is
# not a directory. Use as exe_path is used.
dir_path() {
  [[ -d $2 ]] || arg_error "$1: $2 is not a directory"
  (cd "$2" && pwd -P)
}

# phase_bins OPTION PREFIX [LABEL=]PATH...: PHASE_LABEL and PHASE_BIN, one entry per binary (the
# label given, or PREFIX1, PREFIX2, ...; exe_path's path). For the scripts that measure binaries
# in turn (--order-bin, --gateway-bin).
phase_bins() { phase_list "$1" "$2" exe_path "${@:3}"; }

# phase_dirs OPTION PREFIX [LABEL=]DIR...: the same with dir_path, PHASE_BIN holding each
# directory (a build tree whose binaries a phase runs: --services-dir).
phase_dirs() { phase_list "$1" "$2" dir_path "${@:3}"; }

# phase_list OPTION PREFIX CHECK [LABEL=]X...: phase_bins and phase_dirs, X checked and made
# absolute by CHECK OPTION X.
phase_list() {
  local opt=$1 prefix=$2 check=$3 b l
  shift 3
  PHASE_LABEL=() PHASE_BIN=()
  for b; do
    l=$prefix$(( ${#PHASE_LABEL[@]} + 1 ))
    [[ $b == *=* ]] && { l=${b%%=*}; b=${b#*=}; }
    b=$("$check" "$opt" "$b")
    PHASE_LABEL+=("$l") PHASE_BIN+=("$b")
  done
}

# test_env_rerun VAR ARG...: unless VAR is set, runs the calling script again with VAR=1 and the
# same ARGs under `deploy/local/stack.sh test-env` (a Postgres of its own, free ports for the
# brokers and every service, a run folder in $TMPDIR, all gone at exit) and does not return;
# inside that run it returns at once. For the scripts that start the whole stack.
test_env_rerun() {
  local var=$1
  shift
  [[ -z ${!var:-} ]] || return 0
  export "$var=1"
  exec "$ROOT/deploy/local/stack.sh" test-env "$ROOT/bench/${0##*/}" "$@"
}

# say_machine: the "==== machine" lines every run starts with.
say_machine() {
  echo "==== machine"
  say "nproc: $(nproc)  ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
  say "loadavg before the run: $(loadavg)"
}

# say_tree: the commit and any uncommitted files, without which a figure cannot be compared.
say_tree() {
  say "tree: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || printf ' + uncommitted changes in: %s' "$(git -C "$ROOT" diff --name-only HEAD -- | tr '\n' ' ')")"
}

# loadavg, load1: the 1/5/15-minute load averages, the 1-minute one; printed beside each phase
# because other work on a 2-core machine moves the figures.
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# since T0 [DECIMALS]: seconds from $EPOCHREALTIME value T0 to now (default 2 decimals).
since() { awk -v a="$1" -v b="$EPOCHREALTIME" -v d="${2:-2}" 'BEGIN { printf "%." d "f", b - a }'; }

# result_field LINE KEY: the value of KEY=... in a "RESULT k=v ..." line.
result_field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" ${1#RESULT}"; }

# ratio A B [DECIMALS]: A/B (default 2 decimals), "?" when B is not > 0.
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (b > 0) printf "%." d "f", a / b; else print "?" }'; }

# goal_met VALUE OP TARGET: "met" or "NOT met", OP being >= or <=.
goal_met() {
  awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { ok = (op == "<=") ? (v <= t) : (v >= t); print ok ? "met" : "NOT met" }'
}

# per_cpu_ratio A CORES_A B CORES_B: (A per core) / (B per core), "?" without both core counts;
# other work on the machine takes CPU from whichever phase it overlaps, so this is the fairer ratio.
per_cpu_ratio() {
  awk -v a="$1" -v ca="$2" -v b="$3" -v cb="$4" 'BEGIN { if (ca > 0 && cb > 0) printf "%.3f", (a / ca) / (b / cb); else print "?" }'
}

# ---- bearer tokens (the gateway's front door: gateway/door.h, docs/gateway.md)

# The token every bench sends: subject c1 (the orders the benches place are c1's: they name
# customer c1 or none), the scopes of every route they call, valid for a day (longer than any
# run). Issuer and audience of the gateways the benches start themselves.
BENCH_SUB=c1
BENCH_SCOPE="catalog:write orders:write orders:read"
BENCH_ISSUER=shopmicro-bench
BENCH_AUDIENCE=shopmicro-gateway
BENCH_TOKEN_TTL=86400

# bench_auth DIR | bench_auth --stack: TOKEN (signed for $BENCH_SUB with $BENCH_SCOPE), AUTH_HDR
# (curl's -H option sending it) and GW_AUTH_ENV, the gateway settings that verify it, with the rate
# limits off: a bench that drives load measures the request path, not the limiter
# (bench/ratelimit_bench measures that).
#   DIR      a gateway the script starts itself: a key pair of the bench's own made in DIR with
#            $BUILD_DIR/gateway/shopmicro-jwt (build it first); GW_AUTH_ENV is GATEWAY_JWKS_FILE,
#            GATEWAY_JWT_ISSUER, GATEWAY_JWT_AUDIENCE and GATEWAY_RATE_LIMITS=off.
#   --stack  a gateway that `stack.sh start` starts (its SERVICES line already names the run
#            folder's JWKS, issuer and audience): the token is `stack.sh token`'s, signed with the
#            run folder's key (made when missing), and GW_AUTH_ENV=(GATEWAY_RATE_LIMITS=off) is
#            also exported, so that stack.sh start hands it on. Call it before starting it.
bench_auth() {
  local jwt=$BUILD_DIR/gateway/shopmicro-jwt dir=$1
  [[ -x $jwt ]] || die "bench_auth: $jwt is not built (bench_build shopmicro-jwt)"
  if [[ $dir == --stack ]]; then
    SHOPMICRO_BUILD_DIR=$BUILD_DIR "$STACK" auth-keys >/dev/null || die "stack.sh auth-keys failed"
    TOKEN=$(SHOPMICRO_BUILD_DIR=$BUILD_DIR "$STACK" token --sub "$BENCH_SUB" --scope "$BENCH_SCOPE" \
      --ttl "$BENCH_TOKEN_TTL") || die "stack.sh token failed"
    GW_AUTH_ENV=(GATEWAY_RATE_LIMITS=off)
    export GATEWAY_RATE_LIMITS=off
  else
    mkdir -p -m 700 "$dir"
    "$jwt" keygen --key "$dir/bench-key.pem" --jwks "$dir/bench-jwks.json" >/dev/null ||
      die "shopmicro-jwt keygen failed"
    TOKEN=$("$jwt" sign --key "$dir/bench-key.pem" --iss "$BENCH_ISSUER" --aud "$BENCH_AUDIENCE" \
      --sub "$BENCH_SUB" --scope "$BENCH_SCOPE" --ttl "$BENCH_TOKEN_TTL") || die "shopmicro-jwt sign failed"
    GW_AUTH_ENV=(GATEWAY_JWKS_FILE="$dir/bench-jwks.json" GATEWAY_JWT_ISSUER="$BENCH_ISSUER"
                 GATEWAY_JWT_AUDIENCE="$BENCH_AUDIENCE" GATEWAY_RATE_LIMITS=off)
  fi
  [[ -n $TOKEN ]] || die "bench_auth: no token"
  # shellcheck disable=SC2034  # for the scripts' curl calls
  AUTH_HDR=(-H "Authorization: Bearer $TOKEN")
}

# ---- build and processes

# bench_build TARGET...: configures $BUILD_DIR (RelWithDebInfo, like every benchmark) and builds
# the targets; the logs stay in $TMP unless a step fails.
bench_build() {
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$TMP/cmake.log" 2>&1 ||
    { cat "$TMP/cmake.log" >&2; die "cmake configure failed"; }
  ninja -C "$BUILD_DIR" "$@" >"$TMP/ninja.log" 2>&1 ||
    { cat "$TMP/ninja.log" >&2; die "build failed"; }
}

# free_port: a TCP port of 127.0.0.1 that is free now (the kernel's choice), for a binary that
# is started next; every run gets its own, so runs beside other checkouts do not collide.
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# port_open PORT: true when something accepts TCP on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PIDVAR PORT SECONDS WHAT: until PORT accepts; dies if the process whose pid is in
# variable PIDVAR exits first, and empties PIDVAR then (nothing is left to stop).
wait_port() {
  local pid=${!1} port=$2 tenths=$(( $3 * 10 )) i
  for (( i = 0; i < tenths; i++ )); do
    kill -0 "$pid" 2>/dev/null || { printf -v "$1" '%s' ""; die "$4 exited during start-up"; }
    port_open "$port" && return 0
    sleep 0.1
  done
  die "$4 does not accept TCP on 127.0.0.1:$port after $3 s"
}

# stop_pid PID NAME [SECONDS]: SIGTERM, up to SECONDS (10) for it to exit, then SIGKILL; reaps it
# and returns its exit status (0 without a PID).
stop_pid() {
  local pid=$1 secs=${3:-10} i rc=0
  [[ -n $pid ]] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for (( i = 0; i < secs * 10; i++ )); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "$2 (pid $pid) ignored SIGTERM for $secs s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || rc=$?
  return "$rc"
}

# stop_proc NAME PIDVAR: stop_pid with 15 s of grace, the variable PIDVAR emptied; returns 1,
# saying so, when the process did not exit 0 by itself (a service stopped by SIGTERM must).
stop_proc() {
  local name=$1 var=$2 pid=${!2} rc=0
  stop_pid "$pid" "$name" 15 || rc=$?
  printf -v "$var" '%s' ""
  (( rc == 0 )) || { say "$name (pid $pid) exited with status $rc"; return 1; }
}

# end_pids PID...: SIGTERM and reap each, whatever they are doing (a phase cut short by a failure).
end_pids() {
  local p
  for p; do
    kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  return 0
}

# tail_logs LINES DIR NAME...: the last LINES lines of each non-empty DIR/NAME.log on stderr, for
# a run that failed.
tail_logs() {
  local lines=$1 dir=$2 n
  shift 2
  for n; do
    [[ -s $dir/$n.log ]] || continue
    say "last lines of the $n log:"
    tail -n "$lines" "$dir/$n.log" | sed 's/^/    /' >&2
  done
}

# on_exit FUNC: FUNC RC runs on any exit (Ctrl-C and SIGTERM exit 130), with errexit off so that
# it cleans up as much as it can; then $TMP is removed and the script exits RC.
on_exit() {
  BENCH_CLEANUP=$1
  trap bench_exit EXIT
  trap 'exit 130' INT TERM
}
# shellcheck disable=SC2317  # invoked by the EXIT trap
bench_exit() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  "$BENCH_CLEANUP" "$rc"
  [[ -z ${TMP:-} ]] || rm -rf "$TMP"
  exit "$rc"
}

# ---- Postgres

# pg_tool NAME: the Postgres 15 tool (or $SHOPMICRO_PG_BIN's), else the one on PATH.
pg_tool() {
  local dir=${SHOPMICRO_PG_BIN:-/usr/lib/postgresql/15/bin}
  if [[ -x $dir/$1 ]]; then echo "$dir/$1"; else command -v "$1" || echo "$1"; fi
}

# pg_clients PORT: PSQL and PGB, psql (stopping at the first error) and pgbench as the superuser
# over TCP to the Postgres on 127.0.0.1:PORT.
pg_clients() {
  PSQL=("$(pg_tool psql)" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres)
  PGB=("$(pg_tool pgbench)" -h 127.0.0.1 -p "$1" -U postgres)
}

# sql DB QUERY: QUERY's rows in database DB, unaligned, without headers.
sql() { "${PSQL[@]}" -d "$1" -tAc "$2"; }

# pg_start_time: when the postmaster started; a change during a run means a restart by
# somebody else, which makes the figures suspect.
pg_start_time() { sql postgres "SELECT pg_postmaster_start_time()"; }

# warn_if_pg_restarted WIDTH: the summary's WARNING line (label padded to WIDTH) when the
# postmaster is not the one of $PG_STARTED.
warn_if_pg_restarted() {
  [[ $(pg_start_time) == "$PG_STARTED" ]] ||
    printf '%-*s%s\n' "$1" WARNING "Postgres was restarted during the run (by another test?): the figures are suspect"
}

# other_pg_sessions DB...: client sessions on this Postgres outside the DBs, i.e. other test runs,
# which skew the figures ("?" when the query fails).
other_pg_sessions() {
  local dbs
  dbs=$(printf "'%s'," "$@")
  sql postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
    AND pid <> pg_backend_pid() AND datname NOT IN (${dbs%,})" 2>/dev/null || echo '?'
}

# pg_up_waiting SECONDS: stack.sh pg-up; while another checkout's cluster (or a concurrent
# pg-up) holds the port, it retries every 15 s for up to SECONDS.
pg_up_waiting() {
  local t0=$SECONDS out
  while :; do
    if out=$("$ROOT/deploy/local/stack.sh" pg-up 2>&1); then
      printf '%s\n' "$out"
      return 0
    fi
    if grep -q 'in use by another process\|timed out waiting for' <<<"$out" &&
       (( SECONDS - t0 + 15 <= $1 )); then
      say "port $PG_PORT is busy ($(grep -m1 -o 'in use by another process\|timed out waiting for[^:]*' <<<"$out")); retrying in 15 s ($(( SECONDS - t0 )) of $1 s waited)"
      sleep 15
      continue
    fi
    printf '%s\n' "$out" >&2
    die "deploy/local/stack.sh pg-up failed"
  done
}

# catalog_start DB VAR=VALUE...: the real catalog binary ($CAT_BIN if set, e.g. an older build
# for a before/after comparison) on 127.0.0.1:$CAT_PORT against database DB, without Kafka, the
# VARs on top (log appended to $TMP/catalog.log); CAT_PID once it accepts.
catalog_start() {
  local db=$1
  shift
  env CATALOG_LISTEN="127.0.0.1:$CAT_PORT" CATALOG_KAFKA_BROKERS=none \
    CATALOG_DB_DSN="host=127.0.0.1 port=$PG_PORT dbname=$db user=postgres" "$@" \
    "${CAT_BIN:-$BUILD_DIR/services/catalog/catalog}" >>"$TMP/catalog.log" 2>&1 </dev/null &
  # shellcheck disable=SC2034  # the scripts stop it
  CAT_PID=$!
  wait_port CAT_PID "$CAT_PORT" 15 catalog
}

# ---- pgbench, the reference the services' figures are compared with

# pgbench_init DB SCALE: pgbench -i of DB (an existing, empty database).
pgbench_init() {
  "${PGB[@]}" -i -q -s "$2" "$1" >"$TMP/pgbench-init.log" 2>&1 ||
    { cat "$TMP/pgbench-init.log" >&2; die "pgbench -i failed"; }
}

# pgbench_ref_db DB SCALE REINIT: DB initialised at SCALE, kept from an earlier run when it is
# complete (initialising takes longer than a run) unless REINIT is 1.
pgbench_ref_db() {
  local db=$1 scale=$2 reinit=$3 have rows
  have=$(sql postgres "SELECT 1 FROM pg_database WHERE datname = '$db'")
  if [[ -n $have ]] && (( ! reinit )); then
    rows=$(sql "$db" "SELECT count(*) FROM pgbench_accounts" 2>/dev/null || echo 0)
    (( rows == scale * 100000 )) || have=""
  fi
  if [[ -z $have ]] || (( reinit )); then
    have=$(sql postgres "SELECT 1 FROM pg_database WHERE datname = '$db'")
    say "initialising: pgbench -i -s $scale $db"
    [[ -z $have ]] || "${PSQL[@]}" -d postgres -c "DROP DATABASE \"$db\" WITH (FORCE)"
    "${PSQL[@]}" -d postgres -c "CREATE DATABASE \"$db\""
    pgbench_init "$db" "$scale"
  else
    say "reusing $db (already initialised at scale $scale)"
  fi
}

# pgbench_run TYPE DB SECONDS DELAY WINDOW STYLE: pgbench TYPE (-S or -N) -M prepared -c 4 -j 2
# for SECONDS on DB, watched as watched_run does; the outputs in $TMP/pgbench.log and
# $TMP/watch.log (the caller shows what it wants of them), then pgbench_results reads them.
# The sessions of $OWN_DBS are not "other".
pgbench_run() {
  local type=$1 db=$2 secs=$3
  say "pgbench $type -M prepared -c 4 -j 2 -T $secs -h 127.0.0.1 -p $PG_PORT $db"
  say "other sessions on this Postgres: $(other_pg_sessions "${OWN_DBS[@]}"); loadavg $(load1)"
  watched_run pgbench "$TMP/pgbench.log" "$6" "postgres=$db" "$4" "$5" -- \
    "${PGB[@]}" "$type" -M prepared -c 4 -j 2 -T "$secs" "$db"
}

# pgbench_results: PGB_TPS (dies without one) and PGB_OWN, the cores it and its backends used.
pgbench_results() {
  # shellcheck disable=SC2034  # for the scripts' summaries
  PGB_OWN=$(own_cores "$TMP/watch.log")
  PGB_TPS=$(sed -n 's/^tps = \([0-9.]*\).*without initial connection time.*/\1/p' "$TMP/pgbench.log")
  [[ -n $PGB_TPS ]] || die "no tps line in the pgbench output"
}

# ---- CPU: where a phase's time went (a 2-core machine shared with other work)

# proc_ticks [-c] PID...: "pid ticks" per live process: user+system CPU clock ticks (all threads;
# -c: plus those of its children that exited and were waited for, e.g. Postgres's backends).
proc_ticks() {
  local p st kids=0
  if [[ ${1:-} == -c ]]; then kids=1; shift; fi
  for p; do
    st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    st=${st##*) }
    # after "comm)", field 1 is state; utime, stime, cutime and cstime are fields 12 to 15
    awk -v p="$p" -v kids="$kids" '{ t = $12 + $13; if (kids) t += $14 + $15; print p, t }' <<<"$st"
  done
}

# proc_cs PID...: "pid switches" per live process: voluntary + involuntary context switches,
# summed over its threads.
proc_cs() {
  local p
  for p; do
    cat /proc/"$p"/task/*/status 2>/dev/null |
      awk -v p="$p" '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { if (NR) print p, n }'
  done
}

# nap S: sleeps S seconds (fractions allowed) without a process: read's timeout on a FIFO that
# never has data (opened read-write, so never at its end). For polls every few tens of
# milliseconds during a measurement, where a sleep process per look costs CPU that the
# programs measured want.
nap() {
  if [[ -z ${NAP_FD:-} ]]; then
    local f
    f=$(mktemp -u "${TMPDIR:-/tmp}/bench-nap.XXXXXX") && mkfifo "$f" || return 1
    exec {NAP_FD}<>"$f"
    rm -f "$f"
  fi
  read -r -t "$1" -u "$NAP_FD" _ || true
}

# cpu_snap VAR: the machine's CPU counters from /proc/stat into VAR;
# cpu_since VAR: how busy the machine has been since that snapshot.
cpu_snap() { local l; read -r l </proc/stat; printf -v "$1" '%s' "${l#cpu }"; }
cpu_since() {
  local now
  cpu_snap now
  awk -v a="${!1}" -v b="$now" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    for (i = 1; i <= 8; i++) { d[i] = y[i] - x[i]; t += d[i] }
    if (t <= 0) t = 1
    printf "busy %.0f%% (user %.0f%%, sys+irq %.0f%%), idle %.0f%%, steal %.1f%%",
      100 * (t - d[4] - d[5] - d[8]) / t, 100 * (d[1] + d[2]) / t,
      100 * (d[3] + d[6] + d[7]) / t, 100 * (d[4] + d[5]) / t, 100 * d[8] / t }'
}

# watch_cpu STYLE LABEL=DB[,LABEL=DB...] DELAY WINDOW LABEL=PID...: after DELAY s, for WINDOW s:
# how busy the machine was and the cores the benchmark's own processes used (the PIDs, and the
# Postgres backends of each DB under its LABEL); the rest was somebody else's work. STYLE:
# "total" ("1.20 of 2 cores"), "split" (with more than one label: "1.20 (a 0.50, b 0.70) of 2
# cores") or "named" ("1.20 of 2 cores (a 0.50, b 0.70)", every label, and a line of the PIDs'
# context switches per second).
watch_cpu() {
  # shellcheck disable=SC2034  # c0 is read through ${!1} in cpu_since
  local style=$1 dbs=$2 delay=$3 window=$4 c0 t0 t1 s0="" s1="" lp="" labels="" a p d
  shift 4
  sleep "$delay"
  local -a pids=() own_pids=() spec=()
  local -A dblabel=()
  for a; do pids+=("${a#*=}"); lp+="${a#*=} ${a%%=*}"$'\n'; labels+="${a%%=*} "; done
  own_pids=("${pids[@]}")
  IFS=',' read -r -a spec <<<"$dbs"
  for a in "${spec[@]}"; do dblabel[${a#*=}]=${a%%=*}; labels+="${a%%=*} "; done
  # One query for all databases: the window must end before the load does.
  while IFS='|' read -r p d; do
    [[ -n $p ]] && { pids+=("$p"); lp+="$p ${dblabel[$d]:-postgres}"$'\n'; }
  done < <(sql postgres "SELECT pid, datname FROM pg_stat_activity
    WHERE datname = ANY (string_to_array('$(printf '%s,' "${!dblabel[@]}")', ',')) AND pid <> pg_backend_pid()")
  cpu_snap c0
  t0=$(proc_ticks "${pids[@]}")
  [[ $style != named ]] || s0=$(proc_cs "${own_pids[@]}")
  sleep "$window"
  t1=$(proc_ticks "${pids[@]}")
  [[ $style != named ]] || s1=$(proc_cs "${own_pids[@]}")
  # Only processes alive at both ends count (one that ended took its ticks along).
  say "machine CPU: $(cpu_since c0); the benchmark's own processes: $(awk -v hz="$(getconf CLK_TCK)" \
    -v w="$window" -v a="$t0" -v b="$t1" -v l="$lp" -v style="$style" -v labels="$labels" -v ncpu="$(nproc)" 'BEGIN {
      n = split(l, x, "\n"); for (i = 1; i <= n; i++) { split(x[i], f, " "); if (f[1] != "") lab[f[1]] = f[2] }
      n = split(a, x, "\n"); for (i = 1; i <= n; i++) { split(x[i], f, " "); s[f[1]] = f[2] }
      n = split(b, y, "\n"); for (i = 1; i <= n; i++) {
        split(y[i], f, " "); if (!(f[1] in s)) continue
        dd = f[2] - s[f[1]]; d += dd; L = lab[f[1]]
        if (!(L in per)) order[++m] = L
        per[L] += dd
      }
      printf "%.2f", d / hz / w
      if (style == "split" && m > 1) {
        printf " ("; for (i = 1; i <= m; i++) printf "%s%s %.2f", (i > 1 ? ", " : ""), order[i], per[order[i]] / hz / w; printf ")" }
      printf " of %d cores", ncpu
      if (style == "named") {
        k = split(labels, nm, " ")
        printf " ("; for (i = 1; i <= k; i++) printf "%s%s %.2f", (i > 1 ? ", " : ""), nm[i], per[nm[i]] / hz / w; printf ")" }
    }')"
  [[ $style != named ]] || awk -v w="$window" -v a="$s0" -v b="$s1" -v l="$lp" -v own="${#own_pids[@]}" 'BEGIN {
    n = split(a, x, "\n"); for (i = 1; i <= n; i++) { split(x[i], f, " "); s[f[1]] = f[2] }
    n = split(b, y, "\n"); for (i = 1; i <= n; i++) { split(y[i], f, " "); if (f[1] in s) d[f[1]] = f[2] - s[f[1]] }
    split(l, x, "\n")
    for (i = 1; i <= own; i++) { split(x[i], f, " "); out = out sprintf("%s%s %.0f", i > 1 ? ", " : "", f[2], (f[1] in d) ? d[f[1]] / w : 0) }
    printf "[bench] context switches per second (all threads): %s\n", out }'
}

# watched_run NAME LOG STYLE DBS DELAY WINDOW [LABEL=PID...] -- CMD...: CMD in the background
# (stdout and stderr into LOG), watch_cpu STYLE DBS DELAY WINDOW NAME=its-pid LABEL=PID... beside
# it (into $TMP/watch.log); dies showing LOG when CMD fails. run_pid and watch_pid are theirs
# while they run, for the scripts' cleanup.
watched_run() {
  local name=$1 log=$2 style=$3 dbs=$4 delay=$5 window=$6
  local -a also=()
  shift 6
  while [[ $1 != -- ]]; do also+=("$1"); shift; done
  shift
  "$@" >"$log" 2>&1 &
  run_pid=$!
  watch_cpu "$style" "$dbs" "$delay" "$window" "$name=$run_pid" ${also[@]+"${also[@]}"} >"$TMP/watch.log" &
  watch_pid=$!
  wait "$run_pid" || { cat "$log"; die "$name failed"; }
  run_pid=""
  wait "$watch_pid" || true
  watch_pid=""
}

# per_request WATCH_LOG RATE [UNIT]: CPU microseconds and context switches per UNIT (default
# "request") of each process of a "named" watch_cpu report, at RATE units per second.
per_request() {
  awk -v r="$2" -v unit="${3:-request}" '
    /own processes:/ { sub(/.*cores \(/, ""); sub(/\)$/, ""); n = split($0, f, ", ")
      for (i = 1; i <= n; i++) { split(f[i], kv, " "); cpu = cpu sprintf("%s%s %.0f", i > 1 ? ", " : "", kv[1], kv[2] * 1e6 / r); tot += kv[2] } }
    /context switches/ { sub(/.*threads\): /, ""); n = split($0, f, ", ")
      for (i = 1; i <= n; i++) { split(f[i], kv, " "); cs = cs sprintf("%s%s %.1f", i > 1 ? ", " : "", kv[1], kv[2] / r) } }
    END { if (cpu != "") printf "%-24s %s (total %.0f)\n", "CPU us per " unit, cpu, tot * 1e6 / r
          if (cs != "") printf "%-24s %s\n", "switches per " unit, cs }' "$1"
}

# own_cores WATCH_LOG: the cores the benchmark's own processes used, from watch_cpu's line.
own_cores() { sed -n 's/.*own processes: \([0-9.]*\) .*of.*/\1/p' "$1"; }

# stack_cpu_snapshot NAME...: "name ticks" lines for the processes of deploy/local/stack.sh's run
# folder ($SHOPMICRO_RUN_DIR/NAME.pid), "postgres ticks" (the postmaster, its backends, and the
# backends that exited) and "machine ticks" (all cores, other work included); cpu_report turns
# two of them into where a phase's time went.
stack_cpu_snapshot() {
  local n pid t
  local -a kids=()
  for n; do
    pid=$(head -n1 "$SHOPMICRO_RUN_DIR/$n.pid" 2>/dev/null) || continue
    t=$(proc_ticks "$pid") && [[ -n $t ]] && printf '%s %s\n' "$n" "${t#* }"
  done
  pid=$(head -n1 "$SHOPMICRO_RUN_DIR/pg/data/postmaster.pid" 2>/dev/null) || pid=""
  if [[ -n $pid ]] && t=$(proc_ticks -c "$pid") && [[ -n $t ]]; then
    # shellcheck source=deploy/local/lib/common.sh
    mapfile -t kids < <(source "$ROOT/deploy/local/lib/common.sh" && child_pids "$pid")
    { echo "$t"; proc_ticks "${kids[@]}"; } | awk '{ s += $2 } END { print "postgres", s }'
  fi
  awk '/^cpu / { print "machine", $2 + $3 + $4 + $7 + $8 }' /proc/stat
}

# cpu_report cores BEFORE AFTER SECONDS: "notification 0.93  notify-sink 0.31 cores; the machine
# busy N % of its C cores" (CPU-seconds per second = cores; processes that used >= 0.01 only);
# cpu_report per-order BEFORE AFTER SECONDS ORDERS: "order 0.41  catalog 0.22  (sum 0.63) ms CPU
# per order; the machine busy ..." (processes in both snapshots). BEFORE and AFTER:
# stack_cpu_snapshot's.
cpu_report() {
  awk -v mode="$1" -v s="$4" -v n="${5:-0}" -v hz="$(getconf CLK_TCK)" -v cores="$(nproc)" '
    FNR == NR { a[$1] = $2; next }
    mode == "per-order" && !($1 in a) { next }
    { t = $2 - a[$1]   # cores: a process started during the phase counts from 0
      if ($1 == "machine") busy = t / hz / s / cores * 100
      else if (mode == "cores") { if (t / hz / s >= 0.01) { printf "%s%s %.2f", sep, $1, t / hz / s; sep = "  " } }
      else { ms = t * 1000 / hz; printf "%s%s %.2f", sep, $1, n ? ms / n : 0; sep = "  "; tot += ms } }
    END { if (mode == "cores") printf " cores"
          else printf "  (sum %.2f) ms CPU per order", n ? tot / n : 0
          printf "; the machine busy %.0f %% of its %d cores\n", busy, cores }' \
    <(printf '%s\n' "$2") <(printf '%s\n' "$3")
}
