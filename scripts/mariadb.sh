#!/usr/bin/env bash
# A private MariaDB for tests: installs Debian's mariadb-server if missing, runs an instance on
# 127.0.0.1 with its data under target/mariadb, and prints its URL (user leafid, all privileges).
#
#   scripts/mariadb.sh start   # idempotent; prints mysql://leafid:leafid@127.0.0.1:PORT
#   scripts/mariadb.sh stop    # waits until the server process is gone
#   scripts/mariadb.sh restart
#   scripts/mariadb.sh url
#
# Choices:
# - PORT is $LEAFID_TEST_MYSQL_PORT, else the first port of this checkout's block (derived from
#   the checkout's path, see scripts/lib/common.sh): two checkouts on one machine never share
#   a port, and every port is below the ephemeral range 32768-60999. An instance of this data
#   already running on another port (an older default) is reused as it is unless
#   $LEAFID_TEST_MYSQL_PORT asks for a port, in which case it is restarted on that one.
# - The data lives under $LEAFID_MARIADB_DIR or target/mariadb (tests that restart MariaDB run a
#   second instance with both set). Root runs mariadbd with --user=root, another user as itself,
#   so a checkout under a 0700 directory (root's home, mktemp -d) works: nobody else has to
#   enter it. The script logs in through the unix socket as the database account named like the
#   OS user running it (auth by socket; root for root), which mariadb-install-db creates.
# - Every path goes to mariadbd as one argument, so a checkout path with spaces works.
#   mariadb-install-db is the exception (it splits --user's chown of the datadir at spaces): it
#   gets the datadir through a space-free symlink in a mktemp directory under /tmp, removed
#   right after.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
root="$LEAFID_ROOT"
base="${LEAFID_MARIADB_DIR:-$root/target/mariadb}"
port="${LEAFID_TEST_MYSQL_PORT:-$(leafid_port_block)}"
data="$base/data"
sock="$base/mysqld.sock"
pidf="$base/mysqld.pid"

log() { leafid_log "$@"; }
find_bin() { leafid_find_bin "$@"; }
url_of() { echo "mysql://leafid:leafid@127.0.0.1:$1"; }

install() {
  local missing=()
  find_bin mariadbd mysqld >/dev/null && find_bin mariadb-install-db mysql_install_db >/dev/null ||
    missing+=(mariadb-server)
  find_bin mariadb mysql >/dev/null || missing+=(mariadb-client)
  leafid_install_packages "${missing[@]}"
}

client() { "$(find_bin mariadb mysql)" --no-defaults --protocol=socket --socket="$sock" -u"$LEAFID_DB_ADMIN" "$@"; }

running() { [ -S "$sock" ] && client -e 'SELECT 1' >/dev/null 2>&1; }

running_port() { client -Nse 'SELECT @@port' 2>/dev/null || true; }

start() {
  install
  if running; then
    local at; at="$(running_port)"
    if [ "$at" = "$port" ] || [ -z "${LEAFID_TEST_MYSQL_PORT:-}" ]; then
      [ "$at" = "$port" ] || log "reusing the instance already running on this data (port $at)"
      url_of "$at"
      return 0
    fi
    stop
  fi
  leafid_ports_free_or_die "$port"
  mkdir -p "$base"
  local user_opt=(); [ "$(id -u)" = 0 ] && user_opt=(--user=root)
  if [ ! -d "$data/mysql" ]; then
    log "initialising $data"
    mkdir -p "$data"
    local alias; alias="$(mktemp -d /tmp/leafid-install-db.XXXXXX)"
    ln -s "$data" "$alias/data"
    if ! "$(find_bin mariadb-install-db mysql_install_db)" --no-defaults --datadir="$alias/data" \
      "${user_opt[@]}" --auth-root-authentication-method=socket \
      --auth-root-socket-user="$LEAFID_DB_ADMIN" --skip-test-db \
      >"$base/install.log" 2>&1; then
      rm -rf "$alias"
      cat "$base/install.log" >&2
      exit 1
    fi
    rm -rf "$alias"
  fi
  "$(find_bin mariadbd mysqld)" --no-defaults --datadir="$data" "${user_opt[@]}" \
    --bind-address=127.0.0.1 --port="$port" --socket="$sock" --pid-file="$pidf" \
    --log-error="$base/error.log" --skip-log-bin --innodb-buffer-pool-size=128M \
    --max-connections=1000 --skip-name-resolve >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 120); do
    running && break
    kill -0 "$pid" 2>/dev/null || break  # it exited: no use waiting
    sleep 0.5
  done
  running || { log "MariaDB did not start; see $base/error.log"; tail -20 "$base/error.log" >&2; exit 1; }
  client -e "CREATE USER IF NOT EXISTS 'leafid'@'127.0.0.1' IDENTIFIED BY 'leafid';
             GRANT ALL PRIVILEGES ON *.* TO 'leafid'@'127.0.0.1' WITH GRANT OPTION;"
  log "MariaDB up on 127.0.0.1:$port (data $data)"
  url_of "$port"
}

stop() {
  [ -f "$pidf" ] || return 0
  local pid; pid="$(cat "$pidf")"
  kill "$pid" 2>/dev/null || true
  # Wait for the process itself, not the pid file: a killed server leaves a stale one behind.
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$pid" 2>/dev/null; then
    log "MariaDB (pid $pid) did not stop within 30 s; killing it"
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$pidf"
}

# The running instance's URL (it may run on an older default port), else the one start uses.
url() {
  local at=""
  running && at="$(running_port)"
  url_of "${at:-$port}"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  url) url ;;
  *) echo "usage: $0 start|stop|restart|url" >&2; exit 2 ;;
esac
