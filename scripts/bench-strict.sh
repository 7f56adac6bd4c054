#!/usr/bin/env bash
# Strict tags (docs/guarantees.md#strict-tags): the single-id route of a strict tag through its
# owner and through another server, and the batch route, each against a plain tag, measured
# alternately in the same run with wrk on two release servers sharing one SQLite file. Prints
# the median requests/s of each and the ratios. Traffic goes to 127.0.0.1 only.
#
#   scripts/bench-strict.sh [ROUNDS=5] [SECONDS=4]
# Env: CONNECTIONS (32), WORKERS (server workers, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"; secs="${2:-4}"
conns="${CONNECTIONS:-32}"; workers="${WORKERS:-1}"

if ! command -v wrk >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
fi
cargo build --release --bin leafid >&2

tmp="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
for port in 18091 18092; do
  LEAFID__SERVER__PORT=$port LEAFID__SERVER__WORKERS="$workers" LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" \
    LEAFID__ADMIN__TOKEN=bench LEAFID__SNOWFLAKE__ENABLED=false RUST_LOG=warn \
    target/release/leafid >"$tmp/leafid-$port.log" 2>&1 &
  for _ in $(seq 1 100); do curl -sf "localhost:$port/health/live" >/dev/null && break; sleep 0.1; done
done
tag() { # name extra-json
  curl -sf -X POST -H 'authorization: Bearer bench' -H 'content-type: application/json' \
    -d "{\"biz_tag\":\"$1\",\"step\":100000$2}" localhost:18091/api/v1/tags >/dev/null
}
tag plain ''
tag strict ',"order":"strict"'
# The first server asked takes the tag over: 18091 owns it, 18092 forwards to it.
curl -sf localhost:18091/api/segment/get/strict >/dev/null
curl -sf localhost:18092/api/segment/get/strict >/dev/null
owner=$(curl -sf localhost:18091/api/v1/tags/strict | grep -o '"here":[a-z]*')
[ "$owner" = '"here":true' ] || { echo "bench-strict: 18091 does not own the strict tag ($owner)" >&2; exit 1; }

run() { wrk -t1 -c"$conns" -d"${secs}s" "$1" 2>/dev/null | awk '/Requests\/sec/ {print $2}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
names=(plain strict_owner strict_forwarded plain_batch1000 strict_batch1000)
urls=(
  "http://127.0.0.1:18091/api/segment/get/plain"
  "http://127.0.0.1:18091/api/segment/get/strict"
  "http://127.0.0.1:18092/api/segment/get/strict"
  "http://127.0.0.1:18091/api/v1/segment/plain/ids?count=1000"
  "http://127.0.0.1:18091/api/v1/segment/strict/ids?count=1000"
)
declare -A results
for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    results[${names[$i]}]+="$(run "${urls[$i]}") "
  done
  echo "round $r: $(for n in "${names[@]}"; do printf '%s=%s ' "$n" "$(echo "${results[$n]}" | awk '{print $NF}')"; done)" >&2
done
declare -A med
for n in "${names[@]}"; do med[$n]=$(echo "${results[$n]}" | tr ' ' '\n' | grep . | median); done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
printf '%-18s %12s  %s\n' route "req/s (median)" "all rounds"
for n in "${names[@]}"; do printf '%-18s %12s  %s\n' "$n" "${med[$n]}" "${results[$n]}"; done
echo "strict through its owner / plain: $(ratio "${med[strict_owner]}" "${med[plain]}")"
echo "strict through another server / plain: $(ratio "${med[strict_forwarded]}" "${med[plain]}")"
echo "strict batch of 1000 / plain batch of 1000: $(ratio "${med[strict_batch1000]}" "${med[plain_batch1000]}")"
