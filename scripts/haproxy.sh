#!/usr/bin/env bash
# HAProxy for the load-balancer tests: installs Debian's haproxy if missing and prints the path
# of the binary. The tests write their own configuration and run `haproxy -f CFG -db` in the
# foreground as a child process; the system-wide service is never started.
#
#   scripts/haproxy.sh install   # idempotent; prints /usr/sbin/haproxy (or wherever it is)
#   scripts/haproxy.sh path      # prints the path, fails if it is not installed
set -euo pipefail

log() { printf 'haproxy.sh: %s\n' "$*" >&2; }

find_bin() {
  command -v haproxy 2>/dev/null && return 0
  [ -x /usr/sbin/haproxy ] && { echo /usr/sbin/haproxy; return 0; }
  return 1
}

install() {
  if find_bin >/dev/null; then find_bin; return 0; fi
  log "installing haproxy from Debian's packages"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  # policy-rc.d (where present) keeps the package from starting the system-wide service; where
  # it is absent, stop the service the package started: the tests run their own instances.
  $sudo apt-get install -y -qq haproxy >&2
  if [ ! -x /usr/sbin/policy-rc.d ] && command -v systemctl >/dev/null 2>&1; then
    $sudo systemctl disable --now haproxy >/dev/null 2>&1 || true
  fi
  find_bin
}

case "${1:-install}" in
  install) install ;;
  path) find_bin || { log "haproxy is not installed (scripts/haproxy.sh install)"; exit 1; } ;;
  *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
