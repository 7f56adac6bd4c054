#!/usr/bin/env bash
# leafid's gRPC door from Java's grpc-java, every piece from Debian's packages (run by
# scripts/grpc-clients-test.sh java, which installs them; see JAVA_PACKAGES there):
#
#   1. protoc with protoc-gen-grpc-java generates the stubs into a temporary directory from
#      proto/leafid/v1/leafid.proto (unchanged), grpc-proto's grpc/health/v1/health.proto and
#      grpc/reflection/v1/reflection.proto, and this folder's error_info.proto (ErrorInfo only);
#   2. javac compiles them with LeafidGrpcTest.java against the jars in /usr/share/java;
#   3. java runs it: the server binary ($LEAFID_BIN, else $CARGO_TARGET_DIR/debug/leafid) on a
#      temporary SQLite file, every RPC, "N passed, N failed", non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
log() { echo "grpc-java-test: $*" >&2; }

jars=/usr/share/java
# Compile time: the gRPC and protobuf APIs the stubs and the test use; geronimo-annotation for
# javax.annotation.Generated, which protoc-gen-grpc-java 1.41 writes on every stub and Java 11+
# no longer ships (source-retention: not needed at run time).
compile=(grpc-api grpc-context grpc-core grpc-stub grpc-protobuf grpc-protobuf-lite grpc-netty
  protobuf guava proto-google-common-protos gson geronimo-annotation-1.3-spec)
# Run time: the Netty transport (grpc-netty on Debian's netty 4.1) and what grpc-core loads.
runtime=(grpc-api grpc-context grpc-core grpc-stub grpc-protobuf grpc-protobuf-lite grpc-netty
  protobuf guava proto-google-common-protos gson perfmark-api
  netty-buffer netty-codec netty-codec-http netty-codec-http2 netty-codec-socks netty-common
  netty-handler netty-handler-proxy netty-resolver netty-transport)
classpath() {
  local out="" j
  for j in "$@"; do
    [ -e "$jars/$j.jar" ] || { log "missing $jars/$j.jar (run scripts/grpc-clients-test.sh java to install)"; exit 1; }
    out="${out:+$out:}$jars/$j.jar"
  done
  echo "$out"
}
cp_compile="$(classpath "${compile[@]}")"
cp_run="$(classpath "${runtime[@]}")"
plugin="$(command -v protoc-gen-grpc-java || echo /usr/bin/grpc_java_plugin)"
for tool in protoc javac java "$plugin"; do
  command -v "$tool" >/dev/null || { log "missing $tool (run scripts/grpc-clients-test.sh java to install)"; exit 1; }
done
grpc_proto=/usr/share/grpc-proto
[ -e "$grpc_proto/grpc/health/v1/health.proto" ] || { log "missing $grpc_proto (Debian's grpc-proto)"; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/leafid-grpc-java.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/classes" "$tmp/server"

protoc -I"$root/proto" -I"$grpc_proto" -I"$here" \
  --plugin=protoc-gen-grpc-java="$plugin" \
  --java_out="$tmp/src" --grpc-java_out="$tmp/src" \
  leafid/v1/leafid.proto grpc/health/v1/health.proto grpc/reflection/v1/reflection.proto \
  error_info.proto
# -XDsuppressNotes: the generated code's deprecation notes are not ours to fix.
find "$tmp/src" -name '*.java' >"$tmp/sources"
javac -nowarn -XDsuppressNotes -encoding UTF-8 -d "$tmp/classes" -cp "$cp_compile" \
  "$here/LeafidGrpcTest.java" @"$tmp/sources"

# The test's exit code is the script's (set -e would skip the trap's cleanup message otherwise).
rc=0
java -cp "$tmp/classes:$cp_run" LeafidGrpcTest "$root" "$tmp/server" || rc=$?
exit "$rc"
