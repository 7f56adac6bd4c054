#!/usr/bin/env bash
# Quick check that the test databases start from a fresh clone wherever it lies (issues 27, 21):
# clones this checkout's committed state (git clone, then REV, default HEAD) to
# "DIR/leafid clone", DIR made by mktemp -d (mode 0700, like root's home on Debian; the path has
# a space), and in that clone starts and stops every test database:
#   scripts/mariadb.sh (start, SELECT 1 as user leafid over TCP, stop),
#   scripts/galera.sh (start, SELECT 1 on each node, stop, purge),
#   scripts/haproxy.sh install (it runs no server of its own: the tests start HAProxy),
#   scripts/replica.sh when the clone has one (start, SELECT 1 on both, stop).
# It also checks that the clone's ports differ from this checkout's and that whatever instances
# of this checkout answered before still answer after. No cargo build; about half a minute once
# the packages are installed. Everything it started is stopped and the directory removed on exit.
#
#   scripts/clone-check.sh [REV]   # REV e.g. an older commit, to see the check fail there
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd -P)"
rev="${1:-HEAD}"

log() { printf 'clone-check.sh: %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

client_bin="$(command -v mariadb || command -v mysql || true)"

# Whether mysql://leafid:leafid@127.0.0.1:PORT answers SELECT 1 over TCP.
answers() {
  local port="${1##*:}"
  [ -n "$client_bin" ] &&
    "$client_bin" --no-defaults --protocol=tcp -h127.0.0.1 -P"$port" -uleafid -pleafid \
      --connect-timeout=5 -Nse 'SELECT 1' >/dev/null 2>&1
}

# The URLs this checkout's test databases use (running or not), one per line.
urls_here() {
  local s
  for s in mariadb galera replica; do
    [ -f "$src/scripts/$s.sh" ] || continue
    bash "$src/scripts/$s.sh" url 2>/dev/null | tr ' ' '\n' || true
  done
}

# Those of them that answer now.
answering_here() {
  local u
  for u in $(urls_here); do answers "$u" && echo "$u"; done
  return 0
}

tmp="$(mktemp -d)"
clone="$tmp/leafid clone"
started=()
cleanup() {
  local s
  for s in "${started[@]}"; do
    case "$s" in
      galera) bash "$clone/scripts/galera.sh" purge >/dev/null 2>&1 ||
        bash "$clone/scripts/galera.sh" stop >/dev/null 2>&1 || true ;;
      *) bash "$clone/scripts/$s.sh" stop >/dev/null 2>&1 || true ;;
    esac
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

t0=$SECONDS
here="$(urls_here | tr '\n' ' ')"
before="$(answering_here | tr '\n' ' ')"
git clone -q "$src" "$clone"
git -C "$clone" -c advice.detachedHead=false checkout -q "$rev"
log "clone of $rev ($(git -C "$clone" rev-parse --short HEAD)) in '$clone' (parent mode $(stat -c %a "$tmp"), user $(id -un))"

# Runs `scripts/NAME.sh start [ARGS]` in the clone; its stdout (URLs) in $urls.
start_in_clone() {
  local name="$1"; shift
  started+=("$name")
  urls="$(cd "$clone" && bash "scripts/$name.sh" start "$@")" ||
    fail "scripts/$name.sh start failed in '$clone'"
  client_bin="${client_bin:-$(command -v mariadb || command -v mysql || true)}"
  local u p
  for u in $urls; do
    answers "$u" || fail "scripts/$name.sh: $u does not answer SELECT 1 as leafid"
    p="${u##*:}"
    case " $here " in
      *":$p "*) fail "scripts/$name.sh in the clone uses port $p, as this checkout does" ;;
    esac
  done
  log "scripts/$name.sh: up and answering ($urls), $((SECONDS - t0)) s so far"
}

stop_in_clone() {
  local name="$1" cmd="${2:-stop}"
  (cd "$clone" && bash "scripts/$name.sh" "$cmd") || fail "scripts/$name.sh $cmd failed"
  local u; for u in $urls; do answers "$u" && fail "scripts/$name.sh $cmd: $u still answers"; done
  return 0
}

start_in_clone mariadb
stop_in_clone mariadb

start_in_clone galera
stop_in_clone galera stop
if grep -q '^  purge)' "$clone/scripts/galera.sh"; then stop_in_clone galera purge; fi

(cd "$clone" && bash scripts/haproxy.sh install >/dev/null) || fail "scripts/haproxy.sh install failed"

if [ -f "$clone/scripts/replica.sh" ]; then
  start_in_clone replica
  stop_in_clone replica
fi

for u in $before; do
  answers "$u" || fail "this checkout's $u answered before the check and no longer does"
done
kept=""; [ -z "${before// /}" ] || kept="; this checkout's running instances still answer"
log "OK in $((SECONDS - t0)) s: the test databases start and stop in '$clone'$kept"
