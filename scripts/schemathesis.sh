#!/usr/bin/env bash
# Checks the running server against its own OpenAPI document (GET /openapi.json) with
# schemathesis: no 5xx, and every status, content type and body as documented.
#
# Installs schemathesis (pinned) if missing, starts target/debug/leafid (building it if needed)
# on a temporary SQLite file and a free loopback port, runs a bounded `st run`, stops the server
# and exits non-zero on any failure. Admin writes are exercised too (admin.trust_loopback on, no
# token: nothing forwards to this server).
#
# Environment: ST_MAX_EXAMPLES (default 25 per operation), ST_MAX_TIME (default 100 seconds),
# ST_SEED (default 1, for a reproducible run), LEAFID_BIN (default: build target/debug/leafid).
set -euo pipefail
cd "$(dirname "$0")/.."

ST_VERSION=4.32.5
if ! command -v st >/dev/null || [[ "$(st --version 2>/dev/null)" != *"$ST_VERSION"* ]]; then
    echo "installing schemathesis $ST_VERSION" >&2
    python3 -m pip install --quiet "schemathesis==$ST_VERSION" >&2
    hash -r
fi

if [[ -z "${LEAFID_BIN:-}" ]]; then
    # The binary as `cargo test` builds it (same features: a no-op after the test run; a plain
    # `cargo build` would unify features differently and rebuild half the dependencies).
    cargo test --no-run --test api >&2
fi
bin="${LEAFID_BIN:-$PWD/target/debug/leafid}"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
LEAFID__SERVER__HOST=127.0.0.1 \
LEAFID__SERVER__PORT="$port" \
LEAFID__SERVER__WORKERS=2 \
LEAFID__DATABASE__URL="sqlite://$work/leafid.db" \
LEAFID__SNOWFLAKE__WORKER__STRATEGY=static \
LEAFID__SNOWFLAKE__WORKER__ID=1 \
LEAFID__ADMIN__TRUST_LOOPBACK=true \
RUST_LOG="${RUST_LOG:-warn}" \
    "$bin" serve >"$work/server.log" 2>&1 &
server_pid=$!

base="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
    if "$bin" healthcheck --port "$port" >/dev/null 2>&1; then
        break
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "leafid did not start:" >&2
        cat "$work/server.log" >&2
        exit 1
    fi
    sleep 0.1
done

status=0
# From the temporary directory: st keeps its own files in the working directory. One worker:
# with two, Python 3.11's ast.parse (used by hypothesis) fails now and then across threads.
(cd "$work" && st run "$base/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "${ST_MAX_EXAMPLES:-25}" \
    --max-time "${ST_MAX_TIME:-100}" \
    --seed "${ST_SEED:-1}" \
    --workers 1 \
    --request-timeout 10 \
    --generation-database none \
    --no-color) || status=$?

if [[ $status -ne 0 ]]; then
    echo "schemathesis failed (exit $status); server log tail:" >&2
    tail -n 40 "$work/server.log" >&2
fi
exit "$status"
