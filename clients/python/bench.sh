#!/usr/bin/env bash
# The Python client's benchmark against a running leafid server: prints one line
#   BENCH {"client":"python","case":...,"ids_per_s":...,"baseline_per_s":...,"ratio":...,"method":...}
# per case (local, formatted_local, sustained_1, sustained_4) on stdout, everything else on stderr.
#   LEAFID_BENCH_URL   a running (release) server, e.g. http://127.0.0.1:18200
#   LEAFID_BENCH_TAG   an existing segment tag
#   LEAFID_BENCH_SECS  seconds per sustained case (default 10)
#   LEAFID_BENCH_CASES comma-separated cases (default all; local and formatted_local need no
#                      server)
#   PYTHON             interpreter (default python3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
# "Build": byte-compile the client and the bench, quietly.
"$PYTHON" -m compileall -q "$here/src" "$here/bench" >/dev/null
exec "$PYTHON" "$here/bench/bench.py"
