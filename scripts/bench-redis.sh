#!/usr/bin/env bash
# "Why not Redis INCR?": Redis 7 INCR on one key against leafid's segment route, in alternating
# rounds in the same run; prints the median and min..max of each and the ratio. Traffic goes to
# 127.0.0.1 only.
#
#   scripts/bench-redis.sh [ROUNDS=5] [SECONDS=5]
# Env: CONNECTIONS (64), SERVER_CPU (0), CLIENT_CPU (1), LEAFID_BIN (target/release/leafid, built
# if missing).
#
# Method. Two load generators, one per protocol (wrk speaks only HTTP, redis-benchmark only
# RESP), each single-threaded with CONNECTIONS connections and no pipelining, pinned with
# taskset to CLIENT_CPU; each server pinned to SERVER_CPU: Redis is single-threaded (io-threads
# 1, its default) and leafid runs one HTTP worker. One request = one id on both sides:
# `INCR counter:__rand_int__` (one key: redis-benchmark substitutes __rand_int__ only with -r)
# and `GET /api/segment/get/leaf-segment-test`. redis-benchmark counts requests, not seconds, so
# each Redis round sends (its previous rate x SECONDS) requests, sized first by a warm-up of
# 20,000: the rounds last about as long as wrk's. After each Redis round the counter must equal
# the INCRs sent.
#
# Durability, as configured here:
# - redis_everysec: `appendonly yes`, `appendfsync everysec`: a crash (power loss, kernel) loses
#   up to about a second of INCRs, and the restarted Redis hands those numbers out again.
# - redis_always: `appendfsync always`: the AOF is fsynced before replies are sent (one fsync per
#   event-loop pass, shared by the commands of that pass): no number handed out twice.
# - leafid: ids come from segments whose lease (max_id = max_id + step) is committed in its
#   database before any id of it is handed out: here SQLite, WAL with synchronous = FULL. A crash
#   loses the unissued rest of the segments (a gap), never an issued id.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"; secs="${2:-5}"
conns="${CONNECTIONS:-64}"; server_cpu="${SERVER_CPU:-0}"; client_cpu="${CLIENT_CPU:-1}"
redis_port=18086; leafid_port=18087

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null || missing+=(redis-tools)
# shellcheck source=scripts/lib/common.sh
[ "${#missing[@]}" -eq 0 ] || (source scripts/lib/common.sh && leafid_install_packages "${missing[@]}")
bin="${LEAFID_BIN:-target/release/leafid}"
[ -n "${LEAFID_BIN:-}" ] || [ -x "$bin" ] || cargo build --release --bin leafid >&2

tmp="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
trap "exit 143" TERM INT  # so that the EXIT trap stops the servers
# Servers start as direct background jobs of this shell (not through a function, whose subshell
# would leave the server behind when the EXIT trap kills the job).
on_client() { taskset -c "$client_cpu" "$@"; }

# start_redis FSYNC: a fresh Redis (empty AOF) on $redis_port.
start_redis() {
    redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
    while redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done
    rm -rf "$tmp/redis"; mkdir -p "$tmp/redis"
    taskset -c "$server_cpu" redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp/redis" --save "" \
        --appendonly yes --appendfsync "$1" --io-threads 1 --daemonize no \
        --logfile "$tmp/redis.log" &
    for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "bench-redis: redis-server did not start:" >&2; cat "$tmp/redis.log" >&2; exit 1
}

LEAFID__SERVER__PORT="$leafid_port" LEAFID__SERVER__WORKERS=1 \
    LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" RUST_LOG=warn \
    taskset -c "$server_cpu" "$bin" >"$tmp/leafid.log" 2>&1 &
for _ in $(seq 1 100); do curl -sf "localhost:$leafid_port/health/live" >/dev/null && break; sleep 0.1; done
curl -sf "localhost:$leafid_port/api/segment/get/leaf-segment-test" >/dev/null ||
    { echo "bench-redis: leafid did not start:" >&2; cat "$tmp/leafid.log" >&2; exit 1; }

declare -A requests
requests[redis_everysec]=20000; requests[redis_always]=20000  # the warm-up rounds
run_redis() { # fsync -> sets v (requests/s); checks the counter saw every INCR of the round
    local sent="${requests[redis_$1]}" count
    v="$(on_client redis-benchmark -p "$redis_port" -c "$conns" --threads 1 -P 1 \
        -n "$sent" --csv incr counter:__rand_int__ | tail -1 | cut -d, -f2 | tr -d '"')"
    count="$(redis-cli -p "$redis_port" get counter:__rand_int__)"
    [ "$count" = "$sent" ] || { echo "bench-redis: sent $sent INCRs, the counter is $count" >&2; exit 1; }
    requests[redis_$1]="$(printf '%.0f' "$(echo "$v * $secs" | bc -l)")"
}
run_leafid() {
    on_client wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$leafid_port/api/segment/get/leaf-segment-test" \
        2>/dev/null | awk '/Requests\/sec/ {print $2}'
}
stats() { # values on stdin -> "median min max"
    sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; print m, a[1], a[NR]}'
}

load_at_start="$(cut -d' ' -f1-3 /proc/loadavg)"
declare -A results ratios
names=(redis_everysec leafid redis_always)
# A warm-up of each Redis setting, which also sizes its first round; and of leafid.
for fsync in everysec always; do start_redis "$fsync"; run_redis "$fsync"; done
secs_round="$secs"; secs=1; run_leafid >/dev/null; secs="$secs_round"
for r in $(seq 1 "$rounds"); do
    for n in "${names[@]}"; do
        case "$n" in
            redis_everysec) start_redis everysec; run_redis everysec ;;
            redis_always) start_redis always; run_redis always ;;
            leafid) v="$(run_leafid)" ;;
        esac
        [ -n "$v" ] || { echo "bench-redis: round $r $n produced no figure" >&2; exit 1; }
        results[$n]+="$v "
        [ "$n" = redis_everysec ] && base_round="$v"
        ratios[$n]+="$(echo "$v / $base_round" | bc -l) "
        echo "round $r $n: $v ops/s" >&2
    done
done
# The per-round ratio divides figures measured seconds apart: steadier than the ratio of the
# medians when the machine's load drifts.
printf '\n%-16s %14s %22s %10s %16s\n' "server" "median ops/s" "min..max" "vs redis" "per-round ratio"
summary() { local vals; read -ra vals <<<"$1"; printf '%s\n' "${vals[@]}" | stats; }
read -r base _ _ <<<"$(summary "${results[redis_everysec]}")"
for n in "${names[@]}"; do
    read -r m lo hi <<<"$(summary "${results[$n]}")"
    read -r rm rlo rhi <<<"$(summary "${ratios[$n]}")"
    printf '%-16s %14.0f %22s %10.2f %16s\n' "$n" "$m" "$(printf '%.0f..%.0f' "$lo" "$hi")" \
        "$(echo "$m / $base" | bc -l)" "$(printf '%.2f (%.2f..%.2f)' "$rm" "$rlo" "$rhi")"
done
echo "(redis-benchmark -c$conns --threads 1 incr / wrk -t1 -c$conns -d${secs}s; servers on cpu $server_cpu," \
    "load generators on cpu $client_cpu; $rounds alternating rounds; $(redis-server --version | cut -d' ' -f3);" \
    "leafid 1 worker, SQLite; $(nproc) cores;" \
    "load average $load_at_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end)"
