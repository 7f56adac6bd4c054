#!/usr/bin/env bash
# One lease's latency and sustained leases/s on each store in one run: SQLite (the baseline, a
# file in a temp directory, WAL + synchronous FULL as leafid opens it), MariaDB from
# scripts/mariadb.sh and PostgreSQL from scripts/postgres.sh, each through the store leafid
# uses (behind the durability gate), interleaved round by round (examples/store_bench.rs).
# Prints a Markdown table (docs/benchmarks.md, "Stores").
#
#   scripts/bench-stores.sh [SECONDS_PER_CASE=2] [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-2}"; rounds="${2:-5}"
LEAFID_TEST_MYSQL_URL="$(scripts/mariadb.sh start)"
LEAFID_TEST_POSTGRES_URL="$(scripts/postgres.sh start)"
export LEAFID_TEST_MYSQL_URL LEAFID_TEST_POSTGRES_URL
cargo build --release --example store_bench >&2
echo "store_bench: $(nproc) cores, $(uname -r); $rounds rounds of $secs s per case" >&2
exec target/release/examples/store_bench "$secs" "$rounds"
