#!/usr/bin/env bash
# Benchmarks the leafid Node client against a running leafid server; prints one line per case on
# stdout, `BENCH {"client":"node","case":...,"ids_per_s":...,"baseline_per_s":...,"ratio":...,
# "method":...}`, for the cases local, local_await, formatted_local, sustained_1 and
# sustained_1_await (one client runs on one thread in Node: no sustained_4). Anything else goes
# to stderr.
#
#   LEAFID_BENCH_URL   a running (release) server, e.g. http://127.0.0.1:18200 (required)
#   LEAFID_BENCH_TAG   an existing segment tag on it (required)
#   LEAFID_BENCH_SECS  seconds of the sustained case (default 10)
#
# Nothing to build: the package is plain JavaScript; its sources are only checked to parse.
set -euo pipefail
cd "$(dirname "$0")"
: "${LEAFID_BENCH_URL:?set LEAFID_BENCH_URL to a running leafid server}"
: "${LEAFID_BENCH_TAG:?set LEAFID_BENCH_TAG to an existing segment tag}"
export LEAFID_BENCH_SECS="${LEAFID_BENCH_SECS:-10}"
if ! command -v node >/dev/null 2>&1; then
  echo "bench.sh: node is missing (Debian's nodejs, 20 or newer)" >&2
  exit 1
fi
for f in src/*.js bench/bench.js; do
  node --check "$f" >&2
done
exec node bench/bench.js
