#!/usr/bin/env bash
# A two-node Patroni cluster of PostgreSQL 15 with one etcd, and HAProxy in front routing to the
# node whose Patroni REST API answers `GET /primary` with 200 (the usual topology), for the
# failover tests (tests/api/patroni_failover.rs). Everything on 127.0.0.1, from Debian's
# packages (patroni, etcd-server, postgresql, haproxy; installed if missing).
#
#   scripts/patroni.sh start       # idempotent: starts whatever is not running (etcd, either
#                                  # node, HAProxy; a killed node rejoins as a replica, cloned
#                                  # anew), waits for a leader and a streaming replica;
#                                  # prints the HAProxy URL
#                                  # postgres://leafid:leafid@127.0.0.1:PORT/leafid
#   scripts/patroni.sh nodes       # the two nodes' URLs, one a line (node pg1 first)
#   scripts/patroni.sh url         # the HAProxy URL
#   scripts/patroni.sh status      # patronictl list, HAProxy's view of the two nodes
#   scripts/patroni.sh leader      # the leader's name (pg1 or pg2), nothing when there is none
#   scripts/patroni.sh lag         # the replica stops receiving WAL (a stalled link): SIGSTOP
#                                  # to its walreceiver; `start` or `stop` resume it
#   scripts/patroni.sh kill-leader # the leader's node dies: SIGKILL to its Patroni, its
#                                  # postmaster and every backend at once (a machine lost);
#                                  # prints the dead node's name. The other node takes over
#                                  # once the leader key expires (ttl). After `lag`, the stopped
#                                  # walreceiver is then killed too: the WAL in flight on the
#                                  # stalled link is lost with it (the replica's postmaster
#                                  # restarts its processes, as after any child's crash, and
#                                  # keeps the WAL it had written)
#   scripts/patroni.sh switchover  # patronictl switchover --force: a clean hand-over to the
#                                  # replica; waits until the new leader is up; prints its name
#   scripts/patroni.sh sync on|off # synchronous_mode through patronictl edit-config; waits until
#                                  # the replica is (on) or is no longer (off) synchronous
#   scripts/patroni.sh stop        # stops HAProxy, both nodes (and their PostgreSQL), etcd
#   scripts/patroni.sh purge       # stop, then deletes the data directory
#
# Ports: this checkout's block (scripts/lib/common.sh), base = block + 17, or
# $LEAFID_PATRONI_PORT_BASE: PostgreSQL of pg1 and pg2 on base+0 and base+1, their Patroni REST
# on base+2 and base+3, etcd client base+4 and peer base+5, HAProxy (the primary) base+6, and
# HAProxy's stats page base+7.
#
# Choices (test data is disposable):
# - Timing: ttl 10 s, loop_wait 2 s, retry_timeout 4 s (the smallest Patroni accepts without
#   warning: ttl >= loop_wait + 2 * retry_timeout), so a lost leader is replaced about 9-11 s
#   after it died, instead of 30 s with Patroni's defaults. maximum_lag_on_failover is the
#   default 1 MB. HAProxy checks every node twice a second (`inter 500ms fall 2 rise 1`,
#   `on-marked-down shutdown-sessions`): a node stops receiving connections about 1 s after its
#   /primary stops answering 200 and its open connections are cut then; a new leader receives
#   them within 0.5 s of its promotion.
# - PostgreSQL keeps its durable defaults (fsync on, synchronous_commit on, full_page_writes):
#   what is measured is what replication loses, not what a node's own crash loses. A killed
#   node is cloned anew by `start` (its data directory removed, Patroni takes a base backup):
#   faster here than Patroni's crash recovery then pg_rewind, which stay configured (use_pg_rewind,
#   wal_log_hints, re-clone when a rewind fails) for a node restarted by other means.
# - synchronous_mode is off after a bootstrap; `sync on` turns it on in the DCS (not strict:
#   with no replica left, the leader takes writes alone, which is what lets a kill -9 in sync
#   mode fail over to a single node).
# - Data, configuration (one postgresql.yml per node) and logs live in a per-checkout directory
#   under /tmp (leafid_rundir), owned by the user the processes run as: postgres when this runs
#   as root (PostgreSQL refuses to run as root), else the caller. Nothing the processes read is
#   in the checkout, so a checkout under a 0700 directory, or with a space in its path, works.
#   Processes start through setpriv (no fork: the recorded pid is the program's) in sessions of
#   their own, so they outlive this script; the pid files are in the data directory.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

