#!/usr/bin/env bash
# The gRPC door (issue 46) from clients of other ecosystems, against the server binary with
# `grpc.enabled` on a temporary SQLite file:
#
#   scripts/grpc-clients-test.sh [python] [node]     (default: both)
#
# - python: grpcio, grpcio-tools (the stubs generated at test time from
#   proto/leafid/v1/leafid.proto, unchanged), grpcio-health-checking's checker and
#   grpcio-reflection's listing: scripts/grpc-python-test.py.
# - node: @grpc/grpc-js with @grpc/proto-loader (the proto loaded unchanged, int64 as strings):
#   scripts/grpc-node-test.js, its packages installed with npm into target/grpc-node.
#
# Each calls every RPC, the stream included, and checks the ids as the conformance suite does
# (unique, increasing per caller, exact 64-bit values). Installs what is missing (pip, npm).
# Builds the debug server unless LEAFID_BIN names one. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
log() { echo "grpc-clients-test: $*" >&2; }

# CARGO_TARGET_DIR as cargo reads it: absolute, or relative to the checkout.
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

which=("$@")
[ "${#which[@]}" -gt 0 ] || which=(python node)

if [ -z "${LEAFID_BIN:-}" ]; then
  cargo build --bin leafid
  export LEAFID_BIN="$target/debug/leafid"
fi
log "server: $LEAFID_BIN"

failed=()
for client in "${which[@]}"; do
  case "$client" in
    python)
      if ! python3 -c 'import grpc, grpc_tools, grpc_health, grpc_reflection' 2>/dev/null; then
        log "installing grpcio, grpcio-tools, grpcio-health-checking, grpcio-reflection"
        python3 -m pip install --quiet --disable-pip-version-check \
          grpcio grpcio-tools grpcio-health-checking grpcio-reflection
      fi
      python3 scripts/grpc-python-test.py || failed+=(python)
      ;;
    node)
      if [ ! -e scripts/grpc-node-test.js ]; then log "node: no test yet"; continue; fi
      command -v node >/dev/null || (source scripts/lib/common.sh && leafid_install_packages nodejs npm)
      dir="$target/grpc-node"
      if [ ! -d "$dir/node_modules/@grpc/grpc-js" ] || [ ! -d "$dir/node_modules/@grpc/proto-loader" ]; then
        log "installing @grpc/grpc-js and @grpc/proto-loader in $dir"
        mkdir -p "$dir"
        (cd "$dir" && [ -e package.json ] || echo '{"private":true}' > package.json)
        (cd "$dir" && npm install --no-audit --no-fund --loglevel=error @grpc/grpc-js @grpc/proto-loader >&2)
      fi
      NODE_PATH="$dir/node_modules" node scripts/grpc-node-test.js || failed+=(node)
      ;;
    *) log "unknown client $client"; exit 2 ;;
  esac
done

if [ "${#failed[@]}" -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi
log "every gRPC client passed"
