#!/usr/bin/env bash
# The Rust client's ids/s against AtomicI64::fetch_add: cases local, sustained_1, sustained_4;
# formatted_local: the formatted supply's local path against the numeric one
# (examples/throughput.rs says how each is measured). Builds the example in release first,
# quietly. Prints one `BENCH {json}` line per case on stdout; everything else goes to stderr.
#   LEAFID_BENCH_URL   a running (release) server, e.g. http://127.0.0.1:18200
#   LEAFID_BENCH_TAG   an existing segment tag
#   LEAFID_BENCH_SECS  seconds per sustained case (default 10)
# criterion's view of the local path: cargo bench -p leafid-client --bench next_id
set -euo pipefail
: "${LEAFID_BENCH_URL:?set LEAFID_BENCH_URL to a running server}"
: "${LEAFID_BENCH_TAG:?set LEAFID_BENCH_TAG to an existing segment tag}"
cd "$(dirname "$0")/../.."
cargo build --quiet --release -p leafid-client --example throughput >&2
exec "${CARGO_TARGET_DIR:-target}/release/examples/throughput"
