#!/usr/bin/env bash
# Latency at a fixed request rate (open loop), leafid's id routes against the hello-world
# actix-web handler (examples/hello.rs) at the same rate, in the same run. wrk measures
# closed-loop throughput, where a slow response delays the next request and hides the queueing
# it caused (coordinated omission); oha (crates.io) sends at a fixed rate and, with
# --latency-correction, measures each request from when it should have been sent.
#
#   scripts/bench-latency.sh [SECONDS=3] [ROUNDS=7]
#
# Placement: every server on CPU 0, oha (one runtime thread) on CPU 1 (`PIN=0` leaves both to
# the scheduler). Unpinned, oha's threads and the server's compete for the same 2 cores and the
# tail mostly measures that competition.
#
# 1. the peak of oha against hello-world, unthrottled (median of 3 runs of 3 s; 1 server worker
#    each). oha, not the server, sets it here (wrk reaches more): a rate above what the
#    generator itself can send would measure the generator's queue, so the rates below are
#    fractions of this pair's peak;
# 2. at 50% and 80% of that peak, each route for SECONDS at the fixed rate (oha -c 64), ROUNDS
#    rounds with the order rotated, medians of p50 / p99 / p99.9 per route;
# 3. each route's p99 as a ratio to hello-world's at the same rate (goal: <= 1.2x): the ratio of
#    the medians, and the median of the per-round ratios with their min..max (each round runs
#    every route back to back, so a round's ratio cancels drift between rounds, as
#    benches/ratios.rs does for the in-process figures).
# A second, identical hello-world process (`hello (control)`) is measured like the others: its
# ratio to the first is what the machine's noise alone produces, the resolution of every other
# ratio in the table.
# Traffic goes to 127.0.0.1 only. Installs oha (cargo install oha --locked) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-3}"; rounds="${2:-7}"

command -v oha >/dev/null || cargo install oha --locked >&2
cargo build --release --bin leafid --example hello >&2

server_cpu=(); oha_cmd=(oha)
if [ "${PIN:-1}" != 0 ] && [ "$(nproc)" -ge 2 ]; then
  server_cpu=(taskset -c 0); oha_cmd=(taskset -c 1 oha --worker-threads 1)
fi

tmp="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
HELLO_PORT=18080 HELLO_WORKERS=1 "${server_cpu[@]}" target/release/examples/hello >/dev/null 2>&1 &
HELLO_PORT=18082 HELLO_WORKERS=1 "${server_cpu[@]}" target/release/examples/hello >/dev/null 2>&1 &
LEAFID__SERVER__PORT=18081 LEAFID__SERVER__WORKERS=1 LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" \
  RUST_LOG=warn "${server_cpu[@]}" target/release/leafid >"$tmp/leafid.log" 2>&1 &
for _ in $(seq 1 100); do
  curl -sf localhost:18080/ >/dev/null && curl -sf localhost:18082/ >/dev/null &&
    curl -sf localhost:18081/health/ready >/dev/null && break
  sleep 0.1
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

peaks=()
for _ in 1 2 3; do
  peaks+=("$("${oha_cmd[@]}" --no-tui --output-format json -z 3s -c 64 http://127.0.0.1:18080/ |
    python3 -c 'import json, sys; print(int(json.load(sys.stdin)["summary"]["requestsPerSec"]))')")
done
peak="$(printf '%s\n' "${peaks[@]}" | median)"
echo "hello-world peak through oha (closed loop): $peak req/s" >&2

names=(hello control segment snowflake)
urls=(
  "http://127.0.0.1:18080/"
  "http://127.0.0.1:18082/"
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

printf '\n| rate | route | p50 ms | p99 ms | p99.9 ms | p99 vs hello (medians) | per-round p99 ratio: median (min..max) | success |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for pct in 50 80; do
  rate="$(echo "$peak * $pct / 100" | bc)"
  declare -A p50=() p99=() p999=() ok=() round99=() ratio=()
  for r in $(seq 1 "$rounds"); do
    for k in 0 1 2 3; do
      i=$(((k + r) % 4))
      read -r a b c s < <("${oha_cmd[@]}" --no-tui --output-format json -z "${secs}s" -q "$rate" -c 64 \
        --latency-correction "${urls[$i]}" | summarise)
      p50[${names[$i]}]+="$a "; p99[${names[$i]}]+="$b "; p999[${names[$i]}]+="$c "
      ok[${names[$i]}]="$s"; round99[${names[$i]}]="$b"
      echo "$pct% ($rate req/s) round $r ${names[$i]}: p50 $a ms, p99 $b ms, p99.9 $c ms" >&2
    done
    for n in "${names[@]}"; do
      ratio[$n]+="$(echo "${round99[$n]} / ${round99[hello]}" | bc -l) "
    done
  done
  hello99="$(echo ${p99[hello]} | tr ' ' '\n' | median)"
  for n in "${names[@]}"; do
    m50="$(echo ${p50[$n]} | tr ' ' '\n' | median)"
    m99="$(echo ${p99[$n]} | tr ' ' '\n' | median)"
    m999="$(echo ${p999[$n]} | tr ' ' '\n' | median)"
    rs="$(echo ${ratio[$n]} | tr ' ' '\n' | sort -g)"
    printf '| %s%% of peak (%s req/s) | %s | %.2f | %.2f | %.2f | %.2fx | %.2fx (%.2f..%.2f) | %s |\n' \
      "$pct" "$rate" "$n" "$m50" "$m99" "$m999" "$(echo "$m99 / $hello99" | bc -l)" \
      "$(echo "$rs" | median)" "$(echo "$rs" | head -1)" "$(echo "$rs" | tail -1)" "${ok[$n]}"
  done
  unset p50 p99 p999 ok round99 ratio
done
echo "(oha -c 64 --latency-correction, ${secs}s per run, $rounds rounds, 1 server worker, $(nproc) cores, pinned: ${server_cpu[*]:-no}; peak $peak req/s; control = a second hello-world process)"
