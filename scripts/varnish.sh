#!/usr/bin/env bash
# Varnish for the caching-proxy test (tests/api/hostile.rs): installs Debian's varnish if missing
# and prints the path of varnishd. The test runs `varnishd -F` in the foreground as a child
# process with Debian's default configuration (`-b` backend, the built-in VCL) on a port it
# picks (a free one in 20000..32000); the system-wide service is never started. No port of its
# own, so nothing here can collide between checkouts.
#
#   scripts/varnish.sh install   # idempotent; prints /usr/sbin/varnishd (or wherever it is)
#   scripts/varnish.sh path      # prints the path, fails if it is not installed
#
# Installing needs root or sudo; without either, it stops with one line naming the package
# (scripts/lib/common.sh).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

find_bin() { leafid_find_bin varnishd; }

install() {
  if find_bin >/dev/null; then find_bin; return 0; fi
  leafid_install_packages varnish
  # policy-rc.d (where present) keeps the package from starting the system-wide service; where
  # it is absent, stop the service the package started: the test runs its own instance.
  if [ ! -x /usr/sbin/policy-rc.d ] && command -v systemctl >/dev/null 2>&1; then
    local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    "${sudo[@]}" systemctl disable --now varnish >/dev/null 2>&1 || true
  fi
  find_bin
}

case "${1:-install}" in
  install) install ;;
  path) find_bin || { leafid_log "varnish is not installed (scripts/varnish.sh install)"; exit 1; } ;;
  *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
