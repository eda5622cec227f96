#!/usr/bin/env bash
# bench/lib.sh: helpers the bench/run_*.sh scripts share. Source it after
# setting PG_BIN (optional). Nothing here runs on its own.

say() { printf '[bench] %s\n' "$*"; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }

# pg_tool NAME: the Postgres 15 tool, else the one on PATH.
pg_tool() { if [[ -x ${PG_BIN:-/usr/lib/postgresql/15/bin}/$1 ]]; then echo "${PG_BIN:-/usr/lib/postgresql/15/bin}/$1"; else command -v "$1" || echo "$1"; fi; }

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PID PORT SECONDS WHAT: until PORT accepts, dying if PID exits.
wait_port() {
  local pid=$1 port=$2 tenths=$(( $3 * 10 )) i
  for (( i = 0; i < tenths; i++ )); do
    kill -0 "$pid" 2>/dev/null || die "$4 exited during start-up"
    port_open "$port" && return 0
    sleep 0.1
  done
  die "$4 does not accept TCP on 127.0.0.1:$port after $3 s"
}

# stop_pid PID NAME: SIGTERM, up to 10 s, then SIGKILL; reaps it.
stop_pid() {
  local pid=$1 i
  [[ -n $pid ]] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for (( i = 0; i < 100; i++ )); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "$2 (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# result_field LINE KEY: the value of KEY=... in a "RESULT k=v ..." line.
result_field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" ${1#RESULT}"; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# proc_ticks PID...: "pid ticks" per live process: user+system CPU clock ticks
# (all threads).
proc_ticks() {
  local p st
  for p; do
    st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    st=${st##*) }
    # after "comm)", field 1 is state; utime and stime are fields 12 and 13
    awk -v p="$p" '{ print p, $12 + $13 }' <<<"$st"
  done
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
