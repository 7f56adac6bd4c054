"""Benchmarks of the Python client, against a real leafid server it starts itself.

    python3 bench/bench.py [--seconds 3] [--rounds 5]

1. Local ``next_id`` (ids already in the local batches, the refill of 100,000-id batches running
   in the background) against the language's own counter, ``next(itertools.count())`` under a
   ``threading.Lock``: interleaved rounds in one process, median ns per id.
2. Sustained ids/s from one caller: ``next_id`` in a loop for ``--seconds``, batches of 1,000
   (the default), adaptive from 1,000 to 100,000, and 100,000; blocking and asyncio.

The server is ``LEAFID_BIN`` if set, else ``target/release/leafid`` if it exists, else
``target/debug/leafid`` (printed).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

from leafid_client import AsyncClient, Client  # noqa: E402
from leafid_server import REPO, LeafidServer  # type: ignore[import-not-found]  # noqa: E402

TAG = "leaf-segment-test"


def server_bin() -> str:
    if "LEAFID_BIN" in os.environ:
        return os.environ["LEAFID_BIN"]
    release = REPO / "target" / "release" / "leafid"
    return str(release if release.exists() else REPO / "target" / "debug" / "leafid")


def per_id_ns(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def local(url: str, rounds: int, n: int) -> None:
    """Interleaved rounds of n ids each: the counter, next_id on ids already local (no refill
    running: the fast path alone), next_id through the server (batch 100000, refills included).
    """
    lock = threading.Lock()
    counter = itertools.count(1)

    def counter_next() -> int:
        with lock:
            return next(counter)

    with Client([url], batch=100_000) as c, Client(["http://127.0.0.1:9"]) as offline:
        supply = c.segment(TAG)
        for _ in range(200_000):  # warm up: two batches fetched
            supply.next_id()
        # The fast path alone: a supply holding rounds * n ids that never refills (internal
        # API, benchmark only).
        local_only = offline.segment("bench")
        local_only._core.ids = list(range(1, rounds * n + 1))
        local_only._core.preload_at = -1
        base, fast, e2e = [], [], []
        for _ in range(rounds):
            base.append(per_id_ns(counter_next, n))
            fast.append(per_id_ns(local_only.next_id, n))
            e2e.append(per_id_ns(supply.next_id, n))
        stats = c.stats()

    def row(name: str, runs: "list[float]") -> float:
        m = statistics.median(runs)
        print(f"{name:<44} median {m:5.0f} ns/id ({1e3 / m:5.2f} M ids/s), runs "
              + ", ".join(f"{x:.0f}" for x in runs))
        return m

    b = row("itertools.count() under threading.Lock", base)
    f = row("next_id, ids already local (fast path)", fast)
    e = row("next_id via the server, batch 100000", e2e)
    print(f"ratio to the counter (its ns / ours): fast path {b / f:.2f}x, via the server "
          f"{b / e:.2f}x  [{stats}]")


def label(batch: int, max_batch: "int | None") -> str:
    return f"batch {batch}" + (f" adaptive to {max_batch}" if max_batch else "")


def sustained(url: str, batch: int, max_batch: "int | None", seconds: float) -> None:
    with Client([url], batch=batch, max_batch=max_batch) as c:
        supply = c.segment(TAG)
        supply.next_id()
        n = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            for _ in range(1000):
                supply.next_id()
            n += 1000
            if time.perf_counter() >= end:
                break
        elapsed = time.perf_counter() - t0
        s = c.stats()
    print(f"sustained, blocking, {label(batch, max_batch)}: {n / elapsed / 1e6:.2f} M ids/s "
          f"({n} ids in {elapsed:.2f} s, {s.batches} batches, last size {s.batch_size})")


def sustained_async(url: str, batch: int, max_batch: "int | None", seconds: float) -> None:
    async def main() -> None:
        async with AsyncClient([url], batch=batch, max_batch=max_batch) as c:
            supply = c.segment(TAG)
            await supply.next_id()
            n = 0
            t0 = time.perf_counter()
            end = t0 + seconds
            while True:
                for _ in range(1000):
                    await supply.next_id()
                n += 1000
                if time.perf_counter() >= end:
                    break
            elapsed = time.perf_counter() - t0
            s = c.stats()
        print(f"sustained, asyncio,  {label(batch, max_batch)}: {n / elapsed / 1e6:.2f} M ids/s "
              f"({n} ids in {elapsed:.2f} s, {s.batches} batches, last size {s.batch_size})")

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=1_000_000, help="ids per local round")
    args = ap.parse_args()
    os.environ["LEAFID_BIN"] = server_bin()
    print(f"server: {os.environ['LEAFID_BIN']}")
    print(f"python: {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as d:
        srv = LeafidServer(Path(d) / "leafid.db", env={"LEAFID__SERVER__WORKERS": "0"})
        with srv:
            local(srv.url, args.rounds, args.n)
            for batch, max_batch in ((1000, None), (1000, 100_000), (100_000, None)):
                sustained(srv.url, batch, max_batch, args.seconds)
                sustained_async(srv.url, batch, max_batch, args.seconds)


if __name__ == "__main__":
    main()
