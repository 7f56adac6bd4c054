#!/usr/bin/env bash
# A private MariaDB primary with one replica for the failover tests (tests/api/replica_failover.rs),
# on 127.0.0.1, from Debian's packages (mariadb-server; installed if missing). Data under
# target/replica/ of this checkout.
#
#   scripts/replica.sh start [async|semisync]  # idempotent (default async): a running pair in
#                                # that mode is kept, anything else (another mode, a killed
#                                # primary, a promoted replica) is rebuilt from scratch; prints
#                                # the two URLs, primary first, space-separated
#   scripts/replica.sh stop      # stops both and waits until the processes are gone
#   scripts/replica.sh status    # one line per node: pid, port, read_only, replication threads
#   scripts/replica.sh url       # prints the two URLs
#   scripts/replica.sh lag       # the replica falls behind: async: STOP SLAVE (nothing more is
#                                # received); semisync: STOP SLAVE SQL_THREAD (events are still
#                                # received and acknowledged into the relay log, not applied)
#   scripts/replica.sh kill      # SIGKILL the primary's mariadbd (it never comes back)
#   scripts/replica.sh promote   # the replica applies what its relay log holds, forgets its
#                                # primary and takes writes: what MHA or Orchestrator do
#
# URLs: mysql://leafid:leafid@127.0.0.1:PORT (user leafid, all privileges, no database). Ports
# from $LEAFID_REPLICA_PORT_BASE (default 25000): the primary on base+1, the replica on base+2,
# below 32768 so they never collide with ephemeral ports.
#
# Choices (test data is disposable; each failover run needs a pair that has not failed over yet):
# - Every path is quoted and handed to mariadbd as one argument (--no-defaults, no my.cnf), so a
#   checkout whose path holds spaces works. mariadb-install-db is the exception: it splits its
#   --datadir at a space, so the system tables are initialised once in a space-free directory
#   made by mktemp under /tmp (removed right after) and moved to target/replica/template; every
#   rebuild copies that template, which is also faster than initialising twice.
# - Like scripts/mariadb.sh, root runs mariadbd with --user=root (no chown to user mysql, which
#   could not enter a checkout under a 0700 home directory); another user runs it as itself.
# - A rebuild stops both nodes, copies the template into both datadirs, starts them, creates the
#   users on each node with sql_log_bin=0 (root logs in through the unix socket), and points the
#   replica at the primary by GTID (MASTER_USE_GTID=slave_pos, user repl). `start` keeps a pair
#   only if the state file says it was built in the mode asked and nothing (lag, kill, promote)
#   touched it since, both nodes answer and both replication threads run.
# - binlog_format=ROW, log_slave_updates and a binlog on both nodes, so the promoted replica is
#   a primary like the first one. --skip-slave-start: replication starts only when this script
#   says so.
# - Semi-synchronous mode uses MariaDB's built-in plugin: on the primary
#   rpl_semi_sync_master_enabled with rpl_semi_sync_master_wait_point=AFTER_SYNC (a commit is
#   acknowledged to the client, and visible to other sessions, only after the replica has the
#   event in its relay log) and rpl_semi_sync_master_timeout=3600000 (an hour) with
#   rpl_semi_sync_master_wait_no_slave=ON, so it never falls back to asynchronous silently
#   within a test (a wait that long shows up as timed-out leases, not as lost ones); on the
#   replica rpl_semi_sync_slave_enabled. The replica is not a semi-sync master: once promoted it
#   has no replica of its own and would block every commit.
# - Small and fast: innodb_buffer_pool_size=32M, innodb_log_file_size=16M,
#   performance_schema=OFF; innodb_flush_log_at_trx_commit=2 and sync_binlog=0, since a killed
#   primary is thrown away, never restarted (the replica process is never killed).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
root="$LEAFID_ROOT"
base="${LEAFID_REPLICA_DIR:-$root/target/replica}"
# This checkout's block (scripts/lib/common.sh): primary at +13, replica at +14.
port_base="${LEAFID_REPLICA_PORT_BASE:-$(($(leafid_port_block) + 12))}"
template="$base/template"
state="$base/state"

log() { printf 'replica.sh: %s\n' "$*" >&2; }

find_bin() {
  for b in "$@"; do command -v "$b" >/dev/null 2>&1 && { command -v "$b"; return 0; }; done
  for b in "$@"; do [ -x "/usr/sbin/$b" ] && { echo "/usr/sbin/$b"; return 0; }; done
  return 1
}

install() {
  local missing=()
  find_bin mariadbd mysqld >/dev/null && find_bin mariadb-install-db mysql_install_db >/dev/null ||
    missing+=(mariadb-server)
  find_bin mariadb mysql >/dev/null || missing+=(mariadb-client)
  leafid_install_packages "${missing[@]}"
}

