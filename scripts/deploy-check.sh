#!/usr/bin/env bash
# Checks the operator's kit in deploy/ offline (loopback only); called by scripts/test.sh.
#
#   scripts/deploy-check.sh [STEP...]     STEP: metrics rules kubernetes grafana live (default: all)
#
# metrics     Every leafid_* family that the rules or the dashboard query is one the server
#             exports (a "leafid_..." name in src/, histograms with _bucket/_sum/_count), and the
#             dashboard shows the families operators asked for.
# rules       deploy/prometheus/leafid-rules.yml: `promtool check rules`, then its unit tests
#             (`promtool test rules` on leafid-rules.test.yml). Then the tests are shown to bite:
#             for each alert, the rules with that alert's expression replaced by one that never
#             fires, and by its bare metric (fires on every series), must each fail the tests.
# kubernetes  deploy/kubernetes/*.yaml against the Kubernetes 1.37 schemas that
#             kubernetes-validate (pinned, PyPI) ships (--strict: unknown fields are errors; no
#             download). A manifest broken on purpose (a string port, a misspelt field) must be
#             rejected. Then what a schema cannot see: every LEAFID__SECTION__KEY names a setting of
#             config/default.toml; the server listens on 0.0.0.0 on the container port; liveness
#             probes /health/live and readiness /health/ready; the grace period exceeds
#             server.drain_secs + server.shutdown_timeout_secs; the token and the database URL
#             come from keys of the Secret; the Service and the PodDisruptionBudget select the
#             pods; the pod runs as the Dockerfile's user; files the server writes are on a
#             volume when the root filesystem is read-only. The same checks must reject a copy with
#             too short a grace period and one without the data volume.
# grafana     deploy/grafana/leafid-dashboard.json: valid JSON, unique panel ids, every query
#             (Grafana's variables replaced) parsed by promtool as PromQL; a copy with a PromQL
#             syntax error must be rejected.
# live        A real leafid (target/debug/leafid, or LEAFID_BIN) scraped every second by a real
#             Prometheus (Debian's, on 127.0.0.1; both on ports of the checkout's block) that
#             loads the rules: every rule evaluates without error on leafid's series, no alert
#             is pending or firing on a healthy idle server while a control alert (bare
#             `leafid_segment_next_ready == 0`) is pending, and every dashboard query runs,
#             returning series (all but the 5xx panel).
#
# Installs what it needs: Debian's prometheus package (promtool; its service is not started) and
# kubernetes-validate from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VALIDATE_VERSION=1.37.0
rules=deploy/prometheus/leafid-rules.yml
rules_test=deploy/prometheus/leafid-rules.test.yml
dashboard=deploy/grafana/leafid-dashboard.json
manifests=(deploy/kubernetes/*.yaml)

log() { echo "deploy-check: $*" >&2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

install_tools() {
    if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
        # shellcheck source=scripts/lib/common.sh
        (source scripts/lib/common.sh && leafid_install_packages prometheus)
    fi
    if ! command -v kubernetes-validate >/dev/null ||
        [[ "$(kubernetes-validate --version 2>/dev/null)" != "$KUBERNETES_VALIDATE_VERSION" ]]; then
        log "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION"
        python3 -m pip install --quiet --disable-pip-version-check \
            "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2
        hash -r
    fi
}

step_metrics() {
    log "metrics: the families the rules and the dashboard query, against src/"
    python3 - "$rules" "$dashboard" <<'PY'
import json, pathlib, re, sys
rules, dashboard = sys.argv[1:3]
exported = set()
for path in pathlib.Path("src").rglob("*.rs"):
    exported |= set(re.findall(r'"(leafid_[a-z0-9_]+)"', path.read_text(encoding="utf-8")))
names = exported | {f"{n}{s}" for n in exported for s in ("_bucket", "_sum", "_count")}
used = {}
for path in (rules, dashboard):
    for name in re.findall(r"\bleafid_[a-z0-9_]+", pathlib.Path(path).read_text(encoding="utf-8")):
        used.setdefault(name, path)
bad = [f"{path}: {name} is not exported by the server" for name, path in sorted(used.items())
       if name not in names]
exprs = " ".join(t["expr"] for p in json.load(open(dashboard))["panels"] for t in p.get("targets", []))
wanted = ["leafid_ids_issued_total", "leafid_segment_load_duration_seconds_bucket",
          "leafid_segment_next_ready", "leafid_snowflake_suspended", "leafid_snowflake_worker_id",
          "leafid_snowflake_time_left_seconds", "leafid_http_server_errors_total",
          "leafid_log_lines_dropped_total"]
bad += [f"{dashboard}: no panel shows {name}" for name in wanted if name not in exprs]
if bad:
    sys.exit("deploy-check: " + "\ndeploy-check: ".join(bad))
print(f"deploy-check: {len(used)} families used, all exported", file=sys.stderr)
PY
}

step_rules() {
    log "rules: promtool check rules / test rules ($(promtool --version 2>&1 | head -1))"
    promtool check rules "$rules" >&2
    promtool test rules "$rules_test" >&2
    # The tests must fail when an alert never fires or fires on everything.
    local dir="$tmp/mutants" alert kind out
    mkdir -p "$dir"
    python3 - "$rules" "$dir" <<'PY'
import re, sys, yaml
src, out = sys.argv[1:3]
doc = yaml.safe_load(open(src, encoding="utf-8"))
for group in doc["groups"]:
    for rule in group["rules"]:
        if "alert" not in rule:
            continue
        name, expr = rule["alert"], rule["expr"]
        metric = re.search(r"\b(leafid_[a-z0-9_]+|up)\b", expr).group(1)
        for kind, mutant in (("never", "vector(1) < 0"), ("always", metric)):
            copy = yaml.safe_load(open(src, encoding="utf-8"))
            for g in copy["groups"]:
                for r in g["rules"]:
                    if r.get("alert") == name:
                        r["expr"] = mutant
            with open(f"{out}/{name}.{kind}.yml", "w", encoding="utf-8") as f:
                yaml.safe_dump(copy, f, sort_keys=False)
PY
    local n=0
    for mutant in "$dir"/*.yml; do
        alert="$(basename "$mutant" .yml)"; kind="${alert##*.}"; alert="${alert%.*}"
        mkdir -p "$tmp/run"
        cp "$rules_test" "$tmp/run/leafid-rules.test.yml"
        cp "$mutant" "$tmp/run/leafid-rules.yml"
        if out="$(promtool test rules "$tmp/run/leafid-rules.test.yml" 2>&1)"; then
            log "rules: the tests pass with $alert made to fire $kind: they do not test it"
            exit 1
        fi
        grep -q "alertname: $alert," <<<"$out" ||
            { log "rules: $alert ($kind) failed the tests, but not on $alert:"; echo "$out" >&2; exit 1; }
        n=$((n + 1))
    done
    log "rules: valid, tests pass, and all $n mutants (each alert never / always firing) fail them"
}

# project_checks FILE...: what the schemas cannot see (see the header). Exits non-zero on a finding.
project_checks() {
    python3 - config/default.toml Dockerfile "$@" <<'PY'
import re, sys, yaml
defaults, dockerfile, *files = sys.argv[1:]
docs = [d for f in files for d in yaml.safe_load_all(open(f, encoding="utf-8")) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
settings, section = {}, ""
for line in open(defaults, encoding="utf-8"):
    m = re.match(r"\s*\[([a-z0-9_.]+)\]", line)
    if m:
        section = m.group(1)
        continue
    m = re.match(r"\s*(#?)\s*([a-z0-9_]+)\s*=\s*(.*)", line)
    if m:
        settings[f"{section}.{m.group(2)}"] = m.group(3).strip().strip('"') if not m.group(1) else None
bad = []
secrets = {s["metadata"]["name"]: set(s.get("stringData", {})) | set(s.get("data", {}))
           for s in by_kind.get("Secret", [])}
user = re.findall(r"^USER\s+(\d+)", open(dockerfile, encoding="utf-8").read(), re.M)[-1]
workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
if not workloads:
    bad.append("no Deployment or StatefulSet")
for w in workloads:
    name = f'{w["kind"]}/{w["metadata"]["name"]}'
    findings = len(bad)
    pod = w["spec"]["template"]
    labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] == "leafid"]
    env, from_secret = {}, set()
    for e in c.get("env", []):
        key = ".".join(e["name"].lower().split("__")[1:]) if e["name"].startswith("LEAFID__") else None
        if key is not None and key not in settings:
            bad.append(f"{name}: {e['name']}: no setting {key} in {defaults}")
        if "value" in e:
            env[key] = e["value"]
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            from_secret.add(key)
            if ref["key"] not in secrets.get(ref["name"], set()):
                bad.append(f"{name}: {e['name']}: Secret {ref['name']} has no key {ref['key']}")
    def setting(key):  # None: from a Secret, unknown here
        return None if key in from_secret else env.get(key, settings.get(key))
    for key in ("admin.token", "database.url"):
        if key not in from_secret:
            bad.append(f"{name}: {key} must come from a Secret")
    if setting("server.host") != "0.0.0.0":
        bad.append(f"{name}: server.host is {setting('server.host')}, not 0.0.0.0: unreachable")
    ports = {p.get("name"): p["containerPort"] for p in c["ports"]}
    if int(setting("server.port")) not in ports.values():
        bad.append(f"{name}: server.port {setting('server.port')} is not a container port")
    for probe, path in (("livenessProbe", "/health/live"), ("readinessProbe", "/health/ready")):
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path:
            bad.append(f"{name}: {probe} must GET {path}")
        elif ports.get(get["port"], get["port"]) != int(setting("server.port")):
            bad.append(f"{name}: {probe} is not on server.port")
    drain, shutdown = int(setting("server.drain_secs")), int(setting("server.shutdown_timeout_secs"))
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if drain <= 0:
        bad.append(f"{name}: server.drain_secs must be above 0 behind a Service (it does not retry)")
    if grace <= drain + shutdown:
        bad.append(f"{name}: terminationGracePeriodSeconds {grace} <= drain_secs {drain} + shutdown_timeout_secs {shutdown}")
    uid = (c.get("securityContext", {}).get("runAsUser") or spec.get("securityContext", {}).get("runAsUser"))
    if str(uid) != user:
        bad.append(f"{name}: runAsUser {uid}, the image's USER is {user}")
    # Files the server writes (relative paths are under its working directory, the image's
    # WORKDIR) must be on a volume when the root filesystem is read-only.
    workdir = re.findall(r"^WORKDIR\s+(\S+)", open(dockerfile, encoding="utf-8").read(), re.M)[-1]
    mounts = [m["mountPath"].rstrip("/") for m in c.get("volumeMounts", [])]
    written = [setting("snowflake.worker.cache_file") or ""]
    url = setting("database.url") or ""
    if url.startswith("sqlite:"):
        written.append(url.split("://", 1)[-1].split("?")[0])
    volumes = re.findall(r'^VOLUME\s+\[?"?([^"\]\s]+)', open(dockerfile, encoding="utf-8").read(), re.M)
    if c.get("securityContext", {}).get("readOnlyRootFilesystem"):
        for v in volumes:
            if v.rstrip("/") not in mounts:
                bad.append(f"{name}: the image's VOLUME {v} is not mounted (read-only root filesystem)")
        for f in filter(None, written):
            path = f if f.startswith("/") else f"{workdir.rstrip('/')}/{f}"
            if not any(path.startswith(m + "/") for m in mounts):
                bad.append(f"{name}: the server writes {path}, on the read-only root filesystem")
    if setting("snowflake.worker.strategy") == "static" and w["spec"].get("replicas", 1) > 1:
        bad.append(f"{name}: a static worker id shared by {w['spec']['replicas']} replicas")
    sel = w["spec"]["selector"]["matchLabels"]
    if any(labels.get(k) != v for k, v in sel.items()):
        bad.append(f"{name}: its selector does not match its pod labels")
    for svc in by_kind.get("Service", []):
        if any(labels.get(k) != v for k, v in svc["spec"]["selector"].items()):
            bad.append(f"Service/{svc['metadata']['name']}: selects no pod of {name}")
        for p in svc["spec"]["ports"]:
            if p["targetPort"] not in ports and p["targetPort"] not in ports.values():
                bad.append(f"Service/{svc['metadata']['name']}: targetPort {p['targetPort']} is no container port")
    for pdb in by_kind.get("PodDisruptionBudget", []):
        if any(labels.get(k) != v for k, v in pdb["spec"]["selector"]["matchLabels"].items()):
            bad.append(f"PodDisruptionBudget/{pdb['metadata']['name']}: selects no pod of {name}")
        if pdb["spec"].get("minAvailable", 0) >= w["spec"].get("replicas", 1):
            bad.append(f"PodDisruptionBudget/{pdb['metadata']['name']}: minAvailable blocks every eviction")
    if len(bad) == findings:
        print(f"deploy-check: {name}: drain {drain} s + shutdown {shutdown} s < grace {grace} s; probes, port, secrets, user ok", file=sys.stderr)
if bad:
    sys.exit("deploy-check: " + "\ndeploy-check: ".join(bad))
PY
}

step_kubernetes() {
    log "kubernetes: ${manifests[*]} against the schemas kubernetes-validate $KUBERNETES_VALIDATE_VERSION ships (--strict)"
    kubernetes-validate --strict --quiet "${manifests[@]}" >&2
    local deployment=deploy/kubernetes/deployment.yaml
    sed 's/containerPort: 8080/containerPort: "8080"/' "$deployment" >"$tmp/port.yaml"
    sed 's/readinessProbe:/readinesProbe:/' "$deployment" >"$tmp/field.yaml"
    for broken in "$tmp/port.yaml" "$tmp/field.yaml"; do
        cmp -s "$broken" "$deployment" && { log "kubernetes: the mutation of $deployment changed nothing"; exit 1; }
        if kubernetes-validate --strict --quiet "$broken" >/dev/null 2>&1; then
            log "kubernetes: kubernetes-validate accepted a broken manifest ($broken)"
            exit 1
        fi
    done
    log "kubernetes: schema-valid; a string port and a misspelt field are rejected"
    project_checks "${manifests[@]}"
    sed 's/terminationGracePeriodSeconds: .*/terminationGracePeriodSeconds: 15/' "$deployment" >"$tmp/grace.yaml"
    sed '/^ *volumeMounts:/,/^ *mountPath:/d' "$deployment" >"$tmp/mount.yaml"
    local others=() broken
    for m in "${manifests[@]}"; do [ "$m" = "$deployment" ] || others+=("$m"); done
    for broken in "$tmp/grace.yaml" "$tmp/mount.yaml"; do
        cmp -s "$broken" "$deployment" && { log "kubernetes: the mutation of $deployment changed nothing"; exit 1; }
        if project_checks "$broken" "${others[@]}" 2>/dev/null; then
            log "kubernetes: leafid's checks accepted $(basename "$broken" .yaml): a broken manifest"
            exit 1
        fi
    done
    log "kubernetes: valid; a grace period below drain + shutdown and a read-only /app/data are rejected"
}