base="${LEAFID_PATRONI_PORT_BASE:-$(($(leafid_port_block) + 17))}"
record="$LEAFID_ROOT/target/patroni-rundir"
# The cluster's name in etcd: one per port base, so two checkouts never share a key.
scope="leafid-$base"
pg_bin=/usr/lib/postgresql/15/bin
# patroni and patronictl are Python scripts: Debian's interpreter, not one a PATH puts first.
py=/usr/bin/python3

pg_port() { case "$1" in pg1) echo "$base" ;; pg2) echo $((base + 1)) ;; esac; }
rest_port() { case "$1" in pg1) echo $((base + 2)) ;; pg2) echo $((base + 3)) ;; esac; }
etcd_port=$((base + 4))
etcd_peer=$((base + 5))
ha_port=$((base + 6))
stats_port=$((base + 7))
nodes=(pg1 pg2)

url() { echo "postgres://leafid:leafid@127.0.0.1:$ha_port/leafid"; }
node_urls() { local n; for n in "${nodes[@]}"; do echo "postgres://leafid:leafid@127.0.0.1:$(pg_port "$n")/leafid"; done; }

# The user every process runs as (see the header).
svc_user() { if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi; }

install() {
  local missing=()
  [ -x /usr/bin/patroni ] || missing+=(patroni)
  [ -x /usr/bin/etcd ] || missing+=(etcd-server)
  [ -x "$pg_bin/postgres" ] || missing+=(postgresql-15)
  [ -x /usr/bin/psql ] || missing+=(postgresql-client)
  leafid_find_bin haproxy >/dev/null || missing+=(haproxy)
  [ -x /usr/bin/curl ] || missing+=(curl)
  [ "${#missing[@]}" -gt 0 ] || return 0
  leafid_install_packages "${missing[@]}"
  # policy-rc.d (where present) keeps the packages from starting their system-wide services;
  # where it is absent, stop the ones they started (this script runs its own instances).
  if [ ! -x /usr/sbin/policy-rc.d ] && command -v systemctl >/dev/null 2>&1; then
    local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    "${sudo[@]}" systemctl disable --now etcd patroni >/dev/null 2>&1 || true
  fi
}

# The run directory; made when ASK=make, else only found (empty when there is none).
rundir() {
  if [ "${1:-}" = make ]; then leafid_rundir "$record" patroni "$(svc_user)"; else leafid_rundir_recorded "$record"; fi
}

# Runs a command as the service user, in the run directory (a cwd it can enter).
as_svc() {
  local dir="$1"; shift
  if [ "$(id -un)" = "$(svc_user)" ]; then
    (cd "$dir" && env HOME="$dir" "$@")
  else
    (cd "$dir" && setpriv --reuid="$(svc_user)" --regid="$(id -g "$(svc_user)")" --init-groups \
      env HOME="$dir" USER="$(svc_user)" "$@")
  fi
}

# Starts a long-running program as the service user in a session of its own; its pid into PIDFILE.
launch() {
  local dir="$1" pidfile="$2" logfile="$3"; shift 3
  local sess=(); command -v setsid >/dev/null && sess=(setsid)
  if [ "$(id -un)" = "$(svc_user)" ]; then
    (cd "$dir" && exec "${sess[@]}" env HOME="$dir" "$@" </dev/null >>"$logfile" 2>&1) &
  else
    (cd "$dir" && exec "${sess[@]}" setpriv --reuid="$(svc_user)" --regid="$(id -g "$(svc_user)")" \
      --init-groups env HOME="$dir" USER="$(svc_user)" "$@" </dev/null >>"$logfile" 2>&1) &
  fi
  echo "$!" >"$pidfile"
}

pid_in() { cat "$1" 2>/dev/null || true; }
alive_pid() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
# The pid in PIDFILE when that process runs and its command line holds WORD (a reused pid is not
# ours); nothing otherwise. These helpers always succeed: `x="$(helper)"` under set -e.
running() {
  local pid; pid="$(pid_in "$1")"
  if alive_pid "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"; then echo "$pid"; fi
}

