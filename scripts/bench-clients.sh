#!/usr/bin/env bash
# The clients against their languages' counters (issue 33's table): for each client, its own
# harness (clients/<lang>/bench.sh) measures
#   local        next_id from a filled buffer against the language's counter, same thread;
#   sustained_1  one thread calling next_id for SECS against a release server on 127.0.0.1, every
#                fetch included, against the counter in one thread;
#   sustained_4  the same with four threads on one client, against four threads on one counter.
# One release server on the embedded default (a temporary SQLite file) serves every client, one
# client at a time. Prints the table and writes it to target/bench-clients.md.
#
#   scripts/bench-clients.sh [CLIENT...]     CLIENT: java go rust python node (default: all)
# Env: LEAFID_BENCH_SECS (10), LEAFID_BIN (default: builds target/release/leafid).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
clients=("$@"); [ "${#clients[@]}" -gt 0 ] || clients=(java go rust python node)
export LEAFID_BENCH_SECS="${LEAFID_BENCH_SECS:-10}"
if [ -z "${LEAFID_BIN:-}" ]; then
  cargo build --release --bin leafid >&2
  LEAFID_BIN="$root/${CARGO_TARGET_DIR:-target}/release/leafid"
fi

tmp="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=18290
token="bench-$$"
LEAFID__SERVER__PORT=$port LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" \
  LEAFID__ADMIN__TOKEN="$token" RUST_LOG=warn "$LEAFID_BIN" >"$tmp/leafid.log" 2>&1 &
url="http://127.0.0.1:$port"
for _ in $(seq 1 100); do curl -sf "$url/health/ready" >/dev/null && break; sleep 0.1; done
curl -sf "$url/health/ready" >/dev/null || { cat "$tmp/leafid.log" >&2; exit 1; }

out="$tmp/lines"
: >"$out"
for c in "${clients[@]}"; do
  tag="bench-$c"
  # A large first step: the server's own step then grows with the clients' demand.
  curl -sf -X POST -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -d "{\"biz_tag\":\"$tag\",\"step\":100000}" "$url/api/v1/tags" >/dev/null
  echo "bench-clients: $c" >&2
  LEAFID_BENCH_URL="$url" LEAFID_BENCH_TAG="$tag" "clients/$c/bench.sh" | grep '^BENCH ' >>"$out" ||
    echo "bench-clients: $c failed" >&2
done

mkdir -p target
python3 - "$out" <<'PY' | tee target/bench-clients.md
import json, sys
rows = [json.loads(line[len("BENCH "):]) for line in open(sys.argv[1])]
cases = ["local", "sustained_1", "sustained_4"]
goal = {"local": {"java": 0.9, "go": 0.9, "rust": 0.9, "python": 0.7, "node": 0.7}}
def rate(x):
    return f"{x / 1e6:.1f} M/s" if x >= 1e6 else f"{x / 1e3:.0f} k/s"
print("| client | case | ids/s | counter ids/s | ratio | goal | method |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for r in sorted(rows, key=lambda r: (r["client"], cases.index(r["case"]) if r["case"] in cases else 9)):
    g = goal.get(r["case"], {}).get(r["client"], 0.5)
    ok = "✓" if r["ratio"] >= g else "✗"
    print(f"| {r['client']} | {r['case']} | {rate(r['ids_per_s'])} | {rate(r['baseline_per_s'])} "
          f"| **{r['ratio']:.2f}x** | >= {g}x {ok} | {r['method']} |")
PY