# dashboard_exprs JSON OUT: every panel query as a recording rule (Grafana's variables replaced),
# so that promtool parses it as PromQL. Also checks the JSON's structure.
dashboard_exprs() {
    python3 - "$1" "$2" <<'PY'
import json, sys, yaml
src, out = sys.argv[1:3]
d = json.load(open(src, encoding="utf-8"))
ids = [p["id"] for p in d["panels"]]
assert len(ids) == len(set(ids)), f"{src}: duplicate panel ids"
names = {v["name"] for v in d["templating"]["list"]}
rules = []
for p in d["panels"]:
    for k in ("title", "type", "gridPos"):
        assert k in p, f"{src}: panel {p['id']} has no {k}"
    for t in p.get("targets", []):
        e = t["expr"].replace("$__rate_interval", "5m")
        for n in sorted(names, key=len, reverse=True):
            e = e.replace(f"${n}", ".*")
        assert "$" not in e, f"{src}: panel {p['id']}: unknown variable in {t['expr']}"
        rules.append({"record": f"dashboard:panel{p['id']}:{t['refId'].lower()}", "expr": e})
assert rules, f"{src}: no queries"
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(out, "w"))
print(f"deploy-check: {len(d['panels'])} panels, {len(rules)} queries", file=sys.stderr)
PY
}

