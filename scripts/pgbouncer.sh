#!/usr/bin/env bash
# PgBouncer for tests, in transaction pooling mode in front of scripts/postgres.sh's server
# (started if it is not running). Installs Debian's pgbouncer if missing; prints its URL.
#
#   scripts/pgbouncer.sh start   # idempotent; prints postgres://leafid:leafid@127.0.0.1:PORT/leafid
#   scripts/pgbouncer.sh stop
#   scripts/pgbouncer.sh restart
#   scripts/pgbouncer.sh url
#
# Choices:
# - PORT is $LEAFID_TEST_PGBOUNCER_PORT, else this checkout's block + 16 (scripts/lib/common.sh).
# - pool_mode = transaction: a server connection belongs to a client for one transaction (an
#   autocommit statement is one), the mode most deployments use and the one that breaks prepared
#   statements: leafid needs database.pgbouncer = true behind it (docs/postgres.md).
# - Every database name maps to the same name on the server (`* =`), so each test's fresh
#   database is reachable without a config change. Idle server connections close after 10 s:
#   many short-lived test databases must not pile up server connections.
# - auth_type = md5 against a userlist (role leafid, password leafid, stored in plain text so
#   PgBouncer can also answer the server's SCRAM challenge with it).
# - Root cannot run PgBouncer either: like scripts/postgres.sh it runs as `postgres` from a
#   per-checkout directory under /tmp (recorded in target/pgbouncer/rundir).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
root="$LEAFID_ROOT"
here="$(cd "$(dirname "$0")" && pwd -P)"
port="${LEAFID_TEST_PGBOUNCER_PORT:-$(($(leafid_port_block) + 16))}"
record="$root/target/pgbouncer/rundir"

log() { leafid_log "$@"; }
url_of() { echo "postgres://leafid:leafid@127.0.0.1:$1/leafid"; }
svc_user() { if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi; }

install() {
  local missing=()
  leafid_find_bin pgbouncer >/dev/null || missing+=(pgbouncer)
  leafid_install_packages "${missing[@]}"
}

base_dir() {
  if [ "${1:-}" = make ]; then leafid_rundir "$record" pgbouncer "$(svc_user)"; else leafid_rundir_recorded "$record"; fi
}

pid_of() {
  local base="$1" pid
  [ -n "$base" ] && [ -f "$base/pgbouncer.pid" ] || return 0
  pid="$(cat "$base/pgbouncer.pid")"
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q pgbouncer; then
    echo "$pid"
  fi
  return 0
}

start() {
  install
  # The server behind it (idempotent); its port from the URL it prints.
  local upstream pg_port base
  upstream="$("$here/postgres.sh" start)"
  pg_port="${upstream##*:}"; pg_port="${pg_port%%/*}"
  base="$(base_dir make)"
  if [ -n "$(pid_of "$base")" ]; then
    if [ "$(cat "$base/port")" = "$port" ] && [ "$(cat "$base/upstream")" = "$pg_port" ]; then
      url_of "$port"
      return 0
    fi
    stop
  fi
  leafid_ports_free_or_die "$port"
  cat >"$base/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
pool_mode = transaction
auth_type = md5
auth_file = $base/userlist.txt
max_client_conn = 2000
default_pool_size = 20
server_idle_timeout = 10
logfile = $base/pgbouncer.log
pidfile = $base/pgbouncer.pid
EOF
  echo '"leafid" "leafid"' >"$base/userlist.txt"
  echo "$port" >"$base/port"
  echo "$pg_port" >"$base/upstream"
  if [ "$(id -un)" != "$(svc_user)" ]; then
    chown "$(svc_user):" "$base/pgbouncer.ini" "$base/userlist.txt"
  fi
  local cmd=("$(leafid_find_bin pgbouncer)" -d "$base/pgbouncer.ini")
  if [ "$(id -un)" = "$(svc_user)" ]; then
    (cd "$base" && "${cmd[@]}")
  else
    (cd "$base" && setpriv --reuid="$(svc_user)" --regid="$(id -g "$(svc_user)")" --init-groups \
      env HOME="$base" "${cmd[@]}")
  fi
  for _ in $(seq 1 50); do leafid_port_busy "$port" && break; sleep 0.1; done
  leafid_port_busy "$port" || { log "PgBouncer did not start; see $base/pgbouncer.log"; tail -20 "$base/pgbouncer.log" >&2; exit 1; }
  log "PgBouncer (transaction pooling) up on 127.0.0.1:$port in front of 127.0.0.1:$pg_port"
  url_of "$port"
}

stop() {
  local base pid; base="$(base_dir)"; pid="$(pid_of "$base")"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

url() {
  local base; base="$(base_dir)"
  if [ -n "$(pid_of "$base")" ]; then url_of "$(cat "$base/port")"; else url_of "$port"; fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  url) url ;;
  *) echo "usage: $0 start|stop|restart|url" >&2; exit 2 ;;
esac