# Node names: primary (server id 1) and replica (server id 2).
port() { case "$1" in primary) echo $((port_base + 1)) ;; replica) echo $((port_base + 2)) ;; esac; }
server_id() { case "$1" in primary) echo 1 ;; replica) echo 2 ;; esac; }
dir() { echo "$base/$1"; }
sock() { echo "$(dir "$1")/mysqld.sock"; }
pidf() { echo "$(dir "$1")/mysqld.pid"; }
url() { echo "mysql://leafid:leafid@127.0.0.1:$(port "$1")"; }
urls() { echo "$(url primary) $(url replica)"; }

client() {
  local n="$1"; shift
  "$(find_bin mariadb mysql)" --no-defaults --protocol=socket --socket="$(sock "$n")" -u"$LEAFID_DB_ADMIN" "$@"
}

pid_of() { cat "$(pidf "$1")" 2>/dev/null || true; }
alive() { local pid; pid="$(pid_of "$1")"; [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }
answers() { alive "$1" && client "$1" -e 'SELECT 1' >/dev/null 2>&1; }

# One field of the replica's SHOW SLAVE STATUS ("" when there is none).
slave_field() {
  client replica -E -e 'SHOW SLAVE STATUS' 2>/dev/null |
    awk -v f="$1" -F': ' '{ k = $1; gsub(/^ +/, "", k); if (k == f) { print $2; exit } }'
}

mode_of_state() { cat "$state" 2>/dev/null || true; }

# Initialises the system tables once (see the header for why under /tmp).
make_template() {
  [ -d "$template/mysql" ] && return 0
  mkdir -p "$base"
  local tmp; tmp="$(mktemp -d /tmp/leafid-replica-init.XXXXXX)"
  local user_opt=(); [ "$(id -u)" = 0 ] && user_opt=(--user=root)
  log "initialising the system tables (in $tmp, then moved to $template)"
  if ! "$(find_bin mariadb-install-db mysql_install_db)" --no-defaults --datadir="$tmp/data" \
    "${user_opt[@]}" --auth-root-authentication-method=socket --auth-root-socket-user="$LEAFID_DB_ADMIN" --skip-test-db \
    --innodb-log-file-size=16M >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log" >&2
    rm -rf "$tmp"
    exit 1
  fi
  rm -rf "$template"
  mv "$tmp/data" "$template"
  rm -rf "$tmp"
}

launch() {
  local n="$1" mode="$2" d; d="$(dir "$n")"
  local user_opt=(); [ "$(id -u)" = 0 ] && user_opt=(--user=root)
  local semi=()
  if [ "$mode" = semisync ]; then
    if [ "$n" = primary ]; then
      semi=(--rpl-semi-sync-master-enabled=ON --rpl-semi-sync-master-wait-point=AFTER_SYNC
        --rpl-semi-sync-master-timeout=3600000 --rpl-semi-sync-master-wait-no-slave=ON)
    else
      semi=(--rpl-semi-sync-slave-enabled=ON)
    fi
  fi
  local sess=(); command -v setsid >/dev/null && sess=(setsid)
  "${sess[@]}" "$(find_bin mariadbd mysqld)" --no-defaults --datadir="$d/data" "${user_opt[@]}" \
    --bind-address=127.0.0.1 --port="$(port "$n")" --socket="$(sock "$n")" \
    --pid-file="$(pidf "$n")" --log-error="$d/error.log" --skip-name-resolve \
    --max-connections=300 --performance-schema=OFF --innodb-buffer-pool-size=32M \
    --innodb-log-file-size=16M --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 \
    --server-id="$(server_id "$n")" --log-bin=mysql-bin --binlog-format=ROW \
    --log-slave-updates --relay-log=relay-bin --skip-slave-start "${semi[@]}" \
    </dev/null >/dev/null 2>&1 &
  local i
  for i in $(seq 1 120); do
    answers "$n" && return 0
    sleep 0.25
  done
  log "$n did not start; see $d/error.log"
  tail -20 "$d/error.log" >&2
  exit 1
}

stop_node() {
  local n="$1" pid; pid="$(pid_of "$n")"
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  local i; for i in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$pid" 2>/dev/null; then
    log "$n (pid $pid) did not stop within 30 s; killing it"
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$(pidf "$n")"
}

stop() {
  rm -f "$state"
  stop_node replica
  stop_node primary
}

healthy() {
  local mode="$1"
  [ "$(mode_of_state)" = "$mode" ] && answers primary && answers replica &&
    [ "$(slave_field Slave_IO_Running)" = Yes ] && [ "$(slave_field Slave_SQL_Running)" = Yes ]
}

create_users() {
  client "$1" -e "SET SESSION sql_log_bin = 0;
    CREATE USER IF NOT EXISTS 'leafid'@'127.0.0.1' IDENTIFIED BY 'leafid';
    GRANT ALL PRIVILEGES ON *.* TO 'leafid'@'127.0.0.1' WITH GRANT OPTION;
    CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl';
    GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';"
}

start() {
  local mode="${1:-async}"
  case "$mode" in async|semisync) ;; *) log "unknown mode '$mode' (async or semisync)"; exit 2 ;; esac
  install
  if healthy "$mode"; then urls; return 0; fi
  log "building a fresh $mode primary/replica pair"
  stop
  leafid_ports_free_or_die "$(port primary)" "$(port replica)"
  make_template
  local n
  for n in primary replica; do
    rm -rf "$(dir "$n")"
    mkdir -p "$(dir "$n")"
    cp -a "$template" "$(dir "$n")/data"
  done
  for n in primary replica; do launch "$n" "$mode"; create_users "$n"; done
  client replica -e "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$(port primary),
      MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos,
      MASTER_CONNECT_RETRY=1;
    START SLAVE;"
  local i
  for i in $(seq 1 120); do
    [ "$(slave_field Slave_IO_Running)" = Yes ] && [ "$(slave_field Slave_SQL_Running)" = Yes ] &&
      break
    sleep 0.25
  done
  [ "$(slave_field Slave_IO_Running)" = Yes ] ||
    { log "the replica does not replicate: $(slave_field Last_IO_Error)"; exit 1; }
  if [ "$mode" = semisync ]; then
    # The primary counts the replica as a semi-sync client once its IO thread connected.
    for i in $(seq 1 120); do
      [ "$(client primary -N -B -e "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'" |
        awk '{print $2}')" = 1 ] && break
      sleep 0.25
    done
    [ "$(client primary -N -B -e "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'" |
      awk '{print $2}')" = ON ] || { log "semi-sync is not on at the primary"; exit 1; }
  fi
  echo "$mode" >"$state"
  log "$mode pair up: primary 127.0.0.1:$(port primary), replica 127.0.0.1:$(port replica) (data $base)"
  urls
}

