#!/usr/bin/env bash
# deploy/local/kafka.sh: how the local stack runs Apache Kafka. One node in KRaft mode (broker and
# controller in one JVM), from the Kafka jars in the Maven registry on Debian's Java 17: no Docker.
#
# A library with the verbs every component of the stack has; stack.sh sources it (its COMPONENTS
# line "kafka"), so `stack.sh start|stop|restart|kill|pause|resume|logs kafka` and `status` reach:
#   kafka_start kafka_stop kafka_restart kafka_kill kafka_pause kafka_resume kafka_status_line kafka_logs
# It also runs on its own (the relay's tests start their brokers this way):
#   deploy/local/kafka.sh start|stop|restart|kill|pause|resume|status|logs
# Run that way, it sources stack.sh (which defines everything and runs nothing when sourced) for the
# run folder (RUN, LOGS) and the helpers it shares with the other components: say note die rel
# abs_path is_port port_open port_owner alive is_paused wait_gone svc_kill SERVICE_STOP_TIMEOUT.
#
# Files, in the run folder ($SHOPMICRO_RUN_DIR, default <repo>/.run):
#   kafka/server.properties, kafka/log4j2.yaml   written at every start (so port changes apply)
#   kafka/data/                                  the log dirs, formatted once (meta.properties)
#   kafka/lib/kafka-<version>/*.jar              the jars, fetched once ($SHOPMICRO_KAFKA_LIB_CACHE
#                                                moves kafka/lib, e.g. to share it between test runs)
#   kafka.pid                                    pid, the config file it runs (line 2), and the
#                                                seconds its start took (line 3, for `status`)
#   kafka.lock                                   flock: one start/stop/kill at a time
#   logs/kafka.log                               broker output; the previous start's is kafka.log.1
# Variables: SHOPMICRO_KAFKA_PORT (19092) and SHOPMICRO_KAFKA_CONTROLLER_PORT (19093), both on
# 127.0.0.1 and never Kafka's usual 9092/9093, so a broker of the host cannot clash (defaults in
# KAFKA_PORT_SPECS, which stack.sh gives to set_port_vars: `test` picks free ones for them);
# SHOPMICRO_KAFKA_LIB_CACHE; SHOPMICRO_KAFKA_START_TIMEOUT (90 s); SHOPMICRO_KAFKA_HEAP (512m).
# docs/events.md describes it all, with measured times.
set -euo pipefail

KAFKA_VERSION=4.4.0
KAFKA_LOG4J_VERSION=2.25.5   # log4j-slf4j-impl must match the log4j-core that kafka_2.13 brings
# Pinned, so that any Maven fetches the same way (3.8.7 from Debian picks 2.8 by itself).
KAFKA_MVN_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:2.8
# The topics the stack creates, "name partitions". shopmicro.orders.v1 carries the order events,
# keyed by order id: 3 partitions let up to 3 consumers of one group share the load while all
# events of one order stay in order on one partition. More partitions can be added later, never
# removed, and adding them moves keys: so a small number now. shopmicro.inventory.v1 carries
# catalog's stock events (the saga), keyed by order id too. Each has a dead-letter topic
# (<topic>.dlq, pkg/kafka's consumer default) of 1 partition: few records, read by people.
# shopmicro.probe takes the one message each start produces to see that the broker accepts a
# produce. Topics are never created by a producer (auto.create.topics.enable=false): a typo fails.
KAFKA_TOPICS=("shopmicro.orders.v1 3" "shopmicro.orders.v1.dlq 1" "shopmicro.inventory.v1 3"
              "shopmicro.inventory.v1.dlq 1" "shopmicro.probe 1")
KAFKA_PROBE_TOPIC=shopmicro.probe
# The ports, as set_port_vars SPECs (stack.sh): the broker's listener and the controller's.
KAFKA_PORT_SPECS=("SHOPMICRO_KAFKA_PORT=19092" "SHOPMICRO_KAFKA_CONTROLLER_PORT=19093")

