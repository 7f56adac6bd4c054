#!/usr/bin/env bash
# The whole test suite: starts (installing if needed) a private MariaDB on 127.0.0.1, then runs
# every test against it and against SQLite. Extra arguments go to `cargo test` (e.g.
# `scripts/test.sh -p leafid segment::`, or `scripts/test.sh -- --nocapture`).
#
# A plain `cargo test` is the quick loop: what runs on SQLite and in memory. Every test that
# needs more (a database server, Galera, Patroni, HAProxy, Varnish, root, libfaketime, Node.js)
# is `#[ignore = "needs ...: scripts/test.sh runs it"]`; this script starts or installs all of
# that and passes `--include-ignored`, so here every test runs and none is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

# What this run started (`scripts/X.sh`, stopped with `scripts/X.sh stop`), in start order. A
# service given through its LEAFID_TEST_* variable was started by someone else and is left
# alone. One cleanup, registered before anything starts, stops them all in reverse order, each
# whatever happened to the others.
started=()
cleanup() {
  local i
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do
    "scripts/${started[i]}.sh" stop >/dev/null || echo "scripts/${started[i]}.sh stop failed" >&2
  done
}
trap cleanup EXIT

# Where a Docker engine answers (a laptop), the tests start MariaDB with testcontainers;
# elsewhere (CI here) a private MariaDB from Debian's packages runs on 127.0.0.1.
if [ -z "${LEAFID_TEST_MYSQL_URL:-}" ] && docker info >/dev/null 2>&1; then
  echo "test MySQL: a testcontainers MariaDB (Docker engine found)" >&2
else
  [ -n "${LEAFID_TEST_MYSQL_URL:-}" ] || { started+=(mariadb); LEAFID_TEST_MYSQL_URL="$(scripts/mariadb.sh start)"; }
  export LEAFID_TEST_MYSQL_URL
  echo "test MySQL: $LEAFID_TEST_MYSQL_URL" >&2
fi
# A private PostgreSQL and a PgBouncer (transaction pooling) in front of it: every black-box and
# store-contract test also runs on both (tests/api/support/postgres.rs fails without them).
if [ -z "${LEAFID_TEST_POSTGRES_URL:-}" ]; then
  scripts/postgres.sh clean  # the last runs' databases
  started+=(postgres); LEAFID_TEST_POSTGRES_URL="$(scripts/postgres.sh start)"
fi
export LEAFID_TEST_POSTGRES_URL
[ -n "${LEAFID_TEST_PGBOUNCER_URL:-}" ] || { started+=(pgbouncer); LEAFID_TEST_PGBOUNCER_URL="$(scripts/pgbouncer.sh start)"; }
export LEAFID_TEST_PGBOUNCER_URL
echo "test PostgreSQL: $LEAFID_TEST_POSTGRES_URL, through PgBouncer: $LEAFID_TEST_PGBOUNCER_URL" >&2
scripts/haproxy.sh install >/dev/null  # the load-balancer tests run Debian's haproxy
# tests/api/wall_clock.rs steps the server's wall clock with Debian's libfaketime;
# tests/api/js_safe.rs reads ids with Node's JSON.parse; clients/rust/tests/tls.rs runs an
# `openssl s_server`.
missing=()
command -v openssl >/dev/null || missing+=(openssl)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing+=(faketime)
command -v node >/dev/null || missing+=(nodejs)
if [ "${#missing[@]}" -gt 0 ]; then
  (source scripts/lib/common.sh && leafid_install_packages "${missing[@]}")  # root, sudo, or one line
fi
# A 3-node MariaDB Galera cluster on 127.0.0.1 for tests/api/galera.rs.
[ -n "${LEAFID_TEST_GALERA_URLS:-}" ] || { started+=(galera); LEAFID_TEST_GALERA_URLS="$(scripts/galera.sh start)"; }
export LEAFID_TEST_GALERA_URLS
# A MariaDB primary and replica for tests/api/replica_failover.rs (which rebuilds it per run).
[ -n "${LEAFID_TEST_REPLICA_URLS:-}" ] || { started+=(replica); LEAFID_TEST_REPLICA_URLS="$(scripts/replica.sh start)"; }
export LEAFID_TEST_REPLICA_URLS
# A two-node Patroni cluster (PostgreSQL 15, etcd, HAProxy) for tests/api/patroni_failover.rs.
[ -n "${LEAFID_TEST_PATRONI_URL:-}" ] || { started+=(patroni); LEAFID_TEST_PATRONI_URL="$(scripts/patroni.sh start)"; }
export LEAFID_TEST_PATRONI_URL
scripts/varnish.sh install >/dev/null  # tests/api/hostile.rs puts Debian's Varnish in front
rm -f "${CARGO_TARGET_DIR:-target}"/tmp/sim-*.txt "${CARGO_TARGET_DIR:-target}"/tmp/patroni-*.txt \
  "${CARGO_TARGET_DIR:-target}"/tmp/figure-*.txt
# The server and the client crate in one build (one feature resolution for both, so the
# dependencies compile once); the client's tests run against three real servers started from
# the target/debug/leafid this builds first. Every target but the benches, with
# `--include-ignored` after the caller's own `--` if they gave one (`cargo test [ARGS] [--
# HARNESS ARGS]`); a caller asking for `--ignored` or `--include-ignored` keeps their choice.
# The criterion benches (`harness = false`) refuse that flag and have no ignored tests: they get
# their own run (`--bench '*'`: the bench targets only), in test mode (each benchmark once), with
# the caller's arguments. Together the two are `--all-targets`, built once.
separator=(--) harness=(--include-ignored)
for arg in "$@"; do
  case "$arg" in
    --) separator=() ;;
    --ignored | --include-ignored) harness=() ;;
  esac
done
cargo test --workspace --lib --bins --tests --examples "$@" "${separator[@]}" "${harness[@]}"
cargo test --workspace --bench '*' "$@"
# What the deterministic simulations ran and injected, the Patroni failover figures and the
# other figures tests record (support::record_figure; cargo hides a passing test's output).
cat "${CARGO_TARGET_DIR:-target}"/tmp/sim-*.txt "${CARGO_TARGET_DIR:-target}"/tmp/patroni-*.txt \
  "${CARGO_TARGET_DIR:-target}"/tmp/figure-*.txt 2>/dev/null || true

# Every client in clients/ (Rust, Java, Go, Python, Node): its own tests, then the conformance
# suite against release servers on the MariaDB above (the Rust client's tests ran just above).
LEAFID_RUST_CLIENT_TESTED=1 scripts/clients-test.sh
# The gRPC door from Python's grpcio, Node's @grpc/grpc-js and Java's grpc-java (Debian's
# libgrpc-java), the stubs generated from the proto unchanged.
scripts/grpc-clients-test.sh

# The loom models of the snowflake RingBuffer and the segment seqlock/ticket windows (a tiny crate
# with no async runtime).
RUSTFLAGS="--cfg loom" cargo test --manifest-path loom/Cargo.toml --target-dir target/loom

# The running server against its own OpenAPI document (schemathesis, bounded to ~2 minutes).
bash scripts/schemathesis.sh
bash scripts/docker-check.sh  # The Docker packaging, engine or not: hadolint, build context, compose.
bash scripts/deploy-check.sh  # deploy/: promtool rules + their tests, Kubernetes schemas, Grafana queries.

# The dashboard in a real headless Chromium (installs chromium and the npm test deps if missing).
scripts/browser-test.sh
