#!/bin/sh
# The official postgres image's first start, in short: an empty data dir is initialised with
# POSTGRES_USER as the superuser (password POSTGRES_PASSWORD, asked for over TCP) and
# POSTGRES_DB created, on a server that listens on no TCP port; then the server runs on
# every interface. So a TCP `pg_isready` succeeds only once the database exists.
set -eu
bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d | sort | tail -n 1)
PATH=$bin:$PATH
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    password=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" >"$password"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$password" \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$password"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses='' -k /tmp" --wait start >/dev/null
    if [ "$db" != postgres ]; then
        psql --host=/tmp --username="$user" --dbname=postgres --quiet \
            --command="CREATE DATABASE \"$db\""
    fi
    pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop >/dev/null
    echo "postgres-entrypoint: initialised $PGDATA (user $user, database $db)"
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' -k /tmp
