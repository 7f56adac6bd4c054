#!/usr/bin/env bash
# The dashboard in a real browser: Debian's headless Chromium driven by Playwright (npm
# `playwright-core`, which never downloads a browser of its own) against the real binary.
#
# Installs what is missing (chromium and sqlite3 from Debian's packages, `npm ci` in
# tests/browser), builds the debug binary, starts it on a temporary SQLite file on 127.0.0.1 with
# an admin token, runs tests/browser/dashboard.test.mjs, saves target/dashboard.png, stops the
# server. Exits non-zero when anything fails. Server log: target/browser-test/leafid.log.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
log() { printf 'browser-test.sh: %s\n' "$*" >&2; }

chromium_bin() { for b in chromium chromium-browser; do command -v "$b" && return 0; done; return 1; }

install_packages() {
  local missing=()
  chromium_bin >/dev/null || missing+=(chromium)
  command -v sqlite3 >/dev/null || missing+=(sqlite3)
  command -v node >/dev/null || missing+=(nodejs npm)
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "installing ${missing[*]} from Debian's packages"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # Wait for another apt/dpkg run (e.g. scripts/mariadb.sh) instead of failing on its lock.
  $sudo apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
  $sudo apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${missing[@]}" >&2
}

install_packages
browser="$(chromium_bin)"

# npm ci (which starts from an empty node_modules) only when the lock file changed since the
# last install, recorded in a stamp beside the packages.
(
  cd tests/browser
  stamp=node_modules/.leafid-installed-lock
  if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
    log "npm ci in tests/browser"
    npm ci --no-audit --no-fund --loglevel=error >&2
    cp package-lock.json "$stamp"
  fi
)

# The binary as `cargo test` builds it: a no-op after the test run (see scripts/schemathesis.sh).
cargo test --no-run --test api >&2

work="$root/target/browser-test"
rm -rf "$work"
mkdir -p "$work"
db="$work/leafid.db"
token="browser-test-$$-$RANDOM"
server_log="$work/leafid.log"
# The key of the permuted tag the dashboard test creates (`vault`).
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/vault.key")

LEAFID__SERVER__HOST=127.0.0.1 \
LEAFID__SERVER__PORT=0 \
LEAFID__SERVER__WORKERS=1 \
LEAFID__DATABASE__URL="sqlite://$db" \
LEAFID__ADMIN__TOKEN="$token" \
LEAFID__SHAPES__KEYS__VAULT="$work/vault.key" \
LEAFID__LOG__FORMAT=json \
RUST_LOG=info \
  target/debug/leafid serve >/dev/null 2>"$server_log" &
server_pid=$!

stop_server() {
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
}
trap stop_server EXIT

port=""
for _ in $(seq 1 300); do
  line="$(grep -m1 '"message":"listening"' "$server_log" 2>/dev/null || true)"
  if [ -n "$line" ]; then
    port="$(printf '%s' "$line" | sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p')"
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  log "leafid did not log its port; its log:"
  tail -20 "$server_log" >&2
  exit 1
fi
log "leafid on 127.0.0.1:$port (database $db)"

status=0
(
  cd tests/browser
  LEAFID_URL="http://127.0.0.1:$port" \
  LEAFID_DB_FILE="$db" \
  LEAFID_ADMIN_TOKEN="$token" \
  CHROMIUM_PATH="$browser" \
  SCREENSHOT="$root/target/dashboard.png" \
  BROWSER_PROFILE_DIR="$work/profile" \
    node --test --test-concurrency=1 dashboard.test.mjs
) || status=$?

if [ "$status" -ne 0 ]; then
  log "browser test failed; last lines of the server log:"
  tail -20 "$server_log" >&2
fi
[ -f target/dashboard.png ] && log "screenshot: target/dashboard.png"
exit "$status"
