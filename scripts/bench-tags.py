#!/usr/bin/env python3
"""Cost as tags grow: resident memory and the tag-list refresh with N tags (default 100,000).

Needs the release binary (cargo build --release --bin leafid) and oha (cargo install oha
--locked). Traffic goes to 127.0.0.1 only.

  scripts/bench-tags.py [TAGS=100000]

1. N tags in a fresh embedded-default file; the server starts, every tag serves one id (so
   every tag has its first segment in memory), RSS is read from /proc.
2. The hot-tag latency while the tag list refreshes every second (each refresh reads all N
   rows and swaps the map), against the same server with refreshes every hour, alternating:
   oha at a fixed 5,000 req/s on one tag with latency correction, p50/p99 of each, and the
   refresh time the server logs.
"""
import json, os, re, sqlite3, subprocess, sys, tempfile, time, http.client

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binp = os.path.join(root, "target/release/leafid")
tags = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
tmp = tempfile.mkdtemp()
port = 18092


def env(refresh_secs):
    return dict(os.environ, LEAFID__SERVER__PORT=str(port), LEAFID__SERVER__WORKERS="1",
                LEAFID__DATABASE__URL=f"sqlite://{tmp}/leafid.db", LEAFID__LOG__FORMAT="json",
                RUST_LOG="warn,leafid::segment=debug",
                LEAFID__SEGMENT__REFRESH_INTERVAL_SECS=str(refresh_secs))


def start(refresh_secs):
    log = open(f"{tmp}/server-{refresh_secs}.log", "w")
    p = subprocess.Popen([binp], env=env(refresh_secs), stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(3000):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/health/ready")
            if c.getresponse().status == 200:
                return p
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit("server did not become ready")


def rss_mib(p):
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024


def hot_latency():
    out = subprocess.run(["oha", "--no-tui", "--output-format", "json", "-z", "6s", "-q", "5000",
                          "-c", "16", "--latency-correction",
                          f"http://127.0.0.1:{port}/api/segment/get/tag-000000"],
                         capture_output=True, check=True, text=True).stdout
    d = json.loads(out)
    p = d["latencyPercentiles"]
    return p["p50"] * 1e3, p["p99"] * 1e3, d["summary"]["successRate"]


# A fresh file with the schema, then N rows.
p = start(3600)
p.terminate(); p.wait()
db = sqlite3.connect(f"{tmp}/leafid.db")
db.executemany("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 1000)",
               [(f"tag-{i:06}",) for i in range(tags)])
db.commit(); db.close()

t0 = time.perf_counter()
p = start(3600)
print(f"start-up with {tags:,} tags: {(time.perf_counter() - t0) * 1e3:.0f} ms; "
      f"RSS {rss_mib(p):.1f} MiB idle")
c = http.client.HTTPConnection("127.0.0.1", port)
t0 = time.perf_counter()
for i in range(tags):
    c.request("GET", f"/api/segment/get/tag-{i:06}")
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
print(f"every tag served once ({tags / (time.perf_counter() - t0):,.0f} req/s, one connection): "
      f"RSS {rss_mib(p):.1f} MiB (goal <= 256 MiB)")
p.terminate(); p.wait()

rows = []
for rnd in range(3):
    for refresh in (3600, 1):
        p = start(refresh)
        time.sleep(1.5)
        p50, p99, ok = hot_latency()
        p.terminate(); p.wait()
        took = [json.loads(l).get("took_ms") for l in open(f"{tmp}/server-{refresh}.log")
                if "tag list refreshed" in l]
        took = [t for t in took if t is not None]
        rows.append((refresh, p50, p99, ok, took))
        print(f"round {rnd + 1}, refresh every {refresh} s: hot tag p50 {p50:.2f} ms, "
              f"p99 {p99:.2f} ms, success {ok:.4f}, refreshes {len(took)} "
              f"(median {sorted(took)[len(took) // 2] if took else float('nan')} ms)",
              file=sys.stderr)


def med(v):
    v = sorted(v)
    return v[len(v) // 2]


idle = med([r[2] for r in rows if r[0] == 3600])
busy = med([r[2] for r in rows if r[0] == 1])
took = [t for r in rows if r[0] == 1 for t in r[4]]
print(f"hot-tag p99 at 5,000 req/s: {idle:.2f} ms idle, {busy:.2f} ms with a {tags:,}-row refresh "
      f"every second ({busy / idle:.2f}x; goal <= 2x); refresh time median "
      f"{med(took) if took else 'n/a'} ms over {len(took)} refreshes")
