#!/usr/bin/env bash
# A private 3-node MariaDB Galera cluster for tests, on 127.0.0.1, from Debian's packages
# (mariadb-server, galera-4, rsync, iproute2, procps; installed if missing). Data in a directory
# of this checkout's own under /tmp (see Choices).
#
#   scripts/galera.sh start    # idempotent; starts what is down, waits until all 3 nodes are
#                              # Synced, prints the 3 URLs (space-separated, node 1 first)
#   scripts/galera.sh stop     # stops nodes 3, 2, 1 and waits until the processes are gone
#   scripts/galera.sh purge    # stop, then remove the data directory (a clone about to go)
#   scripts/galera.sh url      # prints the 3 URLs
#   scripts/galera.sh kill N   # SIGKILL node N's mariadbd (a crash); `start` rejoins it
#   scripts/galera.sh status   # one line per node: pid, state, cluster size; then the data dir
#
# URLs: mysql://leafid:leafid@127.0.0.1:PORT (user leafid, all privileges, no database).
#
# Choices (a test cluster: its data is disposable, speed and a small footprint come first):
# - Ports: $LEAFID_GALERA_PORT_BASE + offset, N = 1..3: SQL base+N; Galera group communication
#   base+3+N (base_port and gmcast.listen_addr); IST receive base+6+N (ist.recv_addr: its
#   default, base_port + 1, would be the next node's group port); rsync SST receive base+9+N
#   (wsrep_sst_receive_address). The default base is the first port of this checkout's block
#   (scripts/lib/common.sh: derived from the checkout's path, so two checkouts on one machine
#   never share a port; all below the ephemeral range 32768-60999). A cold start stops with one
#   line if another process holds one of the 12 ports.
# - Data directory: the nodes' datadirs, my.cnf files, sockets and logs live in
#   /tmp/leafid-galera.XXXXXX (made by mktemp, mode 0700, owned by the user the nodes run as),
#   whose path is recorded in target/galera/rundir so that stop, kill and status find it; a
#   record that is gone (a reboot cleared /tmp) or not that user's gets a new directory and a
#   cold start. Not under the checkout, because root runs the nodes as user mysql (below) and
#   mysql cannot pass through a checkout under a 0700 directory (root's home, mktemp -d); and a
#   path free of spaces is what mariadb-install-db and the rsync SST script need.
#   $LEAFID_GALERA_DIR, when set, is used as that directory instead (the caller sees to its
#   owner). A cluster still running in the older layout (target/galera/nodeN, ports 2400N) is
#   used as it is until stopped.
# - Everything binds 127.0.0.1 only (bind-address, gmcast.listen_addr, base_host, ist.recv_addr,
#   wsrep_node_address).
# - Each node runs with --defaults-file=DIR/nodeN/my.cnf, generated here: nothing is read from
#   /etc/mysql, and the SST scripts (which the server hands the same file) see the same settings.
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
# - Root runs the nodes as user mysql (created by Debian's mariadb-server) and the data
#   directory is mysql's, unlike scripts/mariadb.sh's --user=root: the joiner's rsync daemon,
#   started as root, would switch to user nobody (rsyncd's default for root) and could not write
#   into a root-owned datadir. Another user runs the nodes as itself.
# - The script logs in through the unix socket of each node as the database account named like
#   the OS user running it (auth by socket; root for root), as in mariadb.sh; user
#   leafid@127.0.0.1 is created through node 1 and replicates (DDL runs in TOI on all nodes).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
root="$LEAFID_ROOT"
record="$root/target/galera/rundir"
legacy="$root/target/galera"  # the older layout: nodeN under target/galera, ports 2400N
port_default="${LEAFID_GALERA_PORT_BASE:-$(leafid_port_block)}"
port_base="$port_default"
base=""  # set by use_base (start) or find_base (the other commands)
old=0    # 1 while a cluster of the older layout is the one in use
provider=/usr/lib/galera/libgalera_smm.so
nodes=(1 2 3)

log() { leafid_log "$@"; }
find_bin() { leafid_find_bin "$@"; }

install() {
  local missing=()
  { find_bin mariadbd mysqld && find_bin mariadb-install-db mysql_install_db &&
    find_bin wsrep_sst_rsync; } >/dev/null || missing+=(mariadb-server)
  find_bin mariadb mysql >/dev/null || missing+=(mariadb-client)
  [ -f "$provider" ] || missing+=(galera-4)
  command -v rsync >/dev/null || missing+=(rsync)
  # `ss`: the rsync SST script uses it to see its daemon listening.
  find_bin ss >/dev/null || missing+=(iproute2)
  command -v pgrep >/dev/null || missing+=(procps)
  leafid_install_packages "${missing[@]}"
}

