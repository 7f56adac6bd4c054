#!/usr/bin/env bash
# The Rust client's own tests (unit tests, and tests/failover.rs against three real servers:
# needs target/debug/leafid and a MariaDB, see tests/support), then the build of its
# conformance adapter (examples/conformance_adapter.rs, run by ./conformance-adapter).
# LEAFID_RUST_CLIENT_TESTED=1 skips the tests (scripts/test.sh ran them in its workspace run).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${LEAFID_RUST_CLIENT_TESTED:-}" != 1 ]; then
  # The tests start $LEAFID_BIN (scripts/clients-test.sh sets it), else target/debug/leafid.
  [ -n "${LEAFID_BIN:-}" ] || cargo build --bin leafid
  # The tests against real servers are `#[ignore]`d for a plain workspace `cargo test`; here
  # they run (LEAFID_BIN and LEAFID_TEST_MYSQL_URL, see tests/support).
  cargo test -p leafid-client -- --include-ignored
fi
# `--workspace`: the features of the workspace run in scripts/test.sh, so its dependencies are
# reused (`-p leafid-client` alone unified them differently and rebuilt about 60 crates).
cargo build --workspace --example conformance_adapter
