#!/usr/bin/env python3
"""A plain id's latency while two callers ask for the largest permuted batches (issue 42).

Needs the release binary (cargo build --release --bin leafid; LEAFID_BIN=path measures another
build, e.g. one from before FF1 moved off the request threads). Standard library only. Traffic
goes to 127.0.0.1 only.

  scripts/bench-permuted.py [REQUESTS=2000] [ROUNDS=3]

The server runs with 2 HTTP workers on the embedded default, a plain tag and a permuted tag
(key file made here). Each round measures, one request at a time over one keep-alive
connection, REQUESTS plain single ids (Leaf's route) twice: idle, then while two threads ask
for `count=100000` of the permuted tag in a loop. It prints p50/p99/p99.9 of each and the
loaded/idle ratio of p99 per round (the goal: within 2x), with the median and range over the
rounds, and how many permuted codes the two threads got. The measuring client runs on the
same 2 cores as the server and the load: the ratio, not the absolute figure, is the result.
"""
import http.client, json, os, secrets, statistics, subprocess, sys, tempfile, threading, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binp = os.environ.get("LEAFID_BIN", os.path.join(root, "target/release/leafid"))
requests = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
port = 18094
tmp = tempfile.mkdtemp()
key = os.path.join(tmp, "codes.key")
with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
    f.write(secrets.token_hex(32))

env = dict(os.environ, LEAFID__SERVER__PORT=str(port), LEAFID__SERVER__WORKERS="2",
           LEAFID__DATABASE__URL=f"sqlite://{tmp}/leafid.db", RUST_LOG="warn",
           LEAFID__SHAPES__KEYS__CODES=key, LEAFID__ADMIN__TRUST_LOOPBACK="true")
server = subprocess.Popen([binp], env=env, stdout=subprocess.DEVNULL,
                          stderr=open(f"{tmp}/server.log", "w"))


def conn():
    return http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def call(c, method, path, body=None):
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()


try:
    for _ in range(300):
        try:
            if call(conn(), "GET", "/health/ready")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    c = conn()
    fmt = '{"prefix":"C-","width":10,"permute":{"key_id":"codes"}}'
    for body in ('{"biz_tag":"plain","step":1000}',
                 '{"biz_tag":"codes","step":100000,"format":%s}' % fmt):
        status, text = call(c, "POST", "/api/v1/tags", body)
        assert status == 201, (status, text)

    def plain_latencies():
        c = conn()
        out = []
        for _ in range(requests):
            t = time.perf_counter()
            status, _ = call(c, "GET", "/api/segment/get/plain")
            out.append(time.perf_counter() - t)
            assert status == 200, status
        return out

    def pct(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3

    ratios, codes = [], [0]
    plain_latencies()  # warm-up
    for r in range(1, rounds + 1):
        idle = plain_latencies()
        stop = threading.Event()

        def load():
            c = conn()
            while not stop.is_set():
                status, text = call(c, "GET", "/api/v1/segment/codes/ids?count=100000")
                assert status == 200, (status, text[:200])
                codes[0] += len(json.loads(text)["ids"])

        threads = [threading.Thread(target=load) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        loaded = plain_latencies()
        stop.set()
        for t in threads:
            t.join()
        ratio = pct(loaded, 0.99) / pct(idle, 0.99)
        ratios.append(ratio)
        for name, xs in (("idle", idle), ("loaded", loaded)):
            print(f"round {r} {name}: p50 {pct(xs, .5):.3f} ms, p99 {pct(xs, .99):.3f} ms, "
                  f"p99.9 {pct(xs, .999):.3f} ms", file=sys.stderr)
        print(f"round {r}: p99 loaded/idle {ratio:.2f}x", file=sys.stderr)
    print(f"plain single id p99 under two callers of the largest permuted batches: "
          f"{statistics.median(ratios):.2f}x idle (median of {rounds} rounds, "
          f"{min(ratios):.2f}..{max(ratios):.2f}); {codes[0]} permuted codes served meanwhile; "
          f"{requests} plain ids per phase, 2 workers, {os.cpu_count()} cores, binary {binp}")
finally:
    server.terminate()
    server.wait()
