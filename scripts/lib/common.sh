# shellcheck shell=bash
# Shared by the scripts that run test databases (sourced, never run): the checkout's root, its
# own ports, Debian package installs, and a data directory the database's service user can reach.
#
# Ports: every checkout gets its own block of 32 loopback ports, so two checkouts on one machine
# can run their test databases at the same time. The block starts at 10000 + 32 * SLOT, where
# SLOT (0..249) is the CRC (cksum) of the checkout's physical absolute path modulo 250, or
# $LEAFID_TEST_PORT_SLOT when set (for the rare two checkouts whose paths land on one slot: the
# scripts stop with a line saying so). 10000..17999 stays below the kernel's ephemeral range
# (32768+) and clear of the other test ports: the benches' 18080..18090, the tests' own free-port
# picks in 20000..32000 (private MariaDBs in 23400..24000). Offsets in the block:
#   +0       scripts/mariadb.sh (MariaDB)
#   +1..+12  scripts/galera.sh (3 nodes: SQL +1..+3, group +4..+6, IST +7..+9, SST +10..+12)
#   +13,+14  scripts/replica.sh (primary, replica)
#   +15      scripts/postgres.sh (PostgreSQL)
#   +16      scripts/pgbouncer.sh (PgBouncer in front of +15)
#   +17..+24 scripts/patroni.sh (PostgreSQL nodes +17,+18; Patroni REST +19,+20; etcd client
#            +21, peer +22; HAProxy primary +23, HAProxy stats/spare +24)
#   +25,+26  scripts/deploy-check.sh (leafid and Prometheus of its live step)
#   +27..+31 free
# Each script keeps its own environment override of these defaults.
#
# Packages: leafid_install_packages installs missing Debian packages with apt-get, as root or
# through sudo (non-interactive sudo, or sudo with a terminal to ask for a password). Without
# either it stops at once with one line naming the packages and the command to install them.
#
# Service user's directory: leafid_rundir makes (or finds again) a per-checkout directory under
# /tmp, mode 0700, owned by the user a database runs as, and records its path in a file under the
# checkout's target/. /tmp, not $TMPDIR: the service user (mysql) must be able to reach it, and
# a path without spaces is what mariadb-install-db and the SST scripts need.

# The checkout's root (physical path, symlinks resolved): one checkout, one set of ports.
LEAFID_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"

# The database account the scripts log in as through the unix socket (auth by socket): the OS
# user running them, root or not; mariadb-install-db gets it as --auth-root-socket-user (its
# default, $USER, may be unset or stale under su or in CI).
# shellcheck disable=SC2034 # used by the scripts that source this file
LEAFID_DB_ADMIN="$(id -un)"

# Name used in messages: the sourcing script's file name.
LEAFID_SCRIPT="$(basename "${BASH_SOURCE[1]:-$0}")"

leafid_log() { printf '%s: %s\n' "$LEAFID_SCRIPT" "$*" >&2; }

# The first of the named programs on PATH or in /usr/sbin (a non-root PATH often lacks it).
leafid_find_bin() {
  local b
  for b in "$@"; do command -v "$b" >/dev/null 2>&1 && { command -v "$b"; return 0; }; done
  for b in "$@"; do [ -x "/usr/sbin/$b" ] && { echo "/usr/sbin/$b"; return 0; }; done
  return 1
}

# This checkout's port slot (0..249), see the header; checked here, at source time, so that a
# bad override stops the script at once.
leafid_slot() {
  if [ -n "${LEAFID_TEST_PORT_SLOT:-}" ]; then echo "$((10#$LEAFID_TEST_PORT_SLOT))"; return 0; fi
  local crc
  crc="$(printf '%s' "$LEAFID_ROOT" | cksum | cut -d' ' -f1)"
  echo $((crc % 250))
}
case "${LEAFID_TEST_PORT_SLOT:-0}" in
  '' | *[!0-9]* | ????*) leafid_log "LEAFID_TEST_PORT_SLOT must be a number in 0..249"; exit 2 ;;
esac
[ "$((10#${LEAFID_TEST_PORT_SLOT:-0}))" -lt 250 ] ||
  { leafid_log "LEAFID_TEST_PORT_SLOT must be a number in 0..249"; exit 2; }

# The first port of this checkout's block.
leafid_port_block() { echo $((10000 + 32 * $(leafid_slot))); }

# Whether something accepts connections on 127.0.0.1:PORT.
leafid_port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Stops with one line when one of the PORTS is taken by another process (callers check only
# ports their own instance does not hold).
leafid_ports_free_or_die() {
  local p
  for p in "$@"; do
    if leafid_port_busy "$p"; then
      leafid_log "port $p (slot $(leafid_slot) of $LEAFID_ROOT) is taken by another process; run with LEAFID_TEST_PORT_SLOT=N (0..249, another slot) or this script's port variable"
      exit 1
    fi
  done
}

# Installs the Debian packages PKGS (all missing ones, named by the caller): as root directly,
# otherwise through sudo; without a usable sudo, one line and exit 1.
leafid_install_packages() {
  [ "$#" -gt 0 ] || return 0
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
      sudo=(sudo)
    else
      leafid_log "missing Debian packages: $*; install them as root: apt-get install -y $* (or give this user sudo)"
      exit 1
    fi
  fi
  leafid_log "installing $* from Debian's packages"
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300)
  # policy-rc.d (where present) keeps the packages from starting their system-wide services.
  # A first try without `apt-get update`, which is slow and usually not needed.
  if ! "${apt[@]}" install -y -qq "$@" >/dev/null 2>&1; then
    "${apt[@]}" update -qq >&2 || true
    "${apt[@]}" install -y -qq "$@" >&2 ||
      { leafid_log "apt-get install $* failed (output above)"; exit 1; }
  fi
}

# The user a database runs as: mysql when root (see scripts/galera.sh), else the caller.
leafid_service_user() { if [ "$(id -u)" = 0 ]; then echo mysql; else id -un; fi; }

# The recorded per-checkout directory of RECORD (a file under target/), or nothing.
leafid_rundir_recorded() {
  local record="$1" dir
  [ -f "$record" ] || return 0
  dir="$(cat "$record")"
  [ -d "$dir" ] && [ ! -L "$dir" ] && echo "$dir"
  return 0
}

# Prints the per-checkout directory recorded in RECORD, making a new one (mktemp under /tmp,
# named leafid-NAME.XXXXXX, mode 0700, owned by OWNER) when none is recorded, it is gone, or it
# is not OWNER's with mode 700 (a stale record must never lead into someone else's directory).
leafid_rundir() {
  local record="$1" name="$2" owner="$3" dir
  dir="$(leafid_rundir_recorded "$record")"
  if [ -n "$dir" ] && [ "$(stat -c '%U %a' "$dir")" = "$owner 700" ]; then
    echo "$dir"
    return 0
  fi
  dir="$(mktemp -d "/tmp/leafid-$name.XXXXXX")"
  chmod 700 "$dir"
  [ "$(id -un)" = "$owner" ] || chown "$owner:" "$dir"
  mkdir -p "$(dirname "$record")"
  echo "$dir" >"$record"
  echo "$dir"
}
