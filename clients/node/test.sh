#!/usr/bin/env bash
# Checks and tests the leafid Node client (@leafid/client) offline: Node 20+ (installed with
# apt-get if missing), every source file parsed, then `node --test` against real leafid servers
# (target/debug/leafid at the repository root, built here if missing; LEAFID_BIN overrides).
# No npm install: the package has no dependency, not even a dev one.
set -euo pipefail
cd "$(dirname "$0")"
root="$(cd ../.. && pwd)"

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ "$(node_major)" -lt 20 ]; then
  echo "test.sh: installing Node.js (Debian's nodejs)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null
fi
if [ "$(node_major)" -lt 20 ]; then
  echo "test.sh: Node.js 20 or newer is needed (found $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi

export LEAFID_BIN="${LEAFID_BIN:-$root/target/debug/leafid}"
if [ ! -x "$LEAFID_BIN" ]; then
  echo "test.sh: building the server ($LEAFID_BIN is missing)" >&2
  (cd "$root" && cargo build --bin leafid)
fi

# The "build": every module must parse (the package ships its sources as they are).
for f in src/*.js conformance/*.js examples/*.js bench/*.js test/*.js test/support/*.js; do
  node --check "$f"
done
chmod +x conformance-adapter

node --test --test-concurrency=2 test/*.test.js
