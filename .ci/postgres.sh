#!/usr/bin/env bash
# A throwaway PostgreSQL server on 127.0.0.1 for trying or testing sweeps on PostgreSQL.
#   bash .ci/postgres.sh [PORT] [DATA_DIR]   start one; prints postgresql://navexp@127.0.0.1:PORT/navexp
#   bash .ci/postgres.sh stop DATA_DIR       stop it
# PORT defaults to a free port, DATA_DIR to a new /tmp/navexp-pg.* folder (printed on stderr). Needs
# the distribution's server package (apt-get install -y postgresql). As root, the server runs as the
# unprivileged `postgres` user; otherwise as the calling user. Trust authentication, 127.0.0.1 only.
set -euo pipefail
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[[ -n "$bin" && -x "$bin/initdb" ]] || { echo "no PostgreSQL server found: apt-get install -y postgresql" >&2; exit 1; }
as=()
[[ "$(id -u)" == 0 ]] && as=(runuser -u postgres --)
if [[ "${1:-}" == stop ]]; then
  exec "${as[@]}" "$bin/pg_ctl" -D "$2" stop -m fast
fi
port="${1:-}"
[[ -n "$port" ]] || port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
data="${2:-$(mktemp -d /tmp/navexp-pg.XXXXXX)}"
mkdir -p "$data"
[[ "$(id -u)" == 0 ]] && chown postgres: "$data"
"${as[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
"${as[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $data" start >/dev/null
"${as[@]}" "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -q \
  -c "CREATE ROLE navexp LOGIN" -c "CREATE DATABASE navexp OWNER navexp"
echo "PostgreSQL data dir: $data (stop: bash .ci/postgres.sh stop $data)" >&2
echo "postgresql://navexp@127.0.0.1:$port/navexp"
