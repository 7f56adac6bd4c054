#!/usr/bin/env bash
# Instructions per request under callgrind: leafid's id routes against the hello-world actix-web
# handler (examples/hello.rs), each counted the same way. Instruction counts do not move with
# the machine's load, so these figures repeat where wall-clock ratios swing (docs/benchmarks.md).
#
#   scripts/bench-instructions.sh [LOW=1000] [HIGH=4000]
#   LEAFID_BIN=/path/to/leafid scripts/bench-instructions.sh   # another build (e.g. an older
#                                                              # commit's), same method;
#                                                              # HELLO_BIN likewise
#   ROUTES="hello segment" scripts/bench-instructions.sh       # some rows only (names below;
#                                                              # every ratio needs hello)
#   KEEP_DIR=/tmp/cg scripts/bench-instructions.sh             # keep callgrind's files
#                                                              # (NAME.N.callgrind) for
#                                                              # callgrind_annotate
#
# Each server runs alone under `valgrind --tool=callgrind` with one worker; one keep-alive client
# (Python's http.client, not counted) sends LOW requests to one route, then the server is stopped
# and callgrind's total read; the same again with HIGH requests. Per request is
# (total at HIGH - total at LOW) / (HIGH - LOW): start-up, the first lease and shutdown are in
# both totals and cancel. Every answer must be 200 on the one connection, or the script stops.
# What does not cancel: periodic background work (timers of leafid's background tasks), counted
# pro rata of the runs' wall time; measured idle at about 67,000 instructions a second, some 20
# to 40 per request here. Traffic goes to 127.0.0.1 only. Prints a Markdown table; writes it to
# target/instructions.md too.
#
# Rows (ROUTES names): hello (the baseline, `/`), hello_path and hello_headers
# (examples/hello_shaped.rs: the same handler at the id route's path, then with the four headers
# every leafid answer carries: the framework's charge for the answer's shape), segment,
# snowflake, strict (Leaf's route on a strict tag, through its owner), batch1 and batch100 (the
# v1 batch route, count=1 and count=100); then the gRPC door: grpc_hello (examples/grpc_hello.rs,
# tonic answering Segment.NextIds with a constant id: the gRPC baseline) and grpc_segment
# (leafid's Segment.NextIds, count=1), each sent by examples/grpc_load.rs (`calls`: one call after
# another on one HTTP/2 connection, not counted). A gRPC row's ratio is to grpc_hello, an HTTP
# row's to hello.
set -euo pipefail
cd "$(dirname "$0")/.."
low="${1:-1000}"; high="${2:-4000}"
[ "$high" -gt "$low" ] || { echo "HIGH must be above LOW" >&2; exit 2; }

if ! command -v valgrind >/dev/null; then
  (source scripts/lib/common.sh && leafid_install_packages valgrind)
fi
hello="${HELLO_BIN:-}"; shaped="${SHAPED_BIN:-}"; grpc_hello="${GRPC_HELLO_BIN:-}"
target="${CARGO_TARGET_DIR:-target}"
if [ -z "$hello" ] || [ -z "$shaped" ] || [ -z "$grpc_hello" ]; then
  cargo build --release --example hello --example hello_shaped --example grpc_hello >&2
  hello="${hello:-$target/release/examples/hello}"
  shaped="${shaped:-$target/release/examples/hello_shaped}"
  grpc_hello="${grpc_hello:-$target/release/examples/grpc_hello}"
fi
# The gRPC rows' client (never under callgrind): the build of this checkout.
grpc_load="${GRPC_LOAD_BIN:-}"
if [ -z "$grpc_load" ]; then
  cargo build --release --example grpc_load >&2
  grpc_load="$target/release/examples/grpc_load"
fi
bin="${LEAFID_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release --bin leafid >&2
  bin="${CARGO_TARGET_DIR:-target}/release/leafid"
fi

tmp="$(mktemp -d)"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
port=18090
grpc_port=19092
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/bench.key")

# N keep-alive GETs of PATH on PORT; any answer but 200 stops the script.
client() { # port path n
  python3 - "$@" <<'PY'
import http.client, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
sock = None
for i in range(n):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"request {i} of {path}: {r.status} {body[:200]!r}")
    # One connection for all N: http.client would reconnect silently after a close, and a
    # new connection's accept and set-up would be counted as the requests' cost.
    if r.will_close or (sock is not None and conn.sock is not sock):
        sys.exit(f"request {i} of {path}: the connection was not kept alive")
    sock = conn.sock
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

