"""The Python client's benchmark cases (run by ``bench.sh``), against a running leafid server.

Environment: ``LEAFID_BENCH_URL`` (a running release server), ``LEAFID_BENCH_TAG`` (an existing
segment tag), ``LEAFID_BENCH_SECS`` (seconds per sustained case, default 10). Prints one
``BENCH {json}`` line per case on stdout, everything else on stderr:

- ``local``: ``next_id`` of a supply holding one huge range (never fetching) against
  ``next(itertools.count())`` (its bound ``__next__``), both through ``timeit`` with the same
  statement ``f()`` and number of ids; rounds alternate baseline and subject; medians.
- ``sustained_1``: one thread calling ``next_id`` on a fresh client (defaults: batch 1000, the
  demand rule on) for the given seconds, every fetch included; baseline: one thread calling the
  counter in the same loop for 1 s.
- ``sustained_4``: four threads on one client; baseline: four threads on one shared counter.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import statistics
import sys
import threading
import time
import timeit
from pathlib import Path
from typing import Callable, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from leafid_client import Client  # noqa: E402

LOCAL_IDS = 1_000_000
LOCAL_ROUNDS = 7


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def emit(case: str, ids_per_s: float, baseline_per_s: float, method: str) -> None:
    row = {
        "client": "python",
        "case": case,
        "ids_per_s": round(ids_per_s),
        "baseline_per_s": round(baseline_per_s),
        "ratio": round(ids_per_s / baseline_per_s, 3),
        "method": method,
    }
    print("BENCH " + json.dumps(row, separators=(",", ":")), flush=True)


def local() -> None:
    # A supply of one range of 2^62 ids: its preload mark is never reached, nothing is fetched.
    offline = Client(["http://127.0.0.1:9"])
    try:
        supply = offline.segment("bench")
        with supply._lock:
            supply.accept([(1, 1 << 62)])
        supply.next_id()  # makes the range current
        base: List[float] = []
        subject: List[float] = []
        for _ in range(LOCAL_ROUNDS):
            counter = itertools.count(1).__next__
            base.append(timeit.timeit("f()", globals={"f": counter}, number=LOCAL_IDS))
            subject.append(timeit.timeit("f()", globals={"f": supply.next_id}, number=LOCAL_IDS))
        assert supply.stats().ids_served == 1 + LOCAL_ROUNDS * LOCAL_IDS
    finally:
        offline.close()
    b, s = statistics.median(base), statistics.median(subject)
    log(f"local: counter {b / LOCAL_IDS * 1e9:.1f} ns/id, next_id {s / LOCAL_IDS * 1e9:.1f} ns/id")
    emit(
        "local",
        LOCAL_IDS / s,
        LOCAL_IDS / b,
        f"timeit, {LOCAL_ROUNDS} alternating rounds of {LOCAL_IDS} ids, medians; baseline "
        "next(itertools.count()) bound method",
    )


def run_for(threads: int, seconds: float, take: Callable[[], object]) -> float:
    """Ids per second of ``threads`` threads calling ``take`` for ``seconds``."""
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop = [False]

    def work(k: int) -> None:
        start.wait()
        n = 0
        while not stop[0]:
            for _ in range(1000):
                take()
            n += 1000
        counts[k] = n

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop[0] = True
    for t in ts:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def sustained(threads: int, url: str, tag: str, seconds: float) -> None:
    baseline = run_for(threads, 1.0, itertools.count(1).__next__)
    with Client([url]) as c:
        supply = c.segment(tag)
        supply.next_id()  # the first fetch: connects
        rate = run_for(threads, seconds, supply.next_id)
        stats = c.stats()
    log(f"sustained_{threads}: {rate:,.0f} ids/s over {seconds} s, counter {baseline:,.0f}/s; "
        f"{stats.batches} batches, next size {stats.batch_size}")
    who = "one thread" if threads == 1 else f"{threads} threads"
    emit(
        f"sustained_{threads}",
        rate,
        baseline,
        f"{who} on a fresh Client (batch 1000, demand rule) for {seconds:g} s, fetches "
        f"included; baseline {who} on one itertools.count() for 1 s, same loop",
    )


def main() -> None:
    url = os.environ.get("LEAFID_BENCH_URL")
    tag = os.environ.get("LEAFID_BENCH_TAG")
    if not url or not tag:
        sys.exit("bench: set LEAFID_BENCH_URL (a running server) and LEAFID_BENCH_TAG (a tag)")
    seconds = float(os.environ.get("LEAFID_BENCH_SECS", "10"))
    log(f"bench: {platform.python_implementation()} {platform.python_version()}, {url} {tag}")
    local()
    sustained(1, url, tag, seconds)
    sustained(4, url, tag, seconds)


if __name__ == "__main__":
    main()
