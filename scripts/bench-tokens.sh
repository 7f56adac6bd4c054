#!/usr/bin/env bash
# The cost of the caller-token check (docs/api.md#caller-tokens) on Leaf's single-id route: one
# release build, two servers side by side on their own SQLite files, measured alternately in the
# same run with wrk:
#   tokens: callers.mode = "tokens", a token scoped to `leaf-segment-test`, sent as
#           `Authorization: Bearer` (a SHA-256, a map lookup and a scope match per request);
#   open:   callers.mode = "auto" on loopback with no token (anonymous, as before tokens).
# Prints each round's requests/s and the ratio tokens/open per round, then the median ratio with
# its min..max. Then, with valgrind, the instructions per request of both under callgrind (the
# method of scripts/bench-instructions.sh: one worker, one keep-alive client, (total at HIGH -
# total at LOW) / (HIGH - LOW)), a figure the machine's load does not move. Both servers then run
# `callers.mode = "open"` with the same token created, so start-up and set-up are alike; the
# tokens side sends it. Traffic goes to 127.0.0.1 only.
#
#   scripts/bench-tokens.sh [ROUNDS=7] [SECONDS=4] [LOW=1000] [HIGH=3000]
# Env: CONNECTIONS (64), THREADS (1), WORKERS (server workers, default 1: wrk needs a core),
# INSTRUCTIONS=0 skips the callgrind part.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-7}"; secs="${2:-4}"; low="${3:-1000}"; high="${4:-3000}"
conns="${CONNECTIONS:-64}"; threads="${THREADS:-1}"; workers="${WORKERS:-1}"
target="${CARGO_TARGET_DIR:-target}"

if ! command -v wrk >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
fi
cargo build --release --bin leafid >&2
bin="$target/release/leafid"

tmp="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
serve() { # port mode dir
  mkdir -p "$tmp/$3"
  LEAFID__SERVER__PORT="$1" LEAFID__SERVER__WORKERS="$workers" LEAFID__CALLERS__MODE="$2" \
    LEAFID__DATABASE__URL="sqlite://$tmp/$3/leafid.db" LEAFID__ADMIN__TOKEN=bench RUST_LOG=warn \
    "$bin" >"$tmp/$3/leafid.log" 2>&1 &
}
serve 18091 tokens tokens
serve 18092 auto open
for port in 18091 18092; do
  for _ in $(seq 1 100); do curl -sf "localhost:$port/health/live" >/dev/null && break; sleep 0.1; done
done
token="$(curl -sf -X POST -H 'authorization: Bearer bench' -H 'content-type: application/json' \
  -d '{"name":"bench","tags":["leaf-segment-test"]}' localhost:18091/api/v1/tokens |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
# The check is real: without the token the tokens server refuses, with it it serves.
[ "$(curl -s -o /dev/null -w '%{http_code}' localhost:18091/api/segment/get/leaf-segment-test)" = 401 ]
curl -sf -H "authorization: Bearer $token" localhost:18091/api/segment/get/leaf-segment-test >/dev/null
curl -sf localhost:18092/api/segment/get/leaf-segment-test >/dev/null

run() { # url [header] -> requests/s
  local h=(); [ -n "${2:-}" ] && h=(-H "$2")
  wrk -t"$threads" -c"$conns" -d"${secs}s" "${h[@]}" "$1" 2>/dev/null | awk '/Requests\/sec/ {print $2}'
}
ratios=()
for r in $(seq 1 "$rounds"); do
  # Alternate which goes first, so a drift of the machine does not favour one side.
  if (( r % 2 )); then
    t="$(run http://127.0.0.1:18091/api/segment/get/leaf-segment-test "Authorization: Bearer $token")"
    o="$(run http://127.0.0.1:18092/api/segment/get/leaf-segment-test)"
  else
    o="$(run http://127.0.0.1:18092/api/segment/get/leaf-segment-test)"
    t="$(run http://127.0.0.1:18091/api/segment/get/leaf-segment-test "Authorization: Bearer $token")"
  fi
  ratio="$(echo "$t / $o" | bc -l)"
  ratios+=("$ratio")
  printf 'round %d: tokens %.0f req/s, open %.0f req/s, ratio %.3f\n' "$r" "$t" "$o" "$ratio"
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {
  m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2
  printf "tokens/open on the single-id route: median %.3f (min %.3f, max %.3f, %d rounds)\n", m, a[1], a[NR], NR }'

[ "${INSTRUCTIONS:-1}" = 0 ] && exit 0
command -v valgrind >/dev/null || { echo "no valgrind: instructions skipped" >&2; exit 0; }
kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
server=""
# Total instructions of one server run answering N requests of Leaf's route, with the token
# sent (side tokens), not sent (side open), or sent under another header of the same length
# (side open_padded).
total() { # side n
  local out="$tmp/$1.$2.callgrind" tok
  rm -rf "$tmp/cg"; mkdir -p "$tmp/cg"
  LEAFID__SERVER__PORT=18093 LEAFID__SERVER__WORKERS=1 LEAFID__SERVER__DRAIN_SECS=0 \
    LEAFID__SEGMENT__REFRESH_INTERVAL_SECS=3600 LEAFID__CALLERS__REFRESH_SECS=3600 \
    LEAFID__CALLERS__MODE=open LEAFID__ADMIN__TOKEN=bench \
    LEAFID__DATABASE__URL="sqlite://$tmp/cg/leafid.db" RUST_LOG=warn \
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" >"$tmp/cg.log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do curl -sf localhost:18093/health/live >/dev/null && break; sleep 0.1; done
  tok="$(curl -sf -X POST -H 'authorization: Bearer bench' -H 'content-type: application/json' \
    -d '{"name":"bench","tags":["leaf-segment-test"]}' localhost:18093/api/v1/tokens |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
  python3 - 18093 "$2" "$tok" "$1" <<'PY'
import http.client, sys
port, n, tok, side = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
# open_padded: the same bytes on the wire under a header no one reads (what the header costs
# actix to parse, apart from the check).
name = {"tokens": "Authorization", "open_padded": "X-Padding-130"}.get(side)
headers = {name: f"Bearer {tok}"} if name else {}
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for i in range(n):
    conn.request("GET", "/api/segment/get/leaf-segment-test", headers=headers)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"request {i}: {r.status} {body[:200]!r}")
PY
  kill -INT "$server"; wait "$server" || true; server=""
  awk '/^totals:/ {print $2}' "$out"
}
declare -A per
for side in open open_padded tokens; do
  a="$(total "$side" "$low")"; b="$(total "$side" "$high")"
  per[$side]=$(( (b - a) / (high - low) ))
  echo "$side: ${per[$side]} instructions per request (callgrind, $low and $high requests)"
done
awk -v t="${per[tokens]}" -v o="${per[open]}" -v p="${per[open_padded]}" 'BEGIN {
  printf "tokens/open instructions per request: %.3f (+%d)\n", t / o, t - o
  printf "tokens/open_padded (the check alone, the header bytes on both sides): %.3f (+%d)\n", t / p, t - p }'
