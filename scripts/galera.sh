#!/usr/bin/env bash
# A private 3-node MariaDB Galera cluster for tests, on 127.0.0.1, from Debian's packages
# (mariadb-server, galera-4, rsync; installed if missing). Data under target/galera/nodeN.
#
#   scripts/galera.sh start    # idempotent; starts what is down, waits until all 3 nodes are
#                              # Synced, prints the 3 URLs (space-separated, node 1 first)
#   scripts/galera.sh stop     # stops nodes 3, 2, 1 and waits until the processes are gone
#   scripts/galera.sh url      # prints the 3 URLs
#   scripts/galera.sh kill N   # SIGKILL node N's mariadbd (a crash); `start` rejoins it
#   scripts/galera.sh status   # one line per node: pid, state, cluster size
#
# URLs: mysql://leafid:leafid@127.0.0.1:2400N (user leafid, all privileges, no database).
#
# Choices (a test cluster: its data is disposable, speed and a small footprint come first):
# - Ports, all below 32768 so they never collide with ephemeral ports (Linux hands out
#   32768-60999), offset from $LEAFID_GALERA_PORT_BASE (default 24000), N = 1..3:
#     SQL 2400N; Galera group communication 2401N (base_port and gmcast.listen_addr);
#     IST receive 2402N (ist.recv_addr: its default, base_port + 1, would be the next node's
#     group port); rsync SST receive 2403N (wsrep_sst_receive_address).
# - Everything binds 127.0.0.1 only (bind-address, gmcast.listen_addr, base_host, ist.recv_addr,
#   wsrep_node_address).
# - Each node runs with --defaults-file=target/galera/nodeN/my.cnf, generated here: nothing is
#   read from /etc/mysql, and the SST scripts (which the server hands the same file) see the same
#   settings.
# - Galera requires binlog_format=ROW, InnoDB and innodb_autoinc_lock_mode=2 (interleaved).
# - SST is rsync (wsrep_sst_method=rsync): no credentials needed, nothing but rsync to install.
#   It blocks the donor while it copies, which is fine for a handful of megabytes.
# - Cold start (no node running): node 1 bootstraps (--wsrep-new-cluster; its grastate.dat is
#   marked safe_to_bootstrap, whatever order the cluster stopped or crashed in), then nodes 2 and
#   3 start one after the other on EMPTY datadirs, so every cold start proves rsync SST works.
#   A node started while others run (after `kill N`) keeps its datadir: its position is
#   recovered first (mariadbd --wsrep-recover, as Debian's galera_recovery does), so it rejoins
#   by IST when the donor's gcache still holds the missing writesets, else by SST.
# - Small: innodb_buffer_pool_size=32M, innodb_log_file_size=16M (rsync copies it at each SST),
#   gcache.size=32M, performance_schema=OFF.
# - innodb_flush_log_at_trx_commit=2: the usual Galera setting (a commit is durable once the
#   other nodes have it); the tests measure certification conflicts, not fsyncs.
# - evs.suspect_timeout=PT3S / evs.inactive_timeout=PT6S (defaults 5 s / 15 s; keepalive_period
#   PT0.5S, as it must stay below a third of the suspect timeout): a killed node leaves the
#   view within seconds, so the tests' node-kill run stays short. Loopback has no network
#   hiccups, but a starved machine does: with 2 s, a compile running beside the node-kill test
#   once left nodes 1 and 3 unable to hear each other in time, each alone and non-primary
#   (`start` now restarts such a cluster instead of waiting for it).
# - pc.recovery=FALSE: a restart never re-forms the primary component from gvwstate.dat behind
#   this script's back; the cold-start rule above decides who bootstraps.
# - Root runs the nodes as user mysql (created by Debian's mariadb-server) and chowns
#   target/galera to it, unlike scripts/mariadb.sh's --user=root: the joiner's rsync daemon,
#   started as root, would switch to user nobody (rsyncd's default for root) and could not write
#   into a root-owned datadir. Another user runs the nodes as itself.
# - Root logs in through the unix socket of each node (auth by socket), as in mariadb.sh; user
#   leafid@127.0.0.1 is created through node 1 and replicates (DDL runs in TOI on all nodes).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
base="${LEAFID_GALERA_DIR:-$root/target/galera}"
port_base="${LEAFID_GALERA_PORT_BASE:-24000}"
provider=/usr/lib/galera/libgalera_smm.so
nodes=(1 2 3)

log() { printf 'galera.sh: %s\n' "$*" >&2; }

find_bin() {
  for b in "$@"; do command -v "$b" >/dev/null 2>&1 && { command -v "$b"; return 0; }; done
  for b in "$@"; do [ -x "/usr/sbin/$b" ] && { echo "/usr/sbin/$b"; return 0; }; done
  return 1
}

