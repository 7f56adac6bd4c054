#!/usr/bin/env bash
# Every leafid client (clients/<lang>/): its own tests, then the one conformance suite.
#
#   scripts/clients-test.sh [CLIENT...]     CLIENT: rust java go python node (default: every
#                                           clients/<name> folder with a test.sh or an adapter)
#
# 1. Builds the release server once (cargo build --release --bin leafid); every client's tests
#    and the conformance driver use it (LEAFID_BIN, unless already set).
# 2. Installs the toolchains a present client needs and the machine lacks (Debian packages:
#    golang-go, maven + default-jdk-headless + junit5, nodejs; pytest with pip).
# 3. Runs clients/<name>/test.sh where it exists (each client builds its adapter there).
# 4. Runs clients/conformance/run.py for every client with an executable conformance-adapter:
#    nine scenarios against real servers on MariaDB (LEAFID_TEST_MYSQL_URL, else the private
#    MariaDB of scripts/mariadb.sh); table in target/conformance.md.
# 5. Runs scripts/package-check.sh for the same clients: the publishing dry run of each package
#    (npm pack/publish --dry-run, python -m build, cargo package, the Go module through a file
#    proxy, mvn package with sources and javadoc jars offline); about a minute once the
#    toolchains are installed and the Rust client's dependencies built.
#
# Called by scripts/test.sh after the cargo tests (LEAFID_RUST_CLIENT_TESTED=1 there: the Rust
# client's tests already ran in the workspace run, so its test.sh only builds its adapter).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

log() { echo "clients-test: $*" >&2; }

if [ "$#" -gt 0 ]; then
  clients=("$@")
else
  clients=()
  for dir in clients/*/; do
    name="$(basename "$dir")"
    [ "$name" = conformance ] && continue
    if [ -e "$dir/test.sh" ] || [ -e "$dir/conformance-adapter" ]; then clients+=("$name"); fi
  done
fi
log "clients: ${clients[*]}"

export LEAFID_TEST_MYSQL_URL="${LEAFID_TEST_MYSQL_URL:-$(scripts/mariadb.sh start)}"
if [ -z "${LEAFID_BIN:-}" ]; then
  cargo build --release --bin leafid
  export LEAFID_BIN="$root/${CARGO_TARGET_DIR:-target}/release/leafid"
fi
log "server: $LEAFID_BIN"

apt_updated=0
apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if [ "$apt_updated" = 0 ]; then
    $sudo apt-get update -qq
    apt_updated=1
  fi
  log "installing $*"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

has() { command -v "$1" >/dev/null 2>&1; }

for c in "${clients[@]}"; do
  case "$c" in
    go) has go || apt_install golang-go ;;
    java)
      has mvn || apt_install maven
      has javac || apt_install default-jdk-headless
      [ -d /usr/share/maven-repo/org/junit/jupiter/junit-jupiter-engine ] || apt_install junit5
      ;;
    python)
      python3 -c 'import pytest' 2>/dev/null ||
        { log "installing pytest"; python3 -m pip install --quiet --disable-pip-version-check pytest; }
      ;;
    node) has node || apt_install nodejs ;;
  esac
done

failed=()
for c in "${clients[@]}"; do
  if [ -e "clients/$c/test.sh" ]; then
    log "$c: clients/$c/test.sh"
    if ! bash "clients/$c/test.sh"; then
      log "$c: its own tests FAILED"
      failed+=("$c (own tests)")
    fi
  else
    log "$c: no test.sh"
  fi
done

adapters=()
for c in "${clients[@]}"; do
  if [ -x "clients/$c/conformance-adapter" ]; then adapters+=("$c"); else log "$c: no conformance-adapter"; fi
done
if [ "${#adapters[@]}" -gt 0 ]; then
  log "conformance: ${adapters[*]}"
  python3 clients/conformance/run.py "${adapters[@]}" || failed+=("conformance")
fi

log "packaging: scripts/package-check.sh ${clients[*]}"
scripts/package-check.sh "${clients[@]}" || failed+=("packaging")

if [ "${#failed[@]}" -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi
log "every client passed"