patroni_pid() { running "$1/$2/patroni.pid" "patroni"; }
postmaster_pid() {
  local pid; pid="$(head -1 "$1/$2/data/postmaster.pid" 2>/dev/null || true)"
  if alive_pid "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q postgres; then echo "$pid"; fi
}
etcd_pid() { running "$1/etcd.pid" "etcd"; }
haproxy_pid() { running "$1/haproxy.pid" "haproxy"; }

# GET http://127.0.0.1:PORT/PATH of a Patroni REST API: the HTTP status ("000" when it does not answer).
rest_status() { curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$1/$2" 2>/dev/null || true; }

# The cluster as Patroni's REST API tells it, one "name role state" line per member (role
# leader, replica or sync_standby; state running, starting, stopped...).
members() {
  local n json
  for n in "${nodes[@]}"; do
    json="$(curl -s -m 1 "http://127.0.0.1:$(rest_port "$n")/cluster" 2>/dev/null)" || continue
    [ -n "$json" ] || continue
    printf '%s' "$json" | "$py" -c '
import json, sys
for m in json.load(sys.stdin).get("members", []):
    print(m.get("name"), m.get("role"), m.get("state"))' 2>/dev/null && return 0
  done
  return 0
}

# The leader: the node whose Patroni answers GET /primary with 200, as HAProxy sees it (the DCS
# still names a killed leader until its key expires).
leader() {
  local n
  for n in "${nodes[@]}"; do
    [ "$(rest_status "$(rest_port "$n")" primary)" = 200 ] && { echo "$n"; return 0; }
  done
  return 0
}

# The leader's replication connections as its Patroni reports them (pg_stat_replication), one
# "name state sync_state" line each (e.g. "pg2 streaming async").
replication() {
  local n; n="$(members | awk '$2 == "leader" && $3 == "running" { print $1; exit }')"
  [ -n "$n" ] || return 0
  curl -s -m 1 "http://127.0.0.1:$(rest_port "$n")/patroni" 2>/dev/null | "$py" -c '
import json, sys
for r in json.load(sys.stdin).get("replication", []):
    print(r.get("application_name"), r.get("state"), r.get("sync_state"))' 2>/dev/null || true
}

# Whether there is a running leader with a running replica member that streams from it (its
# sync_state SYNC when given: sync or async); for sync, Patroni must also have recorded it as
# the synchronous standby. A node still taking its base backup is "creating replica", and its
# pg_basebackup connection streams too: the member's name and state tell them apart.
healthy() {
  local want="${1:-}" r roles='(replica|sync_standby)'
  [ "$want" = sync ] && roles=sync_standby
  for r in $(members | awk -v roles="^${roles}\$" '$2 ~ roles && $3 == "running" { print $1 }'); do
    replication | grep -Eq "^$r streaming ${want:-(sync|async|potential|quorum)}\$" && return 0
  done
  return 1
}

write_configs() {
  local dir="$1" n
  cat >"$dir/post_bootstrap.sh" <<'EOF'
#!/bin/sh
# Run by Patroni once, on the node that bootstrapped the cluster, with a superuser URL.
set -e
psql -v ON_ERROR_STOP=1 "$1" <<'SQL'
CREATE ROLE leafid LOGIN CREATEDB PASSWORD 'leafid';
CREATE DATABASE leafid OWNER leafid;
SQL
EOF
  chmod 755 "$dir/post_bootstrap.sh"
  for n in "${nodes[@]}"; do
    mkdir -p "$dir/$n"
    [ "$(id -un)" = "$(svc_user)" ] || chown "$(svc_user):" "$dir/$n"
    cat >"$dir/$n/postgresql.yml" <<EOF
# Patroni configuration of node $n (written by scripts/patroni.sh).
scope: $scope
namespace: /leafid/
name: $n
log:
  level: INFO
  format: '%(asctime)s %(levelname)s: %(message)s'
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
etcd3:
  host: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 200
        wal_level: replica
        hot_standby: 'on'
        wal_log_hints: 'on'
        max_wal_senders: 5
        max_replication_slots: 5
        wal_keep_size: 64MB
  initdb:
  - encoding: UTF8
  - locale: C
  pg_hba:
  - local all all trust
  - host replication replicator 127.0.0.1/32 scram-sha-256
  - host all all 127.0.0.1/32 scram-sha-256
  post_bootstrap: $dir/post_bootstrap.sh
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $dir/$n/data
  bin_dir: $pg_bin
  pgpass: $dir/$n/pgpass
  use_unix_socket: true
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
  parameters:
    unix_socket_directories: '$dir/$n'
    shared_buffers: 32MB
    logging_collector: 'on'
    log_directory: '$dir/$n'
    log_filename: postgres.log
    log_file_mode: '0600'
  basebackup:
  - checkpoint: fast
EOF
  done
  cat >"$dir/haproxy.cfg" <<EOF
# HAProxy in front of the Patroni cluster (written by scripts/patroni.sh): TCP to the node
# whose Patroni REST API answers GET /primary with 200.
global
  maxconn 400
defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s
listen stats
  mode http
  bind 127.0.0.1:$stats_port
  stats enable
  stats uri /
listen primary
  bind 127.0.0.1:$ha_port
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
  server pg1 127.0.0.1:$(pg_port pg1) maxconn 200 check port $(rest_port pg1)
  server pg2 127.0.0.1:$(pg_port pg2) maxconn 200 check port $(rest_port pg2)
EOF
}

start_etcd() {
  local dir="$1"
  [ -n "$(etcd_pid "$dir")" ] && return 0
  leafid_ports_free_or_die "$etcd_port" "$etcd_peer"
  launch "$dir" "$dir/etcd.pid" "$dir/etcd.log" /usr/bin/etcd --name etcd0 --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "etcd0=http://127.0.0.1:$etcd_peer" --initial-cluster-state new \
    --initial-cluster-token "$scope" --log-level warn
  local _
  for _ in $(seq 1 100); do
    [ "$(curl -s -m 1 "http://127.0.0.1:$etcd_port/health" 2>/dev/null)" != "" ] && return 0
    sleep 0.1
  done
  leafid_log "etcd did not start; see $dir/etcd.log"; tail -20 "$dir/etcd.log" >&2; exit 1
}

start_node() {
  local dir="$1" n="$2"
  [ -n "$(patroni_pid "$dir" "$n")" ] && return 0
  # A postmaster left by a killed Patroni is adopted by the new one (Patroni's own behaviour);
  # only a missing postmaster needs its port free.
  if [ -z "$(postmaster_pid "$dir" "$n")" ]; then
    leafid_ports_free_or_die "$(pg_port "$n")"
    # A killed node while the other one leads: re-cloned (a base backup of the small test
    # cluster, about 3 s) rather than recovered and rewound (about 13 s measured).
    local l; l="$(leader)"
    if [ -n "$l" ] && [ "$l" != "$n" ] && [ -d "$dir/$n/data" ]; then
      rm -rf "$dir/$n/data"
      leafid_log "$n re-cloned from the leader $l"
    fi
  fi
  leafid_ports_free_or_die "$(rest_port "$n")"
  launch "$dir" "$dir/$n/patroni.pid" "$dir/$n/patroni.log" "$py" /usr/bin/patroni "$dir/$n/postgresql.yml"
}

start_haproxy() {
  local dir="$1"
  [ -n "$(haproxy_pid "$dir")" ] && return 0
  leafid_ports_free_or_die "$ha_port" "$stats_port"
  launch "$dir" "$dir/haproxy.pid" "$dir/haproxy.log" "$(leafid_find_bin haproxy)" -db -f "$dir/haproxy.cfg"
}

# Waits until there is a leader with a streaming replica (sync_state ROLE when given: sync or
# async), at most SECS seconds.
wait_healthy() {
  local dir="$1" secs="$2" role="${3:-}" _
  for _ in $(seq 1 $((secs * 4))); do
    healthy "$role" && return 0
    sleep 0.25
  done
  leafid_log "no leader with a streaming ${role:-replica} within ${secs} s; logs in $dir/pg1/patroni.log, $dir/pg2/patroni.log"
  members >&2
  replication >&2
  tail -n 5 "$dir/pg1/patroni.log" "$dir/pg2/patroni.log" >&2
  exit 1
}

# Waits until HAProxy routes to the leader: a connection through it reaches a primary.
wait_routed() {
  local dir="$1" _
  for _ in $(seq 1 120); do
    [ "$(PGPASSWORD=leafid PGCONNECT_TIMEOUT=2 psql -X -A -t -h 127.0.0.1 -p "$ha_port" -U leafid -d leafid \
      -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && return 0
    sleep 0.25
  done
  leafid_log "HAProxy on $ha_port does not reach the primary; see $dir/haproxy.log"; exit 1
}

start() {
  install
  local dir; dir="$(rundir make)"
  # HAProxy is restarted when its configuration changed (a newer script); Patroni's settings
  # in the DCS come from the bootstrap only: `purge` to change them.
  local before; before="$(cat "$dir/haproxy.cfg" 2>/dev/null || true)"
  write_configs "$dir"
  if [ "$before" != "$(cat "$dir/haproxy.cfg")" ]; then stop_pid "$(haproxy_pid "$dir")" TERM haproxy; fi
  resume_lagged "$dir"
  start_etcd "$dir"
  local n
  for n in "${nodes[@]}"; do start_node "$dir" "$n"; done
  # A first bootstrap (initdb, then a base backup for the replica) takes longer than a rejoin.
  wait_healthy "$dir" 120
  start_haproxy "$dir"
  wait_routed "$dir"
  leafid_log "leader $(leader), HAProxy 127.0.0.1:$ha_port, stats http://127.0.0.1:$stats_port/ (data $dir)"
  url
}

# Stops the process in PIDFILE-like PID with SIGNAL, waits up to 30 s, then SIGKILL.
stop_pid() {
  local pid="$1" sig="$2" what="$3" _
  alive_pid "$pid" || return 0
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 1 300); do alive_pid "$pid" || return 0; sleep 0.1; done
  leafid_log "$what (pid $pid) did not stop within 30 s; killing it"
  kill -9 "$pid" 2>/dev/null || true
  while alive_pid "$pid"; do sleep 0.1; done
}

stop() {
  local dir; dir="$(rundir)"
  [ -n "$dir" ] || return 0
  resume_lagged "$dir"
  stop_pid "$(haproxy_pid "$dir")" TERM haproxy
  local n
  # Patroni stops its PostgreSQL on SIGTERM; a postmaster left by a killed Patroni is stopped
  # directly (SIGINT: fast shutdown).
  for n in "${nodes[@]}"; do stop_pid "$(patroni_pid "$dir" "$n")" TERM "patroni $n"; done
  for n in "${nodes[@]}"; do stop_pid "$(postmaster_pid "$dir" "$n")" INT "postgres $n"; done
  stop_pid "$(etcd_pid "$dir")" TERM etcd
  rm -f "$dir/haproxy.pid" "$dir/etcd.pid" "$dir"/pg?/patroni.pid
}

purge() {
  stop
  local dir; dir="$(rundir)"
  [ -n "$dir" ] && rm -rf "$dir"
  rm -f "$record"
}

ctl() {
  local dir="$1"; shift
  as_svc "$dir" "$py" /usr/bin/patronictl -c "$dir/pg1/postgresql.yml" "$@"
}

# Every child process of PID.
children() { ps -o pid= --ppid "$1" 2>/dev/null | tr -d ' ' || true; }

# The walreceiver of node N (a child of its postmaster), if it runs.
walreceiver_pid() {
  local dir="$1" n="$2" pm p
  pm="$(postmaster_pid "$dir" "$n")"
  [ -n "$pm" ] || return 0
  for p in $(children "$pm"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q walreceiver && { echo "$p"; return 0; }
  done
  return 0
}

# The stopped walreceiver recorded by `lag`, if it is still that process.
lagged_pid() { running "$1/lagged.pid" walreceiver; }

lag() {
  local dir; dir="$(rundir)"
  [ -n "$dir" ] || { leafid_log "no cluster (run start first)"; exit 1; }
  local l n r=""; l="$(leader)"
  for n in "${nodes[@]}"; do [ "$n" != "$l" ] && r="$n"; done
  if [ -z "$l" ] || [ -z "$r" ]; then leafid_log "no leader and replica"; exit 1; fi
  local p; p="$(walreceiver_pid "$dir" "$r")"
  [ -n "$p" ] || { leafid_log "$r has no walreceiver"; exit 1; }
  kill -STOP "$p"
  echo "$p" >"$dir/lagged.pid"
  leafid_log "$r receives nothing more from $l (walreceiver $p stopped)"
}

# Lets a walreceiver stopped by `lag` go on.
resume_lagged() {
  local dir="$1" p; p="$(lagged_pid "$dir")"
  if [ -n "$p" ]; then kill -CONT "$p" 2>/dev/null || true; fi
  rm -f "$dir/lagged.pid"
}

kill_leader() {
  local dir; dir="$(rundir)"
  [ -n "$dir" ] || { leafid_log "no cluster (run start first)"; exit 1; }
  local n; n="$(leader)"
  [ -n "$n" ] || { leafid_log "no leader to kill"; exit 1; }
  local pids=() p pm
  p="$(patroni_pid "$dir" "$n")"; [ -n "$p" ] && pids+=("$p")
  pm="$(postmaster_pid "$dir" "$n")"
  if [ -n "$pm" ]; then
    pids+=("$pm")
    # The backends too, in the same kill: a backend outliving its postmaster may still answer
    # a query it already holds.
    while read -r p; do [ -n "$p" ] && pids+=("$p"); done < <(children "$pm")
  fi
  kill -9 "${pids[@]}" 2>/dev/null || true
  for p in "${pids[@]}"; do while alive_pid "$p"; do sleep 0.02; done; done
  rm -f "$dir/$n/patroni.pid"
  leafid_log "leader $n killed (pids ${pids[*]})"
  local w; w="$(lagged_pid "$dir")"
  if [ -n "$w" ]; then
    kill -9 "$w" 2>/dev/null || true
    rm -f "$dir/lagged.pid"
    leafid_log "the replica's stopped walreceiver $w killed: the WAL in flight is lost"
  fi
  echo "$n"
}

switchover() {
  local dir; dir="$(rundir)"
  [ -n "$dir" ] || { leafid_log "no cluster (run start first)"; exit 1; }
  local old; old="$(leader)"
  [ -n "$old" ] || { leafid_log "no leader to switch over from"; exit 1; }
  local out
  out="$(ctl "$dir" switchover --force 2>&1)" || true
  printf '%s\n' "$out" >&2
  # patronictl exits 0 even when the leader refused ("Switchover failed, details: 412 ...").
  printf '%s\n' "$out" | grep -q 'Successfully switched over' ||
    { leafid_log "the switchover failed (patronictl's output above)"; exit 1; }
  local new="" _
  for _ in $(seq 1 240); do
    new="$(leader)"
    [ -n "$new" ] && [ "$new" != "$old" ] && break
    sleep 0.25
  done
  if [ -z "$new" ] || [ "$new" = "$old" ]; then leafid_log "no new leader within 60 s"; exit 1; fi
  leafid_log "switched over from $old to $new"
  echo "$new"
}

sync_mode() {
  local dir; dir="$(rundir)"
  [ -n "$dir" ] || { leafid_log "no cluster (run start first)"; exit 1; }
  local value role
  case "${1:-}" in
    on) value=true; role=sync ;;
    off) value=false; role=async ;;
    *) leafid_log "sync on|off"; exit 2 ;;
  esac
  ctl "$dir" edit-config --force -s "synchronous_mode=$value" >/dev/null
  wait_healthy "$dir" 60 "$role"
  leafid_log "synchronous_mode $value: the replica streams, $role"
}

status() {
  local dir; dir="$(rundir)"
  [ -n "$dir" ] || { echo "no cluster"; return 0; }
  echo "etcd pid=$(etcd_pid "$dir") port=$etcd_port"
  local n
  for n in "${nodes[@]}"; do
    echo "$n patroni pid=$(patroni_pid "$dir" "$n") postgres pid=$(postmaster_pid "$dir" "$n") port=$(pg_port "$n") rest=$(rest_port "$n") GET /primary=$(rest_status "$(rest_port "$n")" primary)"
  done
  echo "haproxy pid=$(haproxy_pid "$dir") port=$ha_port stats=http://127.0.0.1:$stats_port/"
  if [ -n "$(etcd_pid "$dir")" ]; then ctl "$dir" list 2>/dev/null || true; fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  purge) purge ;;
  status) status ;;
  url) url ;;
  nodes) node_urls ;;
  leader) leader ;;
  lag) lag ;;
  kill-leader) kill_leader ;;
  switchover) switchover ;;
  sync) sync_mode "${2:-}" ;;
  *) echo "usage: $0 start|stop|purge|status|url|nodes|leader|lag|kill-leader|switchover|sync on|off" >&2; exit 2 ;;
esac
