#!/usr/bin/env python3
# Start-up time and resident memory with 10,000 active tags, on the embedded default.
# Needs the release binary: cargo build --release --bin leafid; then scripts/bench-memory.py
import http.client, subprocess, time, os, sqlite3, tempfile
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binp = os.path.join(root, "target/release/leafid")
tmp = tempfile.mkdtemp()
env = dict(os.environ, LEAFID__SERVER__PORT="18090", LEAFID__DATABASE__URL="sqlite://" + tmp + "/leafid.db", RUST_LOG="warn", LEAFID__SERVER__WORKERS="1")
def start():
    t0 = time.perf_counter()
    p = subprocess.Popen([binp], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", 18090, timeout=1); c.request("GET", "/health/live"); c.getresponse().read(); break
        except Exception:
            time.sleep(0.005)
    return p, time.perf_counter() - t0
p, t = start()
print(f"start-up on a fresh embedded default (create file, migrate, seed, bind): {t*1000:.0f} ms")
p.terminate(); p.wait()
p, t = start()
print(f"start-up on an existing file: {t*1000:.0f} ms")
p.terminate(); p.wait()
db = sqlite3.connect(tmp + "/leafid.db")
db.executemany("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 10)", [(f"tag-{i:05}",) for i in range(10000)])
db.commit(); db.close()
p, t = start()
print(f"start-up with 10,000 tags: {t*1000:.0f} ms")
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1]) / 1024
base = rss()
c = http.client.HTTPConnection("127.0.0.1", 18090)
for rnd in range(2):
    for i in range(10000):
        c.request("GET", f"/api/segment/get/tag-{i:05}"); r = c.getresponse(); r.read(); assert r.status == 200
print(f"RSS: {base:.1f} MiB idle with 10,000 tags cached; {rss():.1f} MiB after every tag served ids (step 10: both segments of every tag loaded)")
p.terminate(); p.wait()
