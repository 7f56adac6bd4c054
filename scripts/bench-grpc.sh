#!/usr/bin/env bash
# The gRPC door's wall-clock figures (issue 46), each a ratio measured in the same run, rounds
# alternating so the host's swings fall on both sides alike. Traffic goes to 127.0.0.1 only.
#
#   scripts/bench-grpc.sh [ROUNDS=5] [SECONDS=4]
#   Env: WORKERS (server workers, 1: the load client needs the other core), CALLERS (64
#   concurrent unary calls), CONNECTIONS (4 HTTP/2 connections), COUNT (1000000 ids a stream or a
#   range answer), CHUNK (100000 ids a stream message).
#
# 1. Unary: leafid's Segment.NextIds (count=1) against examples/grpc_hello.rs (tonic answering
#    the same RPC with a constant id, no other work), calls/s, by examples/grpc_load.rs.
# 2. Streaming: leafid's StreamRanges (COUNT ids a call, CHUNK a message) against its HTTP range
#    route (`GET /api/v1/segment/{tag}/ranges?count=COUNT` on one keep-alive connection), ids/s.
# Every answer is checked by the load client (ids increasing per caller, counts exact). Prints
# each round, then the median ratio and the spread of the rounds' ratios; writes a Markdown
# table to target/grpc-ratios.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"; secs="${2:-4}"
workers="${WORKERS:-1}"; callers="${CALLERS:-64}"; conns="${CONNECTIONS:-4}"
count="${COUNT:-1000000}"; chunk="${CHUNK:-100000}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --bin leafid --example grpc_hello --example grpc_load >&2
load="$target/release/examples/grpc_load"

tmp="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
HELLO_PORT=19090 HELLO_WORKERS="$workers" "$target/release/examples/grpc_hello" >"$tmp/hello.log" 2>&1 &
LEAFID__SERVER__PORT=18091 LEAFID__SERVER__WORKERS="$workers" LEAFID__GRPC__ENABLED=true \
  LEAFID__GRPC__PORT=19091 LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" \
  LEAFID__ADMIN__TOKEN=bench RUST_LOG=warn "$target/release/leafid" >"$tmp/leafid.log" 2>&1 &
for _ in $(seq 1 100); do
  "$load" calls 19090 hello 0 >/dev/null 2>&1 && "$load" calls 19091 x 0 >/dev/null 2>&1 \
    && curl -sf localhost:18091/health/ready >/dev/null && break
  sleep 0.1
done
# Steps of a million ids: the streams' cost is the door's, not the database's commits.
curl -sf -X POST -H 'authorization: Bearer bench' -H 'content-type: application/json' \
  -d '{"biz_tag":"grpcbench","step":1000000}' localhost:18091/api/v1/tags >/dev/null
curl -sf -X POST -H 'authorization: Bearer bench' -H 'content-type: application/json' \
  -d '{"biz_tag":"streambench","step":1000000}' localhost:18091/api/v1/tags >/dev/null

unary_ratios=() stream_ratios=()
for r in $(seq 1 "$rounds"); do
  hello="$("$load" unary 19090 hello "$secs" "$callers" "$conns" | cut -d' ' -f1)"
  leafid="$("$load" unary 19091 grpcbench "$secs" "$callers" "$conns" | cut -d' ' -f1)"
  stream="$("$load" stream 19091 streambench "$secs" "$count" "$chunk" | cut -d' ' -f1)"
  http="$("$load" http-ranges 18091 streambench "$secs" "$count" | cut -d' ' -f1)"
  u="$(awk -v a="$leafid" -v b="$hello" 'BEGIN {printf "%.3f", a / b}')"
  s="$(awk -v a="$stream" -v b="$http" 'BEGIN {printf "%.3f", a / b}')"
  unary_ratios+=("$u"); stream_ratios+=("$s")
  echo "round $r: unary hello $hello, leafid $leafid calls/s (${u}x); stream $stream, http range $http ids/s (${s}x)" >&2
done
summary() { # ratios...
  printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2fx (rounds %.2fx-%.2fx)", m, a[1], a[NR]}'
}
mkdir -p "$target"
{
  echo "| figure | median ratio (spread over $rounds rounds of ${secs} s) |"
  echo "| --- | --- |"
  echo "| leafid Segment.NextIds ÷ tonic hello, calls/s ($callers callers, $conns connections, $workers worker) | $(summary "${unary_ratios[@]}") |"
  echo "| leafid StreamRanges ÷ HTTP range route, ids/s ($count ids a call, $chunk a message) | $(summary "${stream_ratios[@]}") |"
} | tee "$target/grpc-ratios.md"
