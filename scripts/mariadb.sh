#!/usr/bin/env bash
# A private MariaDB for tests: installs Debian's mariadb-server if missing, runs an instance on
# 127.0.0.1 with its data under target/mariadb, and prints its URL (user leafid, all privileges).
#
#   scripts/mariadb.sh start   # idempotent; prints mysql://leafid:leafid@127.0.0.1:PORT
#   scripts/mariadb.sh stop    # waits until the server process is gone
#   scripts/mariadb.sh restart
#   scripts/mariadb.sh url
# PORT is $LEAFID_TEST_MYSQL_PORT or 13306 (below the ephemeral range 32768-60999); the data
# lives under $LEAFID_MARIADB_DIR or target/mariadb (tests that restart MariaDB run a second
# instance with both set).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
base="${LEAFID_MARIADB_DIR:-$root/target/mariadb}"
port="${LEAFID_TEST_MYSQL_PORT:-13306}"
data="$base/data"
sock="$base/mysqld.sock"
pidf="$base/mysqld.pid"
url="mysql://leafid:leafid@127.0.0.1:$port"

log() { printf 'mariadb.sh: %s\n' "$*" >&2; }

find_bin() { for b in "$@"; do command -v "$b" >/dev/null 2>&1 && { command -v "$b"; return 0; }; done; for b in "$@"; do [ -x "/usr/sbin/$b" ] && { echo "/usr/sbin/$b"; return 0; }; done; return 1; }

install() {
  if find_bin mariadbd mysqld >/dev/null; then return 0; fi
  log "installing mariadb-server from Debian's packages"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  # policy-rc.d keeps the package from starting the system-wide service; we run our own.
  $sudo apt-get install -y -qq mariadb-server mariadb-client >&2
}

client() { "$(find_bin mariadb mysql)" --no-defaults --protocol=socket --socket="$sock" -uroot "$@"; }

running() { [ -S "$sock" ] && client -e 'SELECT 1' >/dev/null 2>&1; }

start() {
  install
  if running; then
    # Running on this data already; on another port (an older default), restart it on this one.
    if [ "$(client -Nse 'SELECT @@port')" = "$port" ]; then echo "$url"; return 0; fi
    stop
  fi
  mkdir -p "$base"
  local user_opt=(); [ "$(id -u)" = 0 ] && user_opt=(--user=root)
  if [ ! -d "$data/mysql" ]; then
    log "initialising $data"
    "$(find_bin mariadb-install-db mysql_install_db)" --no-defaults --datadir="$data" "${user_opt[@]}" \
      --auth-root-authentication-method=socket --skip-test-db >"$base/install.log" 2>&1 \
      || { cat "$base/install.log" >&2; exit 1; }
  fi
  "$(find_bin mariadbd mysqld)" --no-defaults --datadir="$data" "${user_opt[@]}" \
    --bind-address=127.0.0.1 --port="$port" --socket="$sock" --pid-file="$pidf" \
    --log-error="$base/error.log" --skip-log-bin --innodb-buffer-pool-size=128M \
    --max-connections=1000 --skip-name-resolve >/dev/null 2>&1 &
  for _ in $(seq 1 120); do
    running && break
    sleep 0.5
  done
  running || { log "MariaDB did not start; see $base/error.log"; tail -20 "$base/error.log" >&2; exit 1; }
  client -e "CREATE USER IF NOT EXISTS 'leafid'@'127.0.0.1' IDENTIFIED BY 'leafid';
             GRANT ALL PRIVILEGES ON *.* TO 'leafid'@'127.0.0.1' WITH GRANT OPTION;"
  log "MariaDB up on 127.0.0.1:$port (data $data)"
  echo "$url"
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

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  url) echo "$url" ;;
  *) echo "usage: $0 start|stop|restart|url" >&2; exit 2 ;;
esac
