#!/usr/bin/env bash
# HAProxy for the load-balancer tests: installs Debian's haproxy if missing and prints the path
# of the binary. The tests write their own configuration and run `haproxy -f CFG -db` in the
# foreground as a child process on ports they pick (free ones in 20000..32000); the system-wide
# service is never started. No port of its own, so nothing here can collide between checkouts.
#
#   scripts/haproxy.sh install   # idempotent; prints /usr/sbin/haproxy (or wherever it is)
#   scripts/haproxy.sh path      # prints the path, fails if it is not installed
#
# Installing needs root or sudo; without either, it stops with one line naming the package
# (scripts/lib/common.sh).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

find_bin() { leafid_find_bin haproxy; }

install() {
  if find_bin >/dev/null; then find_bin; return 0; fi
  leafid_install_packages haproxy
  # policy-rc.d (where present) keeps the package from starting the system-wide service; where
  # it is absent, stop the service the package started: the tests run their own instances.
  if [ ! -x /usr/sbin/policy-rc.d ] && command -v systemctl >/dev/null 2>&1; then
    local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    "${sudo[@]}" systemctl disable --now haproxy >/dev/null 2>&1 || true
  fi
  find_bin
}

case "${1:-install}" in
  install) install ;;
  path) find_bin || { leafid_log "haproxy is not installed (scripts/haproxy.sh install)"; exit 1; } ;;
  *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