# kafka_paths: every KAFKA_* path and port, from RUN and the variables as they are now. Each verb
# calls it first: stack.sh's `test` moves RUN after this file is sourced.
kafka_paths() {
  KAFKA_DIR=$RUN/kafka
  KAFKA_DATA=$KAFKA_DIR/data
  KAFKA_CONF=$KAFKA_DIR/server.properties
  KAFKA_LOG4J=$KAFKA_DIR/log4j2.yaml
  KAFKA_JARS=$(abs_path "${SHOPMICRO_KAFKA_LIB_CACHE:-$KAFKA_DIR/lib}")/kafka-$KAFKA_VERSION
  KAFKA_LOG=$LOGS/kafka.log
  KAFKA_PID_FILE=$RUN/kafka.pid
  KAFKA_PORT=$SHOPMICRO_KAFKA_PORT                       # both set by stack.sh's set_port_vars
  KAFKA_CONTROLLER_PORT=$SHOPMICRO_KAFKA_CONTROLLER_PORT
  KAFKA_START_TIMEOUT=${SHOPMICRO_KAFKA_START_TIMEOUT:-90}
  KAFKA_HEAP=${SHOPMICRO_KAFKA_HEAP:-512m}
  is_port "$KAFKA_PORT" || die "SHOPMICRO_KAFKA_PORT='$KAFKA_PORT' is not a port number"
  is_port "$KAFKA_CONTROLLER_PORT" || die "SHOPMICRO_KAFKA_CONTROLLER_PORT='$KAFKA_CONTROLLER_PORT' is not a port number"
  [[ $KAFKA_PORT != "$KAFKA_CONTROLLER_PORT" ]] || die "SHOPMICRO_KAFKA_PORT and SHOPMICRO_KAFKA_CONTROLLER_PORT are both $KAFKA_PORT"
  [[ $KAFKA_START_TIMEOUT =~ ^[0-9]+$ ]] || die "SHOPMICRO_KAFKA_START_TIMEOUT='$KAFKA_START_TIMEOUT' is not a number of seconds"
  KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
}

# kafka_elapsed T0: seconds since T0 (an $EPOCHREALTIME), one decimal.
kafka_elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# fd 8 (fd 9 is stack.sh's pg lock). Closed in the broker, which must never hold it.
kafka_lock()   { mkdir -p "$RUN"; exec 8>>"$RUN/kafka.lock"; flock -w 120 8 || die "kafka: timed out waiting for $(rel "$RUN/kafka.lock")"; }
kafka_unlock() { exec 8>&-; }

kafka_log_tail() {
  [[ -r $KAFKA_LOG ]] || return 0
  printf 'stack: last lines of %s:\n' "$(rel "$KAFKA_LOG")" >&2
  tail -n 20 "$KAFKA_LOG" | sed 's/^/    /' >&2
}

# ---------------------------------------------------------------------------
# Which process is the broker

# True when pid $1 is the broker of this run folder: the pid file's pid may have been reused.
kafka_is_ours() {
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *" kafka.Kafka $KAFKA_CONF "* ]]
}

