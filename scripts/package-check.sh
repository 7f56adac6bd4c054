#!/usr/bin/env bash
# Publishing dry run of every leafid client package: each one is built the way its registry
# takes it and checked, nothing is uploaded. Fails if any package would not publish.
#
#   scripts/package-check.sh [CLIENT...]    CLIENT: rust java go python node (default: all five)
#
# Why: a client that passes its tests can still be unpublishable (missing metadata, a file left
# out of the archive, Javadoc that doclint refuses, a Go module path nobody can `go get`). Called
# at the end of scripts/clients-test.sh, so the suite runs it; each step takes seconds once the
# toolchains are installed (the Rust one builds the crate's dependencies once per target dir).
#
#   licence  the repository's LICENSE (Apache-2.0) copied unchanged into each client folder, and
#            Apache-2.0 in each package's metadata
#   node     npm pack --dry-run (the tarball's file list checked) and npm publish --dry-run
#   python   python -m build: sdist and wheel from a copy of the folder, licence file inside
#   rust     cargo package -p leafid-client (with its verify build) and its file list
#   go       go vet ./... under the module path, then the module zipped as a proxy serves it and
#            a fresh module runs `go get <module>@latest` and `go build` through that file proxy
#            (no replace directive; a private module cache), offline
#   java     mvn package offline from Debian's Maven repository on a copy of the folder: the
#            jar (LICENSE, Automatic-Module-Name), its -sources.jar and -javadoc.jar (doclint)
#
# The copies are of the files git would commit (tracked or not ignored), so a file left out of
# git is missed here as it would be in a release.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "package-check: $*" >&2; }
has() { command -v "$1" >/dev/null 2>&1; }

if [ "$#" -gt 0 ]; then clients=("$@"); else clients=(rust java go python node); fi

work="$(mktemp -d "${TMPDIR:-/tmp}/leafid-package-check.XXXXXX")"
# The Go module cache is read-only by design: make it writable before removing it.
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# copy_client NAME: clients/NAME as git would commit it, into $work/src/clients/NAME.
copy_client() {
  mkdir -p "$work/src"
  git ls-files -z --cached --others --exclude-standard -- "clients/$1" |
    while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
    tar --null -T - -cf - | tar -xf - -C "$work/src"
  echo "$work/src/clients/$1"
}

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  log "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# zip_has ARCHIVE NAME...: every NAME is an entry of the zip (jar, wheel) ARCHIVE.
zip_has() {
  python3 - "$@" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
missing = [n for n in sys.argv[2:] if n not in names]
if missing:
    sys.exit(f"{sys.argv[1]}: missing {', '.join(missing)}")
PY
}

check_licence() {
  local c declared
  for c in "${clients[@]}"; do
    cmp -s LICENSE "clients/$c/LICENSE" ||
      { log "clients/$c/LICENSE is missing or differs from the repository's LICENSE"; return 1; }
  done
  grep -q '^   Apache License$' LICENSE && grep -q '^   Version 2.0, January 2004$' LICENSE
  grep -qx 'license = "Apache-2.0"' Cargo.toml
  for c in "${clients[@]}"; do
    case "$c" in
      rust) declared=$(sed -n 's/^license = "\(.*\)"$/\1/p' clients/rust/Cargo.toml) ;;
      python) declared=$(sed -n 's/^license = "\(.*\)"$/\1/p' clients/python/pyproject.toml) ;;
      node) declared=$(sed -n 's/^  "license": "\(.*\)",$/\1/p' clients/node/package.json) ;;
      java) declared=$(sed -n 's|^ *<name>\(Apache-2.0\)</name>$|\1|p' clients/java/pom.xml) ;;
      go) declared=Apache-2.0 ;; # a Go module declares its licence by its LICENSE file alone
    esac
    [ "$declared" = Apache-2.0 ] || { log "$c declares licence '$declared', not Apache-2.0"; return 1; }
  done
}

