#!/usr/bin/env bash
# HTTP load benchmark: leafid on the embedded default against a hello-world actix-web handler
# (examples/hello.rs), measured alternately in the same run with wrk, several rounds; prints the
# median requests/s of each and the ratios. Traffic goes to 127.0.0.1 only.
#
#   scripts/bench-http.sh [ROUNDS=5] [SECONDS=5]
# Env: CONNECTIONS (64), THREADS (1), WORKERS (server workers, default 1: wrk needs a core),
# PIPELINE (unset; N: HTTP/1.1 pipelining, N requests per write, scripts/pipeline.lua).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"; secs="${2:-5}"
conns="${CONNECTIONS:-64}"; threads="${THREADS:-1}"; workers="${WORKERS:-1}"

if ! command -v wrk >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
fi
cargo build --release --bin leafid --example hello >&2

tmp="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
# The key of the permuted tag below (docs/shapes.md): a random 32-byte key, mode 600.
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/bench.key")
HELLO_PORT=18080 HELLO_WORKERS="$workers" target/release/examples/hello >/dev/null 2>&1 &
LEAFID__SERVER__PORT=18081 LEAFID__SERVER__WORKERS="$workers" LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" \
  LEAFID__ADMIN__TOKEN=bench LEAFID__SHAPES__KEYS__BENCH="$tmp/bench.key" RUST_LOG=warn target/release/leafid >"$tmp/leafid.log" 2>&1 &
for _ in $(seq 1 100); do
  curl -sf localhost:18080/ >/dev/null && curl -sf localhost:18081/health/live >/dev/null && break
  sleep 0.1
done

# Formatted tags (docs/shapes.md): daily order numbers, against the numeric batch of 1,000; and
# 10-digit codes plain, permuted (FF1) and gapped, the permuted cost against the plain codes.
tag() { # name format
  curl -sf -X POST -H 'authorization: Bearer bench' -H 'content-type: application/json' \
    -d "{\"biz_tag\":\"$1\",\"step\":100000,\"format\":$2}" localhost:18081/api/v1/tags >/dev/null
}
tag orders '{"date":"yyyyMMdd","width":10,"reset":"daily"}'
tag codes '{"prefix":"C-","width":10}'
tag secret '{"prefix":"C-","width":10,"permute":{"key_id":"bench"}}'
tag gapped '{"prefix":"C-","width":10,"gaps":{"mean":16}}'

script=(); [ -n "${PIPELINE:-}" ] && script=(-s scripts/pipeline.lua)
run() { # url -> requests/s
  wrk -t"$threads" -c"$conns" -d"${secs}s" --latency "${script[@]}" "$1" 2>/dev/null |
    awk '/Requests\/sec/ {print $2}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -A results
names=(hello segment snowflake segment_batch1000 snowflake_batch1000 formatted_batch1000
  codes_batch1000 permuted_batch1000 gapped_batch1000)
urls=(
  "http://127.0.0.1:18080/"
  "http://127.0.0.1:18081/api/segment/get/leaf-segment-test"
  "http://127.0.0.1:18081/api/snowflake/get/bench"
  "http://127.0.0.1:18081/api/v1/segment/leaf-segment-test/ids?count=1000"
  "http://127.0.0.1:18081/api/v1/snowflake/ids?count=1000"
  "http://127.0.0.1:18081/api/v1/segment/orders/ids?count=1000"
  "http://127.0.0.1:18081/api/v1/segment/codes/ids?count=1000"
  "http://127.0.0.1:18081/api/v1/segment/secret/ids?count=1000"
  "http://127.0.0.1:18081/api/v1/segment/gapped/ids?count=1000"
)
for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    v="$(run "${urls[$i]}")"
    results[${names[$i]}]+="$v "
    echo "round $r ${names[$i]}: $v req/s" >&2
  done
done

printf '\n%-22s %14s %12s\n' "route" "median req/s" "vs hello"
hello="$(echo ${results[hello]} | tr ' ' '\n' | median)"
for n in "${names[@]}"; do
  m="$(echo ${results[$n]} | tr ' ' '\n' | median)"
  printf '%-22s %14.0f %12.3f\n' "$n" "$m" "$(echo "$m / $hello" | bc -l)"
done
seg="$(echo ${results[segment]} | tr ' ' '\n' | median)"
segb="$(echo ${results[segment_batch1000]} | tr ' ' '\n' | median)"
printf '\nsegment batch of 1000: %.0f ids/s = %.1fx the single-id route\n' \
  "$(echo "$segb * 1000" | bc -l)" "$(echo "$segb * 1000 / $seg" | bc -l)"
fmtb="$(echo ${results[formatted_batch1000]} | tr ' ' '\n' | median)"
printf 'formatted batch of 1000 (yyyyMMdd + 10 digits): %.2fx the numeric batch of 1000\n' \
  "$(echo "$fmtb / $segb" | bc -l)"
med() { echo ${results[$1]} | tr ' ' '\n' | median; }
codes="$(med codes_batch1000)"; perm="$(med permuted_batch1000)"; gap="$(med gapped_batch1000)"
printf 'permuted batch of 1000 (FF1, 10 digits): %.3fx the plain codes; %.2f us per id more\n' \
  "$(echo "$perm / $codes" | bc -l)" "$(echo "(1 / $perm - 1 / $codes) * 1000" | bc -l)"
printf 'gapped batch of 1000 (mean gap 16): %.3fx the plain codes\n' "$(echo "$gap / $codes" | bc -l)"
echo "(wrk -t$threads -c$conns -d${secs}s${PIPELINE:+, pipelining depth $PIPELINE}, $workers server worker(s), $rounds rounds, $(nproc) cores)"
