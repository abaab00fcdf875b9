#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 as an unprivileged user and print its URL.
#   bash .ci/postgres.sh [port]   ->  postgresql://navexp@127.0.0.1:<port>/navexp
# Needs the distribution's postgresql package (apt-get install -y postgresql). Run as root (the
# server itself runs as the `postgres` user) or as any user that can run initdb/pg_ctl.
# Stop it with: pg_ctl -D <data dir> stop (the data dir is printed on stderr).
set -euo pipefail
port="${1:-55432}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[[ -x "$bin/initdb" ]] || { echo "no PostgreSQL server found: apt-get install -y postgresql" >&2; exit 1; }
data="$(mktemp -d /tmp/navexp-pg.XXXXXX)"
as=()
if [[ "$(id -u)" == 0 ]]; then
  chown postgres: "$data"
  as=(runuser -u postgres --)
fi
"${as[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
"${as[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $data" start >/dev/null
"${as[@]}" "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -q \
  -c "CREATE ROLE navexp LOGIN" -c "CREATE DATABASE navexp OWNER navexp"
echo "PostgreSQL data dir: $data (stop: ${as[*]} $bin/pg_ctl -D $data stop)" >&2
echo "postgresql://navexp@127.0.0.1:$port/navexp"