# Whether the older layout's node N runs (its pid file under target/galera/nodeN).
legacy_alive() {
  local pid; pid="$(cat "$legacy/node$1/mysqld.pid" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

legacy_running() {
  [ -z "${LEAFID_GALERA_DIR:-}" ] || return 1
  local n; for n in "${nodes[@]}"; do legacy_alive "$n" && return 0; done; return 1
}

# The data directory for the commands that only look (stop, kill, status): the recorded one
# ("" when none); a running cluster of the older layout first.
find_base() {
  old=0; port_base="$port_default"
  if legacy_running; then
    base="$legacy"; old=1; port_base="${LEAFID_GALERA_PORT_BASE:-24000}"
  elif [ -n "${LEAFID_GALERA_DIR:-}" ]; then
    base="$LEAFID_GALERA_DIR"
  else
    base="$(leafid_rundir_recorded "$record")"
  fi
}

# The data directory for start: as find_base, else the recorded one or a new one (see header).
use_base() {
  old=0; port_base="$port_default"
  if legacy_running; then
    base="$legacy"; old=1; port_base="${LEAFID_GALERA_PORT_BASE:-24000}"
    log "a cluster of the older layout runs under $legacy; using it (stop makes the next start use /tmp)"
  elif [ -n "${LEAFID_GALERA_DIR:-}" ]; then
    base="$LEAFID_GALERA_DIR"; mkdir -p "$base"
  else
    base="$(leafid_rundir "$record" galera "$(leafid_service_user)")"
    if [ -d "$legacy/node1" ]; then
      log "removing the stopped older layout's data ($legacy/node1..3)"
      rm -rf "$legacy/node1" "$legacy/node2" "$legacy/node3"
    fi
  fi
}

sql_port() { echo $((port_base + $1)); }
group_port() {
  if [ "$old" = 1 ]; then echo $((port_base + 10 + $1)); else echo $((port_base + 3 + $1)); fi
}
ist_port() {
  if [ "$old" = 1 ]; then echo $((port_base + 20 + $1)); else echo $((port_base + 6 + $1)); fi
}
sst_port() {
  if [ "$old" = 1 ]; then echo $((port_base + 30 + $1)); else echo $((port_base + 9 + $1)); fi
}
all_ports() { local n; for n in "${nodes[@]}"; do sql_port "$n"; group_port "$n"; ist_port "$n"; sst_port "$n"; done; }
dir() { echo "$base/node$1"; }
sock() { echo "$(dir "$1")/mysqld.sock"; }
pidf() { echo "$(dir "$1")/mysqld.pid"; }
url() { echo "mysql://leafid:leafid@127.0.0.1:$(sql_port "$1")"; }
urls() { local n out=(); for n in "${nodes[@]}"; do out+=("$(url "$n")"); done; echo "${out[*]}"; }

client() {
  local n="$1"; shift
  "$(find_bin mariadb mysql)" --no-defaults --protocol=socket --socket="$(sock "$n")" -u"$LEAFID_DB_ADMIN" "$@"
}

# A wsrep status variable of node N ("" when the node does not answer).
status_var() {
  client "$1" -N -B -e "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}' || true
}

pid_of() { if [ -n "$base" ]; then cat "$(pidf "$1")" 2>/dev/null || true; fi; }

alive() { local pid; pid="$(pid_of "$1")"; [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

synced() {
  [ "$(status_var "$1" wsrep_ready)" = ON ] &&
    [ "$(status_var "$1" wsrep_local_state_comment)" = Synced ]
}

any_alive() { local n; for n in "${nodes[@]}"; do alive "$n" && return 0; done; return 1; }

write_cnf() {
  local n="$1" d; d="$(dir "$n")"
  local gport iport sport peers=() m
  gport="$(group_port "$n")" iport="$(ist_port "$n")" sport="$(sst_port "$n")"
  for m in "${nodes[@]}"; do peers+=("127.0.0.1:$(group_port "$m")"); done
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
      "${user_opt[@]}" --auth-root-authentication-method=socket \
      --auth-root-socket-user="$LEAFID_DB_ADMIN" --skip-test-db \
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
  use_base
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
    # shellcheck disable=SC2046 # one port per word
    leafid_ports_free_or_die $(all_ports)
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
  [ -n "$base" ] || return 0
  local n; for n in 3 2 1; do stop_node "$n"; done
}

# Stops the cluster of the older layout if it runs, then the one in the recorded directory.
stop_all() {
  while legacy_running; do
    find_base  # the older layout's cluster first
    stop
  done
  find_base
  stop
}

# Stops everything, then removes the data directory and its record.
purge() {
  stop_all
  [ -n "$base" ] || return 0
  if [ -n "${LEAFID_GALERA_DIR:-}" ]; then
    rm -rf "$base/node1" "$base/node2" "$base/node3"
  else
    rm -rf "$base"
    rm -f "$record"
  fi
  log "removed $base"
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
  echo "data=${base:-none}"
}

case "${1:-start}" in
  start) start ;;
  stop) stop_all ;;
  purge) purge ;;
  url) find_base; urls ;;
  kill) find_base; kill_node "${2:-}" ;;
  status) find_base; status ;;
  *) echo "usage: $0 start|stop|purge|url|kill N|status" >&2; exit 2 ;;
esac