lag() {
  local mode; mode="$(mode_of_state)"
  [ -n "$mode" ] || { log "no healthy pair to lag (run start first)"; exit 1; }
  echo "dirty" >"$state"
  if [ "$mode" = semisync ]; then
    client replica -e 'STOP SLAVE SQL_THREAD'
    log "replica SQL thread stopped (events still received and acknowledged)"
  else
    client replica -e 'STOP SLAVE'
    log "replica stopped (nothing more received)"
  fi
}

kill_primary() {
  local pid; pid="$(pid_of primary)"
  echo "dirty" >"$state" 2>/dev/null || true
  [ -n "$pid" ] || { log "the primary is not running"; return 0; }
  kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
  rm -f "$(pidf primary)"
  log "primary (pid $pid) killed"
}

promote() {
  answers replica || { log "the replica does not answer"; exit 1; }
  echo "dirty" >"$state" 2>/dev/null || true
  # Apply everything the relay log holds. The IO thread is left alone (it only retries the dead
  # primary): with MASTER_USE_GTID, starting the SQL thread while both threads are stopped
  # discards the relay log (seen: the events semi-sync had acknowledged were lost).
  client replica -e 'START SLAVE SQL_THREAD'
  local i read exec
  for i in $(seq 1 600); do
    read="$(slave_field Master_Log_File):$(slave_field Read_Master_Log_Pos)"
    exec="$(slave_field Relay_Master_Log_File):$(slave_field Exec_Master_Log_Pos)"
    [ "$read" = "$exec" ] && break
    sleep 0.05
  done
  [ "$read" = "$exec" ] || { log "relay log not applied within 30 s ($exec of $read)"; exit 1; }
  client replica -e 'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF;'
  log "replica promoted (applied up to $exec)"
}

status() {
  local n
  for n in primary replica; do
    if answers "$n"; then
      local extra=""
      [ "$n" = replica ] &&
        extra=" io=$(slave_field Slave_IO_Running) sql=$(slave_field Slave_SQL_Running)"
      echo "$n pid=$(pid_of "$n") port=$(port "$n") read_only=$(client "$n" -N -B -e 'SELECT @@read_only')$extra"
    else
      echo "$n down"
    fi
  done
  echo "state=$(mode_of_state)"
}

case "${1:-start}" in
  start) start "${2:-async}" ;;
  stop) stop ;;
  url) urls ;;
  status) status ;;
  lag) lag ;;
  kill) kill_primary ;;
  promote) promote ;;
  *) echo "usage: $0 start [async|semisync]|stop|status|url|lag|kill|promote" >&2; exit 2 ;;
esac
