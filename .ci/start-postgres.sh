#!/usr/bin/env bash
# Throwaway Postgres cluster for the store tests (trust auth, 127.0.0.1 only, data in a temp dir).
#   eval "$(.ci/start-postgres.sh)"          # start; prints `export AUTOTUNE_TEST_PG_URL=...`
#   trap '.ci/start-postgres.sh stop' EXIT   # stop and delete the cluster
# AUTOTUNE_PG_PORT (default 55432) selects the cluster: start/stop of one port never touch another.
# Everything but the final export line goes to stderr, so the output can be eval'ed.
set -euo pipefail

PORT="${AUTOTUNE_PG_PORT:-55432}"
DIR="${TMPDIR:-/tmp}/autotune-pg-${PORT}"

log() { echo "start-postgres: $*" >&2; }

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

# initdb refuses to run as root: run the server tools as the postgres user when we are root.
as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stop() {
    local bin; bin="$(find_bin)"
    if [ -n "$bin" ] && [ -f "$DIR/data/PG_VERSION" ]; then
        as_pg "$bin/pg_ctl" -D "$DIR/data" -m fast -w stop >&2 || true
    fi
    rm -rf "$DIR"
}

if [ "${1:-start}" = stop ]; then stop; exit 0; fi

BIN="$(find_bin)"
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
    log "Postgres server binaries missing: installing them"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
    BIN="$(find_bin)"
fi
[ -n "$BIN" ] || { log "no Postgres server binaries found under /usr/lib/postgresql"; exit 1; }

stop  # a leftover cluster from an earlier run on this port
mkdir -p "$DIR"
if [ "$(id -u)" = 0 ]; then chown postgres: "$DIR"; fi
as_pg "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --no-sync >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log" >&2; exit 1; }
# the socket goes into our own dir: /var/run/postgresql may not exist or be writable
as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
    -o "-h 127.0.0.1 -p $PORT -k $DIR -c fsync=off -c max_connections=200" start >&2 \
    || { cat "$DIR/server.log" >&2; exit 1; }
for _ in $(seq 60); do
    "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" && break
    sleep 0.5
done
"$BIN/pg_isready" -h 127.0.0.1 -p "$PORT" >&2
echo "export AUTOTUNE_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:${PORT}/postgres"