install() {
  if find_bin mariadbd mysqld >/dev/null && [ -f "$provider" ] && command -v rsync >/dev/null \
    && command -v wsrep_sst_rsync >/dev/null && command -v ss >/dev/null; then
    return 0
  fi
  log "installing mariadb-server, galera-4 and rsync from Debian's packages"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  # iproute2 gives `ss`, which the rsync SST script uses to see its daemon listening.
  $sudo apt-get install -y -qq mariadb-server mariadb-client galera-4 rsync iproute2 >&2
}

sql_port() { echo $((port_base + $1)); }
dir() { echo "$base/node$1"; }
sock() { echo "$(dir "$1")/mysqld.sock"; }
pidf() { echo "$(dir "$1")/mysqld.pid"; }
url() { echo "mysql://leafid:leafid@127.0.0.1:$(sql_port "$1")"; }
urls() { local n out=(); for n in "${nodes[@]}"; do out+=("$(url "$n")"); done; echo "${out[*]}"; }

client() {
  local n="$1"; shift
  "$(find_bin mariadb mysql)" --no-defaults --protocol=socket --socket="$(sock "$n")" -uroot "$@"
}

# A wsrep status variable of node N ("" when the node does not answer).
status_var() {
  client "$1" -N -B -e "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}' || true
}

pid_of() { cat "$(pidf "$1")" 2>/dev/null || true; }

