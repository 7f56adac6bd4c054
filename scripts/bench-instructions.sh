#!/usr/bin/env bash
# Instructions per request under callgrind: leafid's id routes against the hello-world actix-web
# handler (examples/hello.rs), each counted the same way. Instruction counts do not move with
# the machine's load, so these figures repeat where wall-clock ratios swing (docs/benchmarks.md).
#
#   scripts/bench-instructions.sh [LOW=1000] [HIGH=4000]
#   LEAFID_BIN=/path/to/leafid scripts/bench-instructions.sh   # another build (e.g. an older
#                                                              # commit's), same method;
#                                                              # HELLO_BIN likewise
#
# Each server runs alone under `valgrind --tool=callgrind` with one worker; one keep-alive client
# (Python's http.client, not counted) sends LOW requests to one route, then the server is stopped
# and callgrind's total read; the same again with HIGH requests. Per request is
# (total at HIGH - total at LOW) / (HIGH - LOW): start-up, the first lease and shutdown are in
# both totals and cancel. Every answer must be 200, or the script stops. Traffic goes to
# 127.0.0.1 only. Prints a Markdown table; writes it to target/instructions.md too.
set -euo pipefail
cd "$(dirname "$0")/.."
low="${1:-1000}"; high="${2:-4000}"
[ "$high" -gt "$low" ] || { echo "HIGH must be above LOW" >&2; exit 2; }

if ! command -v valgrind >/dev/null; then
  (source scripts/lib/common.sh && leafid_install_packages valgrind)
fi
hello="${HELLO_BIN:-}"
if [ -z "$hello" ]; then
  cargo build --release --example hello >&2
  hello=target/release/examples/hello
fi
bin="${LEAFID_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release --bin leafid >&2
  bin=target/release/leafid
fi

tmp="$(mktemp -d)"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
port=18090
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/bench.key")

# N keep-alive GETs of PATH on PORT; any answer but 200 stops the script.
client() { # port path n
  python3 - "$@" <<'PY'
import http.client, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for i in range(n):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"request {i} of {path}: {r.status} {body[:200]!r}")
PY
}

wait_for() { # port path
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1$2" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server on port $1 did not answer $2" >&2
  return 1
}

# Total instructions of one server run that answers N requests of PATH.
total() { # name path n
  local name="$1" path="$2" n="$3" out="$tmp/$1.$3.callgrind" live
  rm -f "$tmp/leafid.db"*
  case "$name" in
    hello)
      live=/
      HELLO_PORT=$port HELLO_WORKERS=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$hello" >"$tmp/$name.log" 2>&1 &
      ;;
    *)
      live=/health/live
      # One worker, no drain on stop, no refresh during the run: the two runs differ only in
      # the requests.
      LEAFID__SERVER__PORT=$port LEAFID__SERVER__WORKERS=1 LEAFID__SERVER__DRAIN_SECS=0 \
        LEAFID__SEGMENT__REFRESH_INTERVAL_SECS=3600 \
        LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" RUST_LOG=warn \
        valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" >"$tmp/$name.log" 2>&1 &
      ;;
  esac
  server=$!
  wait_for "$port" "$live"
  client "$port" "$path" "$n"
  kill -INT "$server"
  wait "$server" || true
  server=""
  # callgrind writes one file per process (threads are summed): its `totals:` line.
  awk '/^totals:/ {print $2}' "$out"
}

rows=(
  "hello|/|examples/hello (the baseline)"
  "segment|/api/segment/get/leaf-segment-test|leafid GET /api/segment/get/{tag}"
  "snowflake|/api/snowflake/get/bench|leafid GET /api/snowflake/get/{key}"
  "batch|/api/v1/segment/leaf-segment-test/ids?count=100|leafid GET /api/v1/segment/{tag}/ids?count=100"
)
table="| route | instructions per request | ratio to hello |
| --- | --- | --- |"
hello_per=""
for row in "${rows[@]}"; do
  IFS='|' read -r name path label <<<"$row"
  a="$(total "$name" "$path" "$low")"
  b="$(total "$name" "$path" "$high")"
  per=$(( (b - a) / (high - low) ))
  [ "$name" = hello ] && hello_per="$per"
  ratio="$(awk -v p="$per" -v h="$hello_per" 'BEGIN {printf "%.2fx", p / h}')"
  echo "$label: $a at $low, $b at $high: $per per request ($ratio)" >&2
  table+=$'\n'"| $label | $per | $ratio |"
done
mkdir -p target
printf '%s\n\n(callgrind, user-space instructions, (total at %s - total at %s) / %s; one worker)\n' \
  "$table" "$high" "$low" "$((high - low))" | tee target/instructions.md
