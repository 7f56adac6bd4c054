#!/usr/bin/env bash
# The Java client against AtomicLong (issue 33's table), and its formatted local path against
# its numeric one (formatted_local, issue 34): prints one line per case on stdout,
#   BENCH {"client":"java","case":"local"|"formatted_local"|"sustained_1"|"sustained_4","ids_per_s":..,...}
# and everything else on stderr. Builds the classes first (offline, Debian's Maven repository).
#
#   LEAFID_BENCH_URL=http://127.0.0.1:18200 LEAFID_BENCH_TAG=bench clients/java/bench.sh
# Env: LEAFID_BENCH_URL (a running release server), LEAFID_BENCH_TAG (an existing segment tag),
#      LEAFID_BENCH_SECS (seconds per sustained case, default 10).
set -euo pipefail
cd "$(dirname "$0")"
mvn -o -q -B --no-transfer-progress -Dmaven.repo.local=/usr/share/maven-repo test-compile >&2
exec java -cp target/classes:target/test-classes io.leafid.client.Bench