# Until the gRPC port answers a call (valgrind starts slowly).
wait_grpc() {
  for _ in $(seq 1 600); do
    "$grpc_load" calls "$grpc_port" hello 0 >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "the gRPC port $grpc_port did not answer" >&2
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
    hello_path | hello_headers)
      # The baseline answering the id route's path, and with leafid's four headers too
      # (examples/hello_shaped.rs): what the framework charges for the route's shape.
      live="$path"
      HELLO_PORT=$port HELLO_WORKERS=1 HELLO_HEADERS=$([ "$name" = hello_headers ] && echo 1 || echo 0) \
        valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$shaped" >"$tmp/$name.log" 2>&1 &
      ;;
    grpc_hello)
      HELLO_PORT=$grpc_port HELLO_WORKERS=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$grpc_hello" >"$tmp/$name.log" 2>&1 &
      ;;
    *)
      live=/health/live
      # One worker, no drain on stop, no refresh during the run: the two runs differ only in
      # the requests. The gRPC door on for the gRPC rows only.
      LEAFID__GRPC__ENABLED=$([[ "$name" == grpc_* ]] && echo true || echo false) \
        LEAFID__GRPC__PORT=$grpc_port \
        LEAFID__SERVER__PORT=$port LEAFID__SERVER__WORKERS=1 LEAFID__SERVER__DRAIN_SECS=0 \
        LEAFID__SEGMENT__REFRESH_INTERVAL_SECS=3600 \
        LEAFID__DATABASE__URL="sqlite://$tmp/leafid.db" RUST_LOG=warn LEAFID__ADMIN__TOKEN=bench \
        valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" >"$tmp/$name.log" 2>&1 &
      ;;
  esac
  server=$!
  if [ "$name" = grpc_hello ]; then
    wait_grpc
  else
    wait_for "$port" "$live"
    if [[ "$name" == grpc_* ]]; then wait_grpc; fi
  fi
  if [ "$name" = strict ]; then
    # A strict tag (docs/guarantees.md#strict-tags), served by this server, its only owner.
    curl -sf -X POST -H 'authorization: Bearer bench' -H 'content-type: application/json' \
      -d '{"biz_tag":"strictbench","step":100000,"order":"strict"}' \
      "http://127.0.0.1:$port/api/v1/tags" >/dev/null
  fi
  if [[ "$name" == grpc_* ]]; then
    "$grpc_load" calls "$grpc_port" "$path" "$n" >/dev/null
  else
    client "$port" "$path" "$n"
  fi
  kill -INT "$server"
  wait "$server" || true
  server=""
  # callgrind writes one file per process (threads are summed): its `totals:` line.
  awk '/^totals:/ {print $2}' "$out"
  if [ -n "${KEEP_DIR:-}" ]; then mkdir -p "$KEEP_DIR" && cp "$out" "$KEEP_DIR/"; fi
}

rows=(
  "hello|/|examples/hello (the baseline)"
  "hello_path|/api/segment/get/leaf-segment-test|examples/hello_shaped at the id route's path"
  "hello_headers|/api/segment/get/leaf-segment-test|examples/hello_shaped, that path and leafid's 4 headers"
  "segment|/api/segment/get/leaf-segment-test|leafid GET /api/segment/get/{tag}"
  "snowflake|/api/snowflake/get/bench|leafid GET /api/snowflake/get/{key}"
  "strict|/api/segment/get/strictbench|leafid GET /api/segment/get/{tag}, a strict tag through its owner"
  "batch1|/api/v1/segment/leaf-segment-test/ids?count=1|leafid GET /api/v1/segment/{tag}/ids?count=1"
  "batch100|/api/v1/segment/leaf-segment-test/ids?count=100|leafid GET /api/v1/segment/{tag}/ids?count=100"
  "grpc_hello|hello|examples/grpc_hello, Segment.NextIds (the gRPC baseline)"
  "grpc_segment|leaf-segment-test|leafid gRPC Segment.NextIds, count=1"
)
selected=" ${ROUTES:-hello hello_path hello_headers segment snowflake strict batch1 batch100 grpc_hello grpc_segment} "
[[ "$selected" == *" hello "* ]] || { echo "ROUTES must include hello (the ratios' baseline)" >&2; exit 2; }
if [[ "$selected" == *" grpc_segment "* && "$selected" != *" grpc_hello "* ]]; then
  echo "ROUTES with grpc_segment must include grpc_hello (its baseline)" >&2; exit 2
fi
table="| route | instructions per request | ratio to its hello |
| --- | --- | --- |"
hello_per="" grpc_hello_per=""
for row in "${rows[@]}"; do
  IFS='|' read -r name path label <<<"$row"
  [[ "$selected" == *" $name "* ]] || continue
  a="$(total "$name" "$path" "$low")"
  b="$(total "$name" "$path" "$high")"
  per=$(( (b - a) / (high - low) ))
  [ "$name" = hello ] && hello_per="$per"
  [ "$name" = grpc_hello ] && grpc_hello_per="$per"
  base="$hello_per"; [[ "$name" == grpc_* ]] && base="$grpc_hello_per"
  ratio="$(awk -v p="$per" -v h="$base" 'BEGIN {printf "%.2fx", p / h}')"
  echo "$label: $a at $low, $b at $high: $per per request ($ratio)" >&2
  table+=$'\n'"| $label | $per | $ratio |"
done
mkdir -p target
printf '%s\n\n(callgrind, user-space instructions, (total at %s - total at %s) / %s; one worker)\n' \
  "$table" "$high" "$low" "$((high - low))" | tee target/instructions.md
