#!/bin/bash
# The stand-in's start (postgres/Dockerfile): on an empty data folder, initdb with the official
# image's variables (POSTGRES_USER as the superuser, POSTGRES_PASSWORD, scram-sha-256 for TCP
# clients) and POSTGRES_DB; then the server in the foreground as user postgres. Other commands
# (db-init's bash) run as given.
set -euo pipefail
if [[ ${1:-} != postgres ]]; then
  exec "$@"
fi
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
[[ -n ${POSTGRES_PASSWORD:-} ]] || { echo "postgres stand-in: POSTGRES_PASSWORD is required" >&2; exit 1; }
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [[ ! -s $PGDATA/PG_VERSION ]]; then
  pwfile=$(mktemp) && chown postgres "$pwfile" && printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  runuser -u postgres -- initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [[ $POSTGRES_DB != postgres ]]; then
    runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    runuser -u postgres -- createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
    runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  echo "postgres stand-in: initialised $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
fi
exec runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='*'
