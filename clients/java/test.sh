#!/usr/bin/env bash
# Builds the Java client offline from Debian's Maven repository and runs its tests against real
# leafid servers; then compiles the conformance adapter and the example, and smoke-tests the
# adapter. Exit status non-zero on any failure.
#
#   clients/java/test.sh            # LEAFID_BIN=/path/to/leafid to test another server binary
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
repo=$(cd ../.. && pwd)
REPO=/usr/share/maven-repo

# Toolchain: JDK, Maven, JUnit 5 and the Maven plugins the pom pins, all Debian packages.
need=()
command -v javac >/dev/null || need+=(default-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
[ -d "$REPO/org/junit/jupiter/junit-jupiter-engine/5.9.2" ] || need+=(junit5)
[ -d "$REPO/org/apache/maven/plugins/maven-compiler-plugin/3.10.1" ] || need+=(libmaven-compiler-plugin-java)
[ -d "$REPO/org/apache/maven/plugins/maven-jar-plugin/3.3.0" ] || need+=(libmaven-jar-plugin-java)
[ -d "$REPO/org/apache/maven/plugins/maven-resources-plugin/3.3.0" ] || need+=(libmaven-resources-plugin-java)
[ -d "$REPO/org/apache/maven/plugins/maven-surefire-plugin/2.22.3" ] || need+=(libsurefire-java)
[ -d "$REPO/org/apache/maven/plugins/maven-source-plugin/3.2.1" ] || need+=(libmaven-source-plugin-java)
[ -d "$REPO/org/apache/maven/plugins/maven-javadoc-plugin/3.4.1" ] || need+=(libmaven-javadoc-plugin-java)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The server the tests start (target/debug/leafid unless LEAFID_BIN says otherwise).
if [ -z "${LEAFID_BIN:-}" ] && [ ! -x "$repo/target/debug/leafid" ]; then
    (cd "$repo" && cargo build --bin leafid)
fi

# Stale classes of removed sources would otherwise survive (no maven-clean-plugin offline).
rm -rf target/classes target/test-classes target/conformance-classes target/example-classes target/doclint-classes \
    target/surefire-reports
# The -sources and -javadoc jars are left to scripts/package-check.sh (the publishing dry run).
mvn -o -B --no-transfer-progress -Dmaven.repo.local="$REPO" \
    -Dmaven.source.skip=true -Dmaven.javadoc.skip=true package

# Doc comments on every member, private ones included (the published Javadoc covers the public
# API and is checked by scripts/package-check.sh).
javac --release 11 -Xlint:all -Xdoclint:all -Werror -d target/doclint-classes src/main/java/io/leafid/client/*.java
javac --release 11 -Xlint:all -Werror -d target/conformance-classes -cp target/classes \
    conformance/io/leafid/client/*.java
javac --release 11 -Xlint:all -Werror -d target/example-classes -cp target/classes examples/*.java

# Adapter smoke test: the protocol's framing and error mapping, no server needed.
answers=$(printf '%s\n' \
    '{"op":"open","servers":["http://127.0.0.1:1"],"batch":10,"request_timeout_ms":200,"wait_timeout_ms":300,"backoff_min_ms":10,"backoff_max_ms":100}' \
    '{"op":"take","engine":"segment","tag":"bad tag","callers":2,"per_caller":3,"pause_ms":0}' \
    '{"op":"take","engine":"snowflake","callers":1,"per_caller":1,"pause_ms":0}' \
    '{"op":"take","engine":"formatted","tag":"bad tag","callers":1,"per_caller":2,"pause_ms":0}' \
    '{"op":"bounds","from":"2026-11-27T00:00:00.000Z","to":"2026-11-27T00:01:00.000Z"}' \
    '{"op":"stats"}' \
    '{"op":"close"}' | ./conformance-adapter 2>/dev/null)
# A take's max_call_ms (the longest call, a duration) varies: checked present, then left out.
timed=$(grep -c ',"max_call_ms":[0-9][0-9.E-]*}$' <<<"$answers" || true)
answers=$(sed -E 's/,"max_call_ms":[0-9][0-9.E-]*\}$/}/' <<<"$answers")
# An error's message (it names the wait and the last failure) varies too.
answers=$(sed -E 's/,"message":"[^"]*"\}\}$/,"message":"..."}}/' <<<"$answers")
if [ "$timed" != 3 ]; then
    echo "conformance adapter smoke test: $timed take answers with max_call_ms, want 3" >&2
    answers="$answers (max_call_ms missing)"
fi
expected='{"ok":true}
{"ok":true,"ids":[[],[]],"errors":[{"kind":"invalid_tag","code":"","count":6}]}
{"ok":true,"ids":[[]],"errors":[{"kind":"unavailable","code":"","count":1}]}
{"ok":true,"ids":[[]],"errors":[{"kind":"invalid_tag","code":"","count":2}]}
{"ok":false,"error":{"kind":"unavailable","code":"","message":"..."}}
{"ok":true,"ids_served":0,"batches":0,"failovers":0,"discarded_ids":0,"batch_size":10}
{"ok":true}'
if [ "$answers" != "$expected" ]; then
    echo "conformance adapter smoke test failed; got:" >&2
    echo "$answers" >&2
    exit 1
fi
echo "conformance adapter smoke test: ok"