step_grafana() {
    log "grafana: $dashboard"
    dashboard_exprs "$dashboard" "$tmp/dashboard-rules.yml"
    promtool check rules "$tmp/dashboard-rules.yml" >&2
    sed 's/sum by (code) (rate(/sum by (code) (rate((/' "$dashboard" >"$tmp/broken.json"
    cmp -s "$tmp/broken.json" "$dashboard" && { log "grafana: the mutation changed nothing"; exit 1; }
    dashboard_exprs "$tmp/broken.json" "$tmp/broken-rules.yml" 2>/dev/null
    if promtool check rules "$tmp/broken-rules.yml" >/dev/null 2>&1; then
        log "grafana: promtool accepted a query with unbalanced parentheses"
        exit 1
    fi
    log "grafana: every query is valid PromQL; a broken one is rejected"
}

# live: a real leafid scraped by a real Prometheus (Debian's, on 127.0.0.1) that loads the rules:
# every rule evaluates without error on leafid's own series (label matching included), no alert
# is pending or firing on a healthy idle server, and a control alert (the bare
# `leafid_segment_next_ready == 0` that the rules avoid) is pending there, which shows the data
# reached the rules; every dashboard query runs without error, and all but the 5xx panel (no 5xx
# happened) return series.
step_live() {
    # Ports +25 and +26 of this checkout's block (scripts/lib/common.sh): two checkouts' checks
    # can run at once.
    local block; block="$(source scripts/lib/common.sh && leafid_port_block)"
    local bin="${LEAFID_BIN:-target/debug/leafid}" leafid_port=$((block + 25)) prom_port=$((block + 26)) dir="$tmp/live"
    # The binary as `cargo test` builds it: a no-op after the test run (a plain `cargo build`
    # unifies features differently and rebuilt about 40 crates, 7 minutes on a loaded machine).
    [ -n "${LEAFID_BIN:-}" ] || cargo test --no-run --test api >&2
    mkdir -p "$dir/prom"
    LEAFID__SERVER__PORT="$leafid_port" LEAFID__DATABASE__URL="sqlite://$dir/leafid.db" \
        LEAFID__SNOWFLAKE__WORKER__CACHE_FILE="$dir/worker.json" RUST_LOG=warn \
        "$bin" >"$dir/leafid.log" 2>&1 &
    local leafid_pid=$!
    cat >"$dir/control.yml" <<'YML'
groups:
  - name: control
    rules:
      - alert: ControlNextReadyBare
        expr: leafid_segment_next_ready == 0
        for: 10m
YML
    cat >"$dir/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$PWD/$rules", "$dir/control.yml"]