alive() { local pid; pid="$(pid_of "$1")"; [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

synced() {
  [ "$(status_var "$1" wsrep_ready)" = ON ] &&
    [ "$(status_var "$1" wsrep_local_state_comment)" = Synced ]
}

any_alive() { local n; for n in "${nodes[@]}"; do alive "$n" && return 0; done; return 1; }

write_cnf() {
  local n="$1" d; d="$(dir "$n")"
  local gport=$((port_base + 10 + n)) iport=$((port_base + 20 + n)) sport=$((port_base + 30 + n))
  local peers=() m
  for m in "${nodes[@]}"; do peers+=("127.0.0.1:$((port_base + 10 + m))"); done
  local user=""; [ "$(id -u)" = 0 ] && user="user=mysql"
  mkdir -p "$d/data"
  [ "$(id -u)" = 0 ] && chown -R mysql:mysql "$d"
  cat >"$d/my.cnf" <<EOF
# Generated by scripts/galera.sh: node $n of the test cluster (see the script's header).
[mysqld]
$user
datadir=$d/data
socket=$(sock "$n")
pid-file=$(pidf "$n")
log-error=$d/error.log
bind-address=127.0.0.1
port=$(sql_port "$n")
skip-name-resolve
max-connections=300
performance_schema=OFF
innodb_buffer_pool_size=32M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=2
default_storage_engine=InnoDB
binlog_format=ROW
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=$provider
wsrep_cluster_name=leafid_test
wsrep_cluster_address=gcomm://$(IFS=,; echo "${peers[*]}")
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1
wsrep_node_incoming_address=127.0.0.1:$(sql_port "$n")
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$sport
wsrep_provider_options="base_host=127.0.0.1;base_port=$gport;gmcast.listen_addr=tcp://127.0.0.1:$gport;ist.recv_addr=127.0.0.1:$iport;gcache.size=32M;evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;pc.recovery=FALSE"
EOF
}

# Starts node N's mariadbd in the background (own session: a Ctrl-C of the caller must not reach
# it) with extra options, and waits until it answers SQL and is Synced. A start that dies on
# Galera's "Failed to set thread schedparams" (ESRCH from pthread_setschedparam on the gcomm
# thread: a start-up race seen about one start in five on a busy 2-core VM) is simply tried again.
launch() {
  local n="$1"; shift
  local d; d="$(dir "$n")"
  local sess=(); command -v setsid >/dev/null && sess=(setsid)
  local try
  for try in 1 2 3 4 5 6; do
    local seen=0; [ -f "$d/error.log" ] && seen="$(wc -l <"$d/error.log")"
    "${sess[@]}" "$(find_bin mariadbd mysqld)" --defaults-file="$d/my.cnf" "$@" \
      </dev/null >/dev/null 2>&1 &
    # A joiner answers SQL only after its SST; 180 s covers a slow machine.
    local i
    for i in $(seq 1 360); do
      synced "$n" && return 0
      if [ "$i" -gt 4 ] && ! alive "$n" && ! pgrep -f -- "--defaults-file=$d/my.cnf" >/dev/null; then
        break
      fi
      sleep 0.5
    done
    tail -n +"$((seen + 1))" "$d/error.log" | grep -q 'Failed to set thread schedparams' || break
    log "node $n hit Galera's schedparam start-up race (try $try); starting it again"
  done
  log "node $n did not become Synced; see $d/error.log"
  tail -30 "$d/error.log" >&2
  exit 1
}

# The position InnoDB recorded (uuid:seqno), for a node whose grastate.dat lost it in a crash.
recover_position() {
  local n="$1" d; d="$(dir "$n")"
  "$(find_bin mariadbd mysqld)" --defaults-file="$d/my.cnf" --wsrep-recover \
    --log-error="$d/recover.log" </dev/null >/dev/null 2>&1 || true
  sed -n 's/.*WSREP: Recovered position: *\([^ ]*\).*/\1/p' "$d/recover.log" | tail -1
}

start_bootstrap() {
  local d; d="$(dir 1)"
  write_cnf 1
  if [ ! -d "$d/data/mysql" ]; then
    log "initialising $d/data"
    local user_opt=(); [ "$(id -u)" = 0 ] && user_opt=(--user=mysql)
    "$(find_bin mariadb-install-db mysql_install_db)" --no-defaults --datadir="$d/data" \
      "${user_opt[@]}" --auth-root-authentication-method=socket --skip-test-db \
      >"$d/install.log" 2>&1 || { cat "$d/install.log" >&2; exit 1; }
  fi
  [ -f "$d/data/grastate.dat" ] &&
    sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$d/data/grastate.dat"
  log "bootstrapping the cluster on node 1"
  launch 1 --wsrep-new-cluster
}

start_joiner() {
  local n="$1" fresh="$2" d; d="$(dir "$n")"
  write_cnf "$n"
  local opts=()
  if [ "$fresh" = 1 ]; then
    # An empty datadir: the node gets everything by rsync SST.
    rm -rf "$d/data"; mkdir -p "$d/data"
    [ "$(id -u)" = 0 ] && chown mysql:mysql "$d/data"
    log "node $n joins on an empty datadir (SST)"
  else
    local pos; pos="$(recover_position "$n")"
    [ -n "$pos" ] && opts=(--wsrep-start-position="$pos")
    log "node $n rejoins from position ${pos:-unknown} (IST if the donor still has it, else SST)"
  fi
  launch "$n" "${opts[@]}"
}

create_user() {
  client "$1" -e "CREATE USER IF NOT EXISTS 'leafid'@'127.0.0.1' IDENTIFIED BY 'leafid';
                  GRANT ALL PRIVILEGES ON *.* TO 'leafid'@'127.0.0.1' WITH GRANT OPTION;"
}

start() {
  install
  mkdir -p "$base"
  local n cold=0
  # A running node that does not become Synced (e.g. a partition under heavy load left no
  # primary component: each survivor alone and non-primary) is not waited for: the cluster is
  # stopped and cold-started, which is cheap for disposable test data.
  for n in "${nodes[@]}"; do
    alive "$n" || continue
    local i; for i in $(seq 1 40); do synced "$n" && break; sleep 0.5; done
    if ! synced "$n"; then
      log "node $n runs but is not Synced after 20 s (no primary component?); restarting the cluster"
      stop
      break
    fi
  done
  if ! any_alive; then
    cold=1
    start_bootstrap
  fi
  for n in "${nodes[@]}"; do
    if alive "$n"; then
      # Still joining (or a desynced donor): wait, never start a second process on its datadir.
      local i; for i in $(seq 1 360); do synced "$n" && break; sleep 0.5; done
      synced "$n" || { log "node $n runs but is not Synced; see $(dir "$n")/error.log"; exit 1; }
    else
      start_joiner "$n" "$cold"
    fi
  done
  local size; size="$(status_var 1 wsrep_cluster_size)"
  [ "$size" = 3 ] || { log "cluster size is '$size', not 3"; exit 1; }
  for n in "${nodes[@]}"; do
    alive "$n" && synced "$n" && { create_user "$n"; break; }
  done
  log "Galera cluster up: 3 nodes Synced on 127.0.0.1 (data $base)"
  urls
}

stop_node() {
  local n="$1" pid; pid="$(pid_of "$n")"
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  local i; for i in $(seq 1 240); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$pid" 2>/dev/null; then
    log "node $n (pid $pid) did not stop within 60 s; killing it"
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$(pidf "$n")"
}

stop() {
  # Node 1 last: it is the one the next cold start bootstraps.
  local n; for n in 3 2 1; do stop_node "$n"; done
}

kill_node() {
  local n="${1:?usage: $0 kill N}" pid
  case "$n" in 1|2|3) ;; *) log "no node $n"; exit 2 ;; esac
  pid="$(pid_of "$n")"
  [ -n "$pid" ] || { log "node $n is not running"; return 0; }
  kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  log "node $n (pid $pid) killed"
}

status() {
  local n
  for n in "${nodes[@]}"; do
    if alive "$n"; then
      echo "node$n pid=$(pid_of "$n") port=$(sql_port "$n") state=$(status_var "$n" wsrep_local_state_comment) ready=$(status_var "$n" wsrep_ready) cluster_size=$(status_var "$n" wsrep_cluster_size)"
    else
      echo "node$n down"
    fi
  done
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  url) urls ;;
  kill) kill_node "${2:-}" ;;
  status) status ;;
  *) echo "usage: $0 start|stop|url|kill N|status" >&2; exit 2 ;;
esac
