#!/usr/bin/env bash
# A private PostgreSQL for tests: installs Debian's postgresql if missing, runs an instance on
# 127.0.0.1 and prints its URL (role leafid, password leafid, CREATEDB, owner of database leafid).
#
#   scripts/postgres.sh start   # idempotent; prints postgres://leafid:leafid@127.0.0.1:PORT/leafid
#   scripts/postgres.sh stop    # fast shutdown; waits until the server is gone
#   scripts/postgres.sh restart
#   scripts/postgres.sh url
#   scripts/postgres.sh clean   # empties the instance if earlier test runs left databases
#
# Choices:
# - PORT is $LEAFID_TEST_POSTGRES_PORT, else this checkout's block + 15 (scripts/lib/common.sh).
# - Root cannot run PostgreSQL, so root runs it as the `postgres` OS user (the package makes it);
#   another user runs it as itself. That user must reach the data directory, and `postgres`
#   cannot pass through a checkout under a 0700 directory (root's home, mktemp -d): the data,
#   the socket and the log live in a per-checkout directory under /tmp (leafid_rundir: mode
#   0700, owned by the service user, path recorded in target/postgres/rundir), whose path has
#   no spaces and stays short enough for a unix socket. $LEAFID_POSTGRES_DIR, when set, is used
#   instead (tests that restart PostgreSQL run a second instance with it and a port of its own).
# - The script logs in as the service user through the socket (trust, local only); TCP from
#   127.0.0.1 takes SCRAM passwords. Settings live in DATA/leafid.conf, rewritten at each start
#   (port, socket directory, listen address) and included from postgresql.conf. The commit
#   settings stay at PostgreSQL's durable defaults (fsync, synchronous_commit on): leafid
#   refuses leases from a database that can lose a commit.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
root="$LEAFID_ROOT"
port="${LEAFID_TEST_POSTGRES_PORT:-$(($(leafid_port_block) + 15))}"
record="$root/target/postgres/rundir"

log() { leafid_log "$@"; }
url_of() { echo "postgres://leafid:leafid@127.0.0.1:$1/leafid"; }
svc_user() { if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi; }

# The newest installed server's bin directory (Debian keeps them out of PATH).
pg_bin() {
  local d
  d="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1)"
  [ -n "$d" ] && [ -x "$d/postgres" ] && echo "$d"
}

install() {
  local missing=()
  pg_bin >/dev/null || missing+=(postgresql)
  [ -x /usr/bin/psql ] || missing+=(postgresql-client)
  leafid_install_packages "${missing[@]}"
}

# The run directory: made when asked (start), else only found (empty when there is none).
base_dir() {
  if [ -n "${LEAFID_POSTGRES_DIR:-}" ]; then
    mkdir -p "$LEAFID_POSTGRES_DIR"
    [ "$(id -un)" = "$(svc_user)" ] || chown "$(svc_user):" "$LEAFID_POSTGRES_DIR"
    echo "$LEAFID_POSTGRES_DIR"
  elif [ "${1:-}" = make ]; then
    leafid_rundir "$record" postgres "$(svc_user)"
  else
    leafid_rundir_recorded "$record"
  fi
}

# Runs a command as the service user, from a directory it can enter.
as_svc() {
  local dir="$1"; shift
  if [ "$(id -un)" = "$(svc_user)" ]; then
    (cd "$dir" && "$@")
  else
    (cd "$dir" && setpriv --reuid="$(svc_user)" --regid="$(id -g "$(svc_user)")" --init-groups \
      env HOME="$dir" USER="$(svc_user)" "$@")
  fi
}

# psql as the service user's role through the socket in BASE.
admin() {
  local base="$1"; shift
  psql -X -q -v ON_ERROR_STOP=1 -h "$base" -p "$(cat "$base/port" 2>/dev/null || echo "$port")" \
    -U "$(svc_user)" -d postgres "$@"
}

