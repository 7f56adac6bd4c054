#!/usr/bin/env bash
# Builds (byte-compiles) the Python client and its conformance adapter, then runs the tests
# against real leafid servers. Offline once pytest is installed. Exits non-zero on failure.
#   PYTHON     interpreter (default python3, 3.9+)
#   LEAFID_BIN server binary (default ../../target/debug/leafid, built with cargo if missing)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$here"

PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "test.sh: $PYTHON missing, installing python3 with apt-get" >&2
    apt-get install -y python3 python3-pip >&2
fi
"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 9):
    sys.exit(f"test.sh: Python 3.9+ needed, this is {sys.version.split()[0]}")
PY
if ! "$PYTHON" -c 'import pytest' >/dev/null 2>&1; then
    echo "test.sh: installing pytest" >&2
    "$PYTHON" -m pip install --quiet pytest >&2
fi

export LEAFID_BIN=${LEAFID_BIN:-$repo/target/debug/leafid}
if [ ! -x "$LEAFID_BIN" ]; then
    echo "test.sh: building the server ($LEAFID_BIN missing)" >&2
    (cd "$repo" && cargo build --bin leafid)
fi

# "Build": every module must compile (syntax) on this interpreter, adapter included.
"$PYTHON" -m compileall -q src conformance examples bench >/dev/null
chmod +x conformance-adapter
# Types, when mypy is installed (it is not required).
if "$PYTHON" -m mypy --version >/dev/null 2>&1; then
    "$PYTHON" -m mypy --strict --no-error-summary src/leafid_client
fi

exec "$PYTHON" -m pytest -q -p no:cacheprovider tests "$@"
