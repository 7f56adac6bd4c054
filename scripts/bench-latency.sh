#!/usr/bin/env bash
# Latency at a fixed request rate (open loop), leafid's id routes against the hello-world
# actix-web handler (examples/hello.rs) at the same rate, in the same run. wrk measures
# closed-loop throughput, where a slow response delays the next request and hides the queueing
# it caused (coordinated omission); oha (crates.io) sends at a fixed rate and, with
# --latency-correction, measures each request from when it should have been sent.
#
#   scripts/bench-latency.sh [SECONDS=5] [ROUNDS=3]
#
# 1. the peak of oha against hello-world, unthrottled (median of 3 runs of 3 s; 1 server worker
#    each). On 2 cores oha, not the server, sets it (wrk reaches ~1.7x more): a rate above what
#    the generator itself can send would measure the generator's queue, so the rates below are
#    fractions of this pair's peak;
# 2. at 50% and 80% of that peak, each route for SECONDS at the fixed rate (oha -c 64), ROUNDS
#    rounds with the order rotated, medians of p50 / p99 / p99.9 per route;
# 3. each route's p99 as a ratio to hello-world's at the same rate (goal: <= 1.2x).
# Traffic goes to 127.0.0.1 only. Installs oha (cargo install oha --locked) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"; rounds="${2:-3}"

command -v oha >/dev/null || cargo install oha --locked >&2
cargo build --release --bin leafid --example hello >&2

tmp="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
HELLO_PORT=18080 HELLO_WORKERS=1 target/release/examples/hello >/dev/null 2>&1 &
LEAFID__SERVER__PORT=18081 LEAFID__SERVER__WORKERS=1 LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" \
  RUST_LOG=warn target/release/leafid >"$tmp/leafid.log" 2>&1 &
for _ in $(seq 1 100); do
  curl -sf localhost:18080/ >/dev/null && curl -sf localhost:18081/health/ready >/dev/null && break
  sleep 0.1
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

peaks=()
for _ in 1 2 3; do
  peaks+=("$(oha --no-tui --output-format json -z 3s -c 64 http://127.0.0.1:18080/ |
    python3 -c 'import json, sys; print(int(json.load(sys.stdin)["summary"]["requestsPerSec"]))')")
done
peak="$(printf '%s\n' "${peaks[@]}" | median)"
echo "hello-world peak through oha (closed loop): $peak req/s" >&2

names=(hello segment snowflake)
urls=(
  "http://127.0.0.1:18080/"
  "http://127.0.0.1:18081/api/segment/get/leaf-segment-test"
  "http://127.0.0.1:18081/api/snowflake/get/bench"
)
# oha's JSON -> "p50 p99 p999 success" in milliseconds.
summarise() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["latencyPercentiles"]
ms = lambda v: -1 if v is None else v * 1e3
vals = (ms(p["p50"]), ms(p["p99"]), ms(p["p99.9"]), d["summary"]["successRate"])
print("%.3f %.3f %.3f %.4f" % vals)'
}

printf '\n| rate | route | p50 ms | p99 ms | p99.9 ms | p99 vs hello | success |\n| --- | --- | --- | --- | --- | --- | --- |\n'
for pct in 50 80; do
  rate="$(echo "$peak * $pct / 100" | bc)"
  declare -A p50=() p99=() p999=() ok=()
  for r in $(seq 1 "$rounds"); do
    for k in 0 1 2; do
      i=$(((k + r) % 3))
      read -r a b c s < <(oha --no-tui --output-format json -z "${secs}s" -q "$rate" -c 64 \
        --latency-correction "${urls[$i]}" | summarise)
      p50[${names[$i]}]+="$a "; p99[${names[$i]}]+="$b "; p999[${names[$i]}]+="$c "
      ok[${names[$i]}]="$s"
      echo "$pct% ($rate req/s) round $r ${names[$i]}: p50 $a ms, p99 $b ms, p99.9 $c ms" >&2
    done
  done
  hello99="$(echo ${p99[hello]} | tr ' ' '\n' | median)"
  for n in "${names[@]}"; do
    m50="$(echo ${p50[$n]} | tr ' ' '\n' | median)"
    m99="$(echo ${p99[$n]} | tr ' ' '\n' | median)"
    m999="$(echo ${p999[$n]} | tr ' ' '\n' | median)"
    printf '| %s%% of peak (%s req/s) | %s | %.2f | %.2f | %.2f | %.2fx | %s |\n' \
      "$pct" "$rate" "$n" "$m50" "$m99" "$m999" "$(echo "$m99 / $hello99" | bc -l)" "${ok[$n]}"
  done
  unset p50 p99 p999 ok
done
echo "(oha -c 64 --latency-correction, ${secs}s per run, $rounds rounds, 1 server worker, $(nproc) cores; peak $peak req/s)"
