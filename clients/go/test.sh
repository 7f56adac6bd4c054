#!/usr/bin/env bash
# The Go client's checks, offline: gofmt, go vet, the unit and integration tests (against real
# leafid servers: target/debug/leafid, or $LEAFID_BIN), then the builds of the conformance
# adapter (bin/leafid-conformance, run by ./conformance-adapter) and of the examples.
# LEAFID_GO_RACE=1 also runs the tests under the race detector (slow the first time: it builds
# the standard library with -race).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
  echo "test.sh: go is missing; installing Debian's golang-go" >&2
  apt-get install -y golang-go || { apt-get update && apt-get install -y golang-go; }
fi
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then
  # The lagging-snowflake test runs one server with its wall clock behind (Debian's faketime).
  echo "test.sh: libfaketime is missing; installing Debian's faketime" >&2
  apt-get install -y faketime || { apt-get update && apt-get install -y faketime; }
fi
export GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on
export GOCACHE="${GOCACHE:-${HOME:-/root}/.cache/go-build}"

bin="${LEAFID_BIN:-../../target/debug/leafid}"
if [ ! -x "$bin" ]; then
  echo "test.sh: the server binary $bin is missing: run 'cargo build --bin leafid' at the repository root, or set LEAFID_BIN" >&2
  exit 1
fi

unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "test.sh: not gofmt-formatted: $unformatted" >&2
  exit 1
fi
go vet ./...
go build -o bin/leafid-conformance ./cmd/leafid-conformance
go build -o bin/ ./examples/...
go test -count=1 -timeout 5m ./...
if [ "${LEAFID_GO_RACE:-}" = 1 ]; then
  go test -race -count=1 -timeout 10m ./...
fi
echo "clients/go: all checks passed"