check_node() {
  has npm || apt_install nodejs npm
  (cd clients/node && npm pack --dry-run --json --ignore-scripts) >"$work/npm-pack.json"
  node - "$work/npm-pack.json" <<'JS'
const [pack] = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
const files = pack.files.map((f) => f.path);
const need = ['LICENSE', 'README.md', 'package.json', 'index.d.ts', 'src/index.js'];
const missing = need.filter((f) => !files.includes(f));
const extra = files.filter((f) => !need.includes(f) && !/^src\/[a-z]+\.js$/.test(f));
if (missing.length || extra.length) {
  console.error(`npm pack: missing [${missing}], not meant to ship [${extra}]`);
  process.exit(1);
}
console.error(`package-check: node: ${pack.name}@${pack.version}, ${files.length} files`);
JS
  (cd clients/node && npm publish --dry-run --ignore-scripts) >"$work/npm-publish.log" 2>&1 ||
    { cat "$work/npm-publish.log" >&2; return 1; }
  grep -F '(dry-run)' "$work/npm-publish.log" | grep -v '^npm warn' >&2 || true
}

check_python() {
  python3 -c 'import build' 2>/dev/null ||
    { log "installing build"; python3 -m pip install --quiet --disable-pip-version-check build; }
  local src
  src="$(copy_client python)"
  python3 -m build --outdir "$work/python-dist" "$src" >"$work/python-build.log" 2>&1 ||
    { cat "$work/python-build.log" >&2; return 1; }
  local sdist wheel
  sdist=$(ls "$work"/python-dist/*.tar.gz)
  wheel=$(ls "$work"/python-dist/*.whl)
  tar -tzf "$sdist" >"$work/sdist-files"
  grep -qx '[^/]*/LICENSE' "$work/sdist-files" || { log "$sdist: no LICENSE"; return 1; }
  local dist; dist=$(basename "$wheel" | cut -d- -f1-2)
  zip_has "$wheel" "$dist.dist-info/licenses/LICENSE" "leafid_client/__init__.py" "leafid_client/py.typed"
  python3 - "$wheel" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
if "License-Expression: Apache-2.0" not in meta.splitlines():
    sys.exit("wheel METADATA: no License-Expression: Apache-2.0")
PY
  log "python: $(basename "$sdist"), $(basename "$wheel")"
}

check_rust() {
  cargo package -p leafid-client --allow-dirty --list >"$work/crate-files"
  grep -qx LICENSE "$work/crate-files" && grep -qx README.md "$work/crate-files" ||
    { log "the crate misses LICENSE or README.md"; return 1; }
  cargo package -p leafid-client --allow-dirty
}

check_go() {
  has go || apt_install golang-go
  local module src proxy consumer version=v0.1.0
  module="$(sed -n 's/^module //p' clients/go/go.mod)"
  (
    cd clients/go
    export GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on
    [ "$(go list -m)" = "$module" ]
    go vet ./...
  )
  # The module as a proxy serves it (module@version/ prefix; what git would commit), then a new
  # module gets it by path alone. Any version does: the dry run tests content, not a tag.
  src="$(copy_client go)"
  proxy="$work/go-proxy/$module/@v"
  mkdir -p "$proxy"
  echo "$version" >"$proxy/list"
  cp "$src/go.mod" "$proxy/$version.mod"
  echo "{\"Version\":\"$version\",\"Time\":\"2025-01-01T00:00:00Z\"}" >"$proxy/$version.info"
  python3 - "$src" "$module@$version" "$proxy/$version.zip" <<'PY'
import os, sys, zipfile
src, prefix, out = sys.argv[1:]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for d, _, files in os.walk(src):
        for f in files:
            p = os.path.join(d, f)
            z.write(p, prefix + "/" + os.path.relpath(p, src))
PY
  consumer="$work/go-consumer"
  mkdir -p "$consumer"
  printf 'module example.com/consumer\n\ngo 1.19\n' >"$consumer/go.mod"
  cat >"$consumer/main.go" <<EOF
package main

import leafid "$module"

func main() { _, _ = leafid.New(leafid.Config{Servers: []string{"http://127.0.0.1:1"}}) }
EOF
  (
    cd "$consumer"
    export GOPROXY="file://$work/go-proxy" GOSUMDB=off GOFLAGS=-mod=mod GO111MODULE=on \
      GOMODCACHE="$work/go-modcache" GOPRIVATE= GONOSUMDB= GONOPROXY=
    go get "$module@latest"
    go build -o /dev/null .
    [ -f "$GOMODCACHE/$module@$version/LICENSE" ] || { echo "the module zip has no LICENSE" >&2; exit 1; }
  )
  log "go: $module ($version through a file proxy)"
}

check_java() {
  local repo=/usr/share/maven-repo need=()
  has javac || need+=(default-jdk-headless)
  has mvn || need+=(maven)
  [ -d "$repo/org/junit/jupiter/junit-jupiter-engine/5.9.2" ] || need+=(junit5)
  [ -d "$repo/org/apache/maven/plugins/maven-compiler-plugin/3.10.1" ] || need+=(libmaven-compiler-plugin-java)
  [ -d "$repo/org/apache/maven/plugins/maven-jar-plugin/3.3.0" ] || need+=(libmaven-jar-plugin-java)
  [ -d "$repo/org/apache/maven/plugins/maven-resources-plugin/3.3.0" ] || need+=(libmaven-resources-plugin-java)
  [ -d "$repo/org/apache/maven/plugins/maven-surefire-plugin/2.22.3" ] || need+=(libsurefire-java)
  [ -d "$repo/org/apache/maven/plugins/maven-source-plugin/3.2.1" ] || need+=(libmaven-source-plugin-java)
  [ -d "$repo/org/apache/maven/plugins/maven-javadoc-plugin/3.4.1" ] || need+=(libmaven-javadoc-plugin-java)
  [ "${#need[@]}" = 0 ] || apt_install "${need[@]}"
  local src
  src="$(copy_client java)"
  # The tests ran in clients/java/test.sh (they need a server); this is the publishing build.
  (cd "$src" && mvn -o -B --no-transfer-progress -Dmaven.repo.local="$repo" -DskipTests package) \
    >"$work/mvn.log" 2>&1 || { grep -E '^\[(WARNING|ERROR)\]|warning|error' "$work/mvn.log" >&2; return 1; }
  local base="$src/target/leafid-client-0.1.0"
  zip_has "$base.jar" META-INF/LICENSE io/leafid/client/LeafidClient.class
  zip_has "$base-sources.jar" META-INF/LICENSE io/leafid/client/LeafidClient.java
  # Javadoc lays the pages out under the jar's Automatic-Module-Name.
  zip_has "$base-javadoc.jar" index.html io.leafid.client/io/leafid/client/LeafidClient.html
  python3 - "$base.jar" <<'PY'
import sys, zipfile
manifest = zipfile.ZipFile(sys.argv[1]).read("META-INF/MANIFEST.MF").decode()
if "Automatic-Module-Name: io.leafid.client" not in manifest.splitlines():
    sys.exit("jar manifest: no Automatic-Module-Name: io.leafid.client")
PY
  log "java: io.leafid:leafid-client:0.1.0 (jar, sources, javadoc)"
}

failed=()
# Each check in a subshell of its own with errexit on: its first failing command fails it
# (called as an `if` condition, a function would run with errexit off).
step() {
  local name="$1" start=$SECONDS rc
  log "$name"
  set +e
  (set -e; "check_$name")
  rc=$?
  set -e
  if [ "$rc" = 0 ]; then
    log "$name: ok ($((SECONDS - start)) s)"
  else
    log "$name: FAILED ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
}

step licence
for c in "${clients[@]}"; do
  case "$c" in
    rust | java | go | python | node) step "$c" ;;
    *) log "unknown client $c"; failed+=("$c") ;;
  esac
done

if [ "${#failed[@]}" -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi
log "every package would publish"