scrape_configs:
  - job_name: leafid
    static_configs: [{targets: ["127.0.0.1:$leafid_port"]}]
YML
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prom" \
        --web.listen-address="127.0.0.1:$prom_port" >"$dir/prometheus.log" 2>&1 &
    local prom_pid=$!
    # shellcheck disable=SC2064 # the pids are known now
    trap "kill $leafid_pid $prom_pid 2>/dev/null || true; wait $leafid_pid $prom_pid 2>/dev/null || true; rm -rf '$tmp'" EXIT

    for _ in $(seq 1 100); do curl -sf "127.0.0.1:$leafid_port/health/live" >/dev/null && break; sleep 0.2; done
    curl -sf "127.0.0.1:$leafid_port/api/segment/get/leaf-segment-test" >/dev/null ||
        { log "live: leafid did not start:"; cat "$dir/leafid.log" >&2; exit 1; }
    curl -sf "127.0.0.1:$leafid_port/api/snowflake/get/x" >/dev/null
    for _ in $(seq 1 100); do curl -sf "127.0.0.1:$prom_port/-/ready" >/dev/null && break; sleep 0.2; done
    curl -sf "127.0.0.1:$prom_port/-/ready" >/dev/null ||
        { log "live: prometheus did not start:"; tail -20 "$dir/prometheus.log" >&2; exit 1; }
    log "live: leafid ($bin) scraped by $(prometheus --version 2>&1 | head -1 | cut -d' ' -f1-3) every 1 s"
    sleep 8  # several scrapes and rule evaluations
    dashboard_exprs "$dashboard" "$dir/dashboard-rules.yml" 2>/dev/null
    python3 - "$prom_port" "$dir/dashboard-rules.yml" <<'PY'
