#!/bin/sh
# First start: a cluster in $PGDATA (the volume) with the role $POSTGRES_USER, password
# $POSTGRES_PASSWORD (scram-sha-256) and the database $POSTGRES_DB; then the server, as PID 1's
# child, accepting password logins from the compose network only (its containers' addresses).
set -eu
: "${POSTGRES_USER:?}" "${POSTGRES_PASSWORD:?}" "${POSTGRES_DB:?}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  # Password logins over TCP from any address the container is reachable on (the compose network).
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  PGPASSWORD="$POSTGRES_PASSWORD" pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
  PGPASSWORD="$POSTGRES_PASSWORD" createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
  pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
  echo "tmlbench-postgres: initialized $PGDATA (database $POSTGRES_DB)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c max_connections=200
