#!/usr/bin/env bash
# The gRPC door (issue 46) from clients of other ecosystems, against the server binary with
# `grpc.enabled` on a temporary SQLite file:
#
#   scripts/grpc-clients-test.sh [python] [node] [java]     (default: all three)
#
# - python: grpcio, grpcio-tools (the stubs generated at test time from
#   proto/leafid/v1/leafid.proto, unchanged), grpcio-health-checking's checker and
#   grpcio-reflection's listing: scripts/grpc-python-test.py.
# - node: @grpc/grpc-js with @grpc/proto-loader (the proto loaded unchanged, int64 as strings):
#   scripts/grpc-node-test.js, its packages installed with npm into target/grpc-node.
# - java: grpc-java, protobuf-java and protoc-gen-grpc-java, all from Debian's packages
#   (JAVA_PACKAGES below, installed with apt-get): the stubs generated at test time by protoc
#   from the proto unchanged, compiled with javac, run with java: scripts/grpc-java-test/.
#
# Each calls every RPC, the stream included, and checks the ids as the conformance suite does
# (unique, increasing per caller, exact 64-bit values). Installs what is missing (pip, npm, apt).
# Builds the debug server unless LEAFID_BIN names one. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
log() { echo "grpc-clients-test: $*" >&2; }

# CARGO_TARGET_DIR as cargo reads it: absolute, or relative to the checkout.
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

which=("$@")
[ "${#which[@]}" -gt 0 ] || which=(python node java)

# Java's client, every piece a Debian package: protoc and the grpc-java plugin, the grpc-java
# jars with the Netty transport and the jars they load (Debian's libgrpc-java declares none of
# them), google.rpc.Status, grpc-proto's health and reflection protos, and
# javax.annotation.Generated, which the 1.41 plugin writes on every stub; and a JDK
# (default-jdk-headless) unless javac is on PATH already.
JAVA_PACKAGES=(protobuf-compiler protobuf-compiler-grpc-java-plugin libgrpc-java libprotobuf-java
  libnetty-java libguava-java libperfmark-java libgoogle-gson-java libgoogle-common-protos-java
  grpc-proto libgeronimo-annotation-1.3-spec-java)

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
    java)
      missing=()
      for p in "${JAVA_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
      done
      command -v javac >/dev/null || missing+=(default-jdk-headless)
      if [ "${#missing[@]}" -gt 0 ]; then
        (source scripts/lib/common.sh && leafid_install_packages "${missing[@]}")
      fi
      bash scripts/grpc-java-test/run.sh || failed+=(java)
      ;;
    *) log "unknown client $client"; exit 2 ;;
  esac
done

if [ "${#failed[@]}" -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi
log "every gRPC client passed"