running() {
  local base="$1"
  [ -n "$base" ] && [ -f "$base/data/postmaster.pid" ] &&
    as_svc "$base" "$(pg_bin)/pg_ctl" -D "$base/data" status >/dev/null 2>&1
}

start() {
  install
  local base bin; base="$(base_dir make)"; bin="$(pg_bin)"
  if running "$base"; then
    local at; at="$(cat "$base/port")"
    if [ "$at" = "$port" ] || [ -z "${LEAFID_TEST_POSTGRES_PORT:-}" ]; then
      [ "$at" = "$port" ] || log "reusing the instance already running on this data (port $at)"
      url_of "$at"
      return 0
    fi
    stop
  fi
  leafid_ports_free_or_die "$port"
  if [ ! -f "$base/data/PG_VERSION" ]; then
    log "initialising $base/data"
    rm -rf "$base/data"
    as_svc "$base" "$bin/initdb" -D "$base/data" -U "$(svc_user)" --auth-local=trust \
      --auth-host=scram-sha-256 --encoding=UTF8 --locale=C >"$base/initdb.log" 2>&1 ||
      { cat "$base/initdb.log" >&2; exit 1; }
    echo "include_if_exists = 'leafid.conf'" >>"$base/data/postgresql.conf"
  fi
  cat >"$base/data/leafid.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$base'
max_connections = 500
shared_buffers = 128MB
log_min_messages = warning
EOF
  [ "$(id -un)" = "$(svc_user)" ] || chown "$(svc_user):" "$base/data/leafid.conf"
  echo "$port" >"$base/port"
  if ! as_svc "$base" "$bin/pg_ctl" -D "$base/data" -l "$base/postgres.log" -w -t 60 start >/dev/null; then
    log "PostgreSQL did not start; see $base/postgres.log"
    tail -20 "$base/postgres.log" >&2
    exit 1
  fi
  admin "$base" <<'EOF'
SELECT 'CREATE ROLE leafid LOGIN CREATEDB PASSWORD ''leafid'''
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leafid') \gexec
SELECT 'CREATE DATABASE leafid OWNER leafid'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'leafid') \gexec
EOF
  log "PostgreSQL up on 127.0.0.1:$port (data $base/data)"
  url_of "$port"
}

stop() {
  local base; base="$(base_dir)"
  [ -n "$base" ] && [ -f "$base/data/postmaster.pid" ] || return 0
  local pid; pid="$(head -1 "$base/data/postmaster.pid")"
  as_svc "$base" "$(pg_bin)/pg_ctl" -D "$base/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q postgres; then
    log "PostgreSQL (pid $pid) did not stop within 60 s; killing it"
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -f "$base/data/postmaster.pid"
  fi
}

# Starts the next `start` on an empty instance when earlier test runs left databases in this one
# (tests/api/support/postgres.rs creates one per test, leafid_t_* and leafid_b_*, about 7.5 MB
# each, and never drops them: a suite leaves ~2 GB). Stops it and removes its data: initdb takes
# seconds, where DROP DATABASE takes a checkpoint each (0.6-1.8 s here). For scripts/test.sh
# before the tests start, never while they run; the instance is the tests' own.
clean() {
  local base n; base="$(base_dir)"
  running "$base" || return 0
  n="$(admin "$base" -At -c "SELECT count(*) FROM pg_database WHERE datname ~ '^leafid_[tb]_[0-9]'")"
  [ "$n" != 0 ] || return 0
  log "$n test database(s) left by earlier runs: stopping and emptying $base/data"
  stop
  rm -rf "${base:?}/data"
}

# The running instance's URL (it may run on another port), else the one start uses.
url() {
  local base at=""; base="$(base_dir)"
  running "$base" && at="$(cat "$base/port")"
  url_of "${at:-$port}"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  url) url ;;
  clean) clean ;;
  *) echo "usage: $0 start|stop|restart|url|clean" >&2; exit 2 ;;
esac