import json, sys, time, urllib.parse, urllib.request, yaml
port, dash = sys.argv[1:3]
def api(path, **q):
    url = f"http://127.0.0.1:{port}/api/v1/{path}"
    if q:
        url += "?" + urllib.parse.urlencode(q)
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)["data"]
bad = []
targets = api("targets")["activeTargets"]
if not targets or any(t["health"] != "up" for t in targets):
    bad.append(f"the leafid target is not up: {[(t['health'], t.get('lastError')) for t in targets]}")
rules = [r for g in api("rules")["groups"] for r in g["rules"]]
for r in rules:
    if r["health"] != "ok":
        bad.append(f"rule {r['name']}: {r['health']} {r.get('lastError', '')}")
alerts = {a["labels"]["alertname"]: a["state"] for a in api("alerts")["alerts"]}
control = alerts.pop("ControlNextReadyBare", None)
if control != "pending":
    bad.append(f"the control alert is {control}, not pending: no data reached the rules")
for name, state in alerts.items():
    bad.append(f"{name} is {state} on a healthy idle server")
n = 0
for rule in yaml.safe_load(open(dash))["groups"][0]["rules"]:
    expr = rule["expr"].replace("[5m]", "[5s]").replace('job=~".*"', 'job="leafid"')
    try:
        result = api("query", query=expr)["result"]
    except Exception as e:  # a 400 from Prometheus: the query does not run
        bad.append(f"{rule['record']}: {e}: {expr}")
        continue
    n += 1
    if not result and "leafid_http_server_errors_total" not in expr:
        bad.append(f"{rule['record']}: no series: {expr}")
if bad:
    sys.exit("deploy-check: live: " + "\ndeploy-check: live: ".join(bad))
print(f"deploy-check: live: {len(rules)} rules evaluate ok, no alert on an idle server (the control alert is pending), {n} dashboard queries run", file=sys.stderr)
PY
    kill "$leafid_pid" "$prom_pid" 2>/dev/null; wait "$leafid_pid" "$prom_pid" 2>/dev/null || true
}

steps=("$@"); [ "${#steps[@]}" -gt 0 ] || steps=(metrics rules kubernetes grafana live)
install_tools
for s in "${steps[@]}"; do "step_$s"; done
log "all passed: ${steps[*]}"