# kafka_find_pid: KAFKA_PID = the running broker's pid, empty when none; a stale pid file is removed.
kafka_find_pid() {
  local pid=""
  KAFKA_PID=""
  [[ -f $KAFKA_PID_FILE ]] || return 0
  read -r pid <"$KAFKA_PID_FILE" || true
  if [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && kafka_is_ours "$pid"; then
    KAFKA_PID=$pid
    return 0
  fi
  note "kafka: removing stale $(rel "$KAFKA_PID_FILE"): pid ${pid:-?} is not this run folder's broker"
  rm -f "$KAFKA_PID_FILE"
}

# The port the running broker listens on, from the config it was started with.
kafka_running_port() { sed -n 's|^listeners=PLAINTEXT://127.0.0.1:\([0-9]*\),.*|\1|p' "$KAFKA_CONF" 2>/dev/null; }

kafka_rss_mb() { awk '/^VmRSS:/ { printf "%d", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "?"; }

# ---------------------------------------------------------------------------
# Jars, configuration, storage

kafka_check_tools() {
  local t
  for t in java mvn kcat; do
    command -v "$t" >/dev/null 2>&1 ||
      die "kafka: '$t' not found: run 'deploy/local/stack.sh deps' (packages openjdk-17-jre-headless, maven, kcat)"
  done
}

# The pom has no code: Maven only resolves its dependencies. kafka_2.13 is the broker and the
# storage tool. log4j-slf4j-impl binds slf4j to log4j2: without it the broker logs nothing at all.
# kafka-tools holds TopicCommand; its own dependencies (Connect, Jetty: 47 jars, 11 MB) are left
# out, because TopicCommand needs only what the broker has already.
kafka_pom() {
  cat <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>kafka-runtime</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$KAFKA_LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
  </dependencies></project>
EOF
}

# Fetch the jars once. Maven writes into a temporary folder that is renamed at the end, so an
# interrupted fetch is never taken for the cache, and two first starts sharing one cache (parallel
# tests) cannot mix their files: the second rename fails and that start uses the first one's jars.
kafka_fetch_jars() {
  [[ -f $KAFKA_JARS/kafka_2.13-$KAFKA_VERSION.jar ]] && return 0
  local tmp t0=$EPOCHREALTIME
  mkdir -p "$(dirname "$KAFKA_JARS")"
  tmp=$(mktemp -d "$KAFKA_JARS.fetch.XXXXXX")
  kafka_pom >"$tmp/pom.xml"
  say "kafka: fetching the Kafka $KAFKA_VERSION jars with Maven into $(rel "$KAFKA_JARS") (once)"
  if ! mvn -q -B -Dstyle.color=never -f "$tmp/pom.xml" "$KAFKA_MVN_PLUGIN:copy-dependencies" \
       -DoutputDirectory="$tmp/jars" -DincludeScope=runtime >"$tmp/mvn.log" 2>&1; then
    sed 's/^/    /' "$tmp/mvn.log" | tail -n 20 >&2
    rm -rf -- "$tmp"
    die "kafka: mvn could not fetch the Kafka jars (above: the end of its output)"
  fi
  mv -T "$tmp/jars" "$KAFKA_JARS" 2>/dev/null || [[ -f $KAFKA_JARS/kafka_2.13-$KAFKA_VERSION.jar ]] ||
    { rm -rf -- "$tmp"; die "kafka: cannot move the jars into $(rel "$KAFKA_JARS")"; }
  rm -rf -- "$tmp"
  say "kafka: $(find "$KAFKA_JARS" -name '*.jar' | wc -l) jars, $(du -sh "$KAFKA_JARS" | cut -f1) in $(kafka_elapsed "$t0") s"
}

# Rewritten at every start, like Postgres's shopmicro.conf: change this function, not the file.
kafka_write_config() {
  mkdir -p "$KAFKA_DIR"
  cat >"$KAFKA_CONF" <<EOF
# Written by deploy/local/kafka.sh at every start; change the script, not this file.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
log.dirs=$KAFKA_DATA
# Topics are created by kafka.sh with their partition count (KAFKA_TOPICS); a producer that names
# a wrong topic gets an error instead of a new topic.
auto.create.topics.enable=false
num.partitions=3
# One node: every internal topic has one replica. One offsets partition instead of 50 starts faster.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# After kill -9 the restarted node waits until the dead one's broker session expires
# (DuplicateBrokerRegistrationException until then): 3 s instead of the default 9 s.
broker.session.timeout.ms=3000
broker.heartbeat.interval.ms=1000
EOF
  # Root at WARN: at INFO a start writes 1,100-2,400 lines. These two say when it listens and is up.
  cat >"$KAFKA_LOG4J" <<'EOF'
Configuration:
  Appenders:
    Console: {name: STDOUT, PatternLayout: {pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root: {level: WARN, AppenderRef: [{ref: STDOUT}]}
    Logger:
      - {name: kafka.server.KafkaRaftServer, level: INFO}
      - {name: kafka.network.DataPlaneAcceptor, level: INFO}
EOF
}

# A cluster id as Kafka's Uuid makes them: 16 random bytes in URL-safe base64 without padding, not
# starting with '-' (a command line would take it for an option). No JVM start for it (~2 s).
kafka_cluster_id() {
  local id
  until [[ ${id:-} =~ ^[A-Za-z0-9_][A-Za-z0-9_-]{21}$ ]]; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
  done
  printf '%s' "$id"
}

# Format the storage once; a formatted one keeps its topics and offsets across starts.
kafka_format() {
  [[ -f $KAFKA_DATA/meta.properties ]] && return 0
  local t0=$EPOCHREALTIME
  say "kafka: formatting the storage $(rel "$KAFKA_DATA") (once)"
  java -Dlog4j2.configurationFile="$KAFKA_LOG4J" -cp "$KAFKA_JARS/*" kafka.tools.StorageTool format \
    --standalone -t "$(kafka_cluster_id)" -c "$KAFKA_CONF" >>"$KAFKA_LOG" 2>&1 ||
    { kafka_log_tail; die "kafka: formatting $(rel "$KAFKA_DATA") failed"; }
  say "kafka: formatted in $(kafka_elapsed "$t0") s"
}

# ---------------------------------------------------------------------------
# Start-up

# KAFKA_PID = the new broker. setsid: its own session, so a Ctrl-C in the terminal that started it
# does not reach it. The pid file's second line lets kafka_is_ours recognise it.
kafka_launch() {
  (cd "$RUN" && exec setsid nohup java -Xms256m -Xmx"$KAFKA_HEAP" -XX:+ExitOnOutOfMemoryError \
     -Dlog4j2.configurationFile="$KAFKA_LOG4J" -cp "$KAFKA_JARS/*" kafka.Kafka "$KAFKA_CONF" \
     >>"$KAFKA_LOG" 2>&1 </dev/null) 8>&- 9>&- &
  KAFKA_PID=$!
  disown "$KAFKA_PID"   # bash would report a "Killed" job when kill and start run in one shell
  printf '%s\n%s\n' "$KAFKA_PID" "$KAFKA_CONF" >"$KAFKA_PID_FILE"
}

# Topic names and partition counts, from one metadata request: lines "NAME PARTITIONS".
kafka_topic_list() {
  kcat -L -b "$KAFKA_BOOTSTRAP" -m 3 2>/dev/null |
    sed -n 's/^  topic "\([^"]*\)" with \([0-9]*\) partitions:$/\1 \2/p'
}

# Create the topics of KAFKA_TOPICS that are missing. False when the broker does not answer or a
# creation fails (the caller retries). kcat cannot create topics, so this runs TopicCommand, a JVM
# of 2-6 s, but only on a fresh storage; a warm start only lists the topics (one kcat, ~0.1 s).
# The JVMs run side by side: one after the other, five topics took 15-18 s of every fresh start.
kafka_ensure_topics() {
  local have spec name parts found i rc=0
  local -a pids=() outs=()
  have=$(kafka_topic_list) || return 1
  for spec in "${KAFKA_TOPICS[@]}"; do
    read -r name parts <<<"$spec"
    found=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$have")
    if [[ -z $found ]]; then
      outs+=("$(mktemp "${TMPDIR:-/tmp}/shopmicro-topic.XXXXXX")")
      kafka_create_topic "$name" "$parts" >"${outs[-1]}" 2>&1 &
      pids+=("$!")
    elif [[ $found != "$parts" ]]; then
      note "kafka: topic $name has $found partitions, not $parts (left as it is)"
    fi
  done
  for i in "${!pids[@]}"; do
    if wait "${pids[i]}"; then
      cat "${outs[i]}"
    else
      rc=1
      KAFKA_WAIT_ERR=$(tail -n 1 "${outs[i]}")
    fi
    rm -f "${outs[i]}"
  done
  return "$rc"
}

# Short-lived JVM: C1 only and the serial GC start faster. --if-not-exists: a retry after a
# creation that timed out but happened is not an error. On failure its last line says why (for
# kafka_ensure_topics' KAFKA_WAIT_ERR).
kafka_create_topic() {
  local out t0=$EPOCHREALTIME
  if ! out=$(timeout 60 java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m \
      -Dlog4j2.configurationFile="$KAFKA_LOG4J" -cp "$KAFKA_JARS/*" org.apache.kafka.tools.TopicCommand \
      --bootstrap-server "$KAFKA_BOOTSTRAP" --create --if-not-exists --topic "$1" --partitions "$2" \
      --replication-factor 1 2>&1); then
    printf 'creating topic %s: %s\n' "$1" "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
    return 1
  fi
  say "kafka: created topic $1, partitions: $2 ($(kafka_elapsed "$t0") s)"
}

# One message to the probe topic, acknowledged by the broker (acks=all is librdkafka's default).
kafka_probe() {
  local out
  out=$(printf 'probe %s\n' "$(date -u +%FT%T.%NZ)" |
        kcat -P -b "$KAFKA_BOOTSTRAP" -t "$KAFKA_PROBE_TOPIC" -X message.timeout.ms=2000 2>&1) ||
    { KAFKA_WAIT_ERR="probe produce: $(tail -n 1 <<<"$out")"; return 1; }
}

# Ready = the port is open, the topics exist, and a produce is acknowledged. Bounded: on timeout the
# broker is stopped; either way the log's tail is shown.
kafka_wait_ready() {
  local pid=$1 deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  KAFKA_WAIT_ERR="port 127.0.0.1:$KAFKA_PORT not open"
  until port_open "$KAFKA_PORT" && kafka_ensure_topics && kafka_probe; do
    if ! alive "$pid"; then
      rm -f "$KAFKA_PID_FILE"
      kafka_log_tail
      die "kafka: the broker (pid $pid) exited during start-up"
    fi
    if (( SECONDS >= deadline )); then
      kafka_log_tail
      svc_kill "$pid"
      rm -f "$KAFKA_PID_FILE"
      die "kafka: the broker (pid $pid) does not accept a produce after $KAFKA_START_TIMEOUT s (last: $KAFKA_WAIT_ERR); stopped it"
    fi
    sleep 0.2
  done
}

# Refuse ports that something else holds: the broker would fail to bind, or a client would talk to
# the wrong broker.
kafka_check_ports() {
  local p
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    port_open "$p" || continue
    die "kafka: port $p on 127.0.0.1 is in use by another process:
$(port_owner "$p")
  stop it, or choose free ports: SHOPMICRO_KAFKA_PORT / SHOPMICRO_KAFKA_CONTROLLER_PORT"
  done
}

# kafka_start when the broker runs already: leave it alone, but make sure it still serves.
kafka_start_running() {
  local port
  port=$(kafka_running_port)
  [[ $port == "$KAFKA_PORT" ]] ||
    die "kafka: this run folder's broker already runs on port ${port:-?} (pid $KAFKA_PID), not $KAFKA_PORT: use SHOPMICRO_KAFKA_PORT=$port, or stop it first"
  if is_paused "$KAFKA_PID"; then
    say "kafka: already running (pid $KAFKA_PID, $KAFKA_BOOTSTRAP) but PAUSED; left alone: 'resume' continues it"
    return 0
  fi
  kafka_wait_ready "$KAFKA_PID"
  say "kafka: already running (pid $KAFKA_PID, $KAFKA_BOOTSTRAP); left alone"
}

kafka_start_locked() {
  local t0=$EPOCHREALTIME
  kafka_find_pid
  if [[ -n $KAFKA_PID ]]; then kafka_start_running; return 0; fi
  kafka_check_ports
  kafka_check_tools
  kafka_fetch_jars
  kafka_write_config
  mkdir -p "$LOGS"
  [[ -f $KAFKA_LOG ]] && mv -f "$KAFKA_LOG" "$KAFKA_LOG.1"
  kafka_format
  say "kafka: starting Kafka $KAFKA_VERSION on $KAFKA_BOOTSTRAP (controller 127.0.0.1:$KAFKA_CONTROLLER_PORT, log $(rel "$KAFKA_LOG"))"
  kafka_launch
  kafka_wait_ready "$KAFKA_PID"
  t0=$(kafka_elapsed "$t0")
  printf '%s\n' "$t0" >>"$KAFKA_PID_FILE"
  say "kafka: running (pid $KAFKA_PID, $KAFKA_BOOTSTRAP): accepted a produce $t0 s after the start command, RSS $(kafka_rss_mb "$KAFKA_PID") MB"
}

# kafka_wait_closed PID: after the broker's exit, wait up to 5 s until its ports are closed. The JVM's
# main thread shows as a zombie while its other threads still exit and hold the sockets, so a
# `start` right after `kill` (or `stop`) would find the port still in use.
kafka_wait_closed() {
  local i
  for (( i = 0; i < 50; i++ )); do
    port_open "$KAFKA_PORT" || port_open "$KAFKA_CONTROLLER_PORT" || return 0
    sleep 0.1
  done
  note "kafka: the ports of pid $1 still accept connections 5 s after it ended"
}

# ---------------------------------------------------------------------------
# The verbs

kafka_start() { kafka_paths; kafka_lock; kafka_start_locked; kafka_unlock; }
# The jars only (once), and their folder on stdout: deploy/compose/local/prepare.sh builds its
# Kafka stand-in image from them.
kafka_fetch() { kafka_paths; kafka_fetch_jars >&2; printf '%s\n' "$KAFKA_JARS"; }

# SIGTERM: a controlled shutdown (~2.5 s), SIGKILL after SERVICE_STOP_TIMEOUT s (stack.sh's
# svc_kill, which also continues a paused broker so that it handles the SIGTERM).
kafka_stop_locked() {
  local t0=$EPOCHREALTIME
  kafka_find_pid
  if [[ -z $KAFKA_PID ]]; then say "kafka: not running"; return 0; fi
  say "kafka: stopping (pid $KAFKA_PID: SIGTERM, SIGKILL after ${SERVICE_STOP_TIMEOUT} s)"
  svc_kill "$KAFKA_PID"
  kafka_wait_closed "$KAFKA_PID"
  rm -f "$KAFKA_PID_FILE"
  say "kafka: stopped ($(kafka_elapsed "$t0") s)"
}
kafka_stop()    { kafka_paths; kafka_lock; kafka_stop_locked; kafka_unlock; }
kafka_restart() { kafka_paths; kafka_lock; kafka_stop_locked; kafka_start_locked; kafka_unlock; }

# A crash: no controlled shutdown. The data survives (the OS still has what was written); the next
# start takes a few seconds more (the dead broker's session must expire first).
kafka_kill() {
  kafka_paths
  kafka_lock
  kafka_find_pid
  [[ -n $KAFKA_PID ]] || die "kafka: not running: nothing to kill"
  kill -KILL "$KAFKA_PID" 2>/dev/null || true
  wait_gone "$KAFKA_PID" 50 || die "kafka: pid $KAFKA_PID survived SIGKILL"
  kafka_wait_closed "$KAFKA_PID"
  rm -f "$KAFKA_PID_FILE"
  kafka_unlock
  say "kafka: killed with SIGKILL (pid $KAFKA_PID; no controlled shutdown)"
}

# kafka_signal STOP|CONT: send it and wait up to 2 s for the state to change (T = stopped).
kafka_signal() {
  local i
  kill -"$1" "$KAFKA_PID"
  for (( i = 0; i < 20; i++ )); do
    if [[ $1 == STOP ]] && is_paused "$KAFKA_PID"; then return 0; fi
    if [[ $1 == CONT ]] && ! is_paused "$KAFKA_PID"; then return 0; fi
    sleep 0.1
  done
  die "kafka: pid $KAFKA_PID did not change state 2 s after SIG$1"
}

# A hung broker, not a dead one: its ports still complete TCP handshakes, producers and consumers
# wait until their timeouts.
kafka_pause() {
  kafka_paths
  kafka_find_pid
  [[ -n $KAFKA_PID ]] || die "kafka: not running: nothing to pause"
  if is_paused "$KAFKA_PID"; then say "kafka: already paused (pid $KAFKA_PID)"; return 0; fi
  kafka_signal STOP
  say "kafka: paused (SIGSTOP to pid $KAFKA_PID). $KAFKA_BOOTSTRAP still accepts TCP connections, but nothing answers"
}

# After a pause longer than broker.session.timeout.ms (3 s) the node fences itself and registers
# again: clients may see errors for a second or two.
kafka_resume() {
  kafka_paths
  kafka_find_pid
  [[ -n $KAFKA_PID ]] || die "kafka: not running: nothing to resume"
  if ! is_paused "$KAFKA_PID"; then say "kafka: not paused (pid $KAFKA_PID is running)"; return 0; fi
  kafka_signal CONT
  say "kafka: resumed (SIGCONT to pid $KAFKA_PID)"
}

# How long the running broker's start took (line 3 of the pid file), "?" when not recorded.
kafka_start_seconds() {
  local -a rec=()
  mapfile -t -n 3 rec <"$KAFKA_PID_FILE" 2>/dev/null || true
  printf '%s' "${rec[2]:-?}"
}

# One line in the shape of stack.sh status.
kafka_status_line() {
  kafka_paths
  kafka_find_pid
  if [[ -z $KAFKA_PID ]]; then
    printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s log %s\n' kafka stopped - "$KAFKA_PORT" "$(rel "$KAFKA_LOG")"
    return 0
  fi
  printf '%-14s %-8s pid %-8s 127.0.0.1:%-6s rss %s MB, started in %s s, controller :%s, log %s\n' kafka \
    "$(is_paused "$KAFKA_PID" && echo paused || echo running)" "$KAFKA_PID" "$(kafka_running_port)" \
    "$(kafka_rss_mb "$KAFKA_PID")" "$(kafka_start_seconds)" "$KAFKA_CONTROLLER_PORT" "$(rel "$KAFKA_LOG")"
}

# Follow the log across restarts (a start moves the old one to kafka.log.1).
kafka_logs() {
  kafka_paths
  [[ -e $KAFKA_LOG ]] || note "$(rel "$KAFKA_LOG") does not exist yet; tail -F waits for it"
  printf 'stack: following (Ctrl-C stops): %s\n' "$(rel "$KAFKA_LOG")" >&2
  exec tail -n 20 -F "$KAFKA_LOG"
}

# ---------------------------------------------------------------------------
# Run on its own (not when sourced)

kafka_usage() {
  cat <<EOF
usage: deploy/local/kafka.sh start|stop|restart|kill|pause|resume|status|logs|fetch

  start    fetch the jars (once), format the storage (once), start the broker on
           127.0.0.1:\$SHOPMICRO_KAFKA_PORT (19092), create the topics, wait until it accepts a
           produce; harmless when it runs already
  stop     SIGTERM (controlled shutdown), SIGKILL after \$SHOPMICRO_STOP_TIMEOUT s (15)
  restart  stop, then start
  kill     SIGKILL at once: a crash
  pause    SIGSTOP: a hung broker;  resume: SIGCONT
  status   running/paused/stopped, pid, port, RSS, log
  logs     follow its log (tail -F)
  fetch    only fetch the jars (once); prints their folder
Run folder: \$SHOPMICRO_RUN_DIR (default .run). See docs/events.md.
EOF
}

kafka_main() {
  case ${1:-} in
    start)   kafka_start ;;
    stop)    kafka_stop ;;
    restart) kafka_restart ;;
    kill)    kafka_kill ;;
    pause)   kafka_pause ;;
    resume)  kafka_resume ;;
    status)  kafka_status_line ;;
    logs)    kafka_logs ;;
    fetch)   kafka_fetch ;;
    -h|--help|help) kafka_usage ;;
    *)       kafka_usage >&2; exit 2 ;;
  esac
}

# KAFKA_SH_MAIN: stack.sh may source this file in turn; that nested copy must not run main again.
if [[ ${BASH_SOURCE[0]} == "$0" && -z ${KAFKA_SH_MAIN:-} ]]; then
  KAFKA_SH_MAIN=1
  # shellcheck source=SCRIPTDIR/stack.sh
  source "$(dirname "${BASH_SOURCE[0]}")/stack.sh"
  kafka_main "$@"
fi
