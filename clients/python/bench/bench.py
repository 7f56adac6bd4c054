"""The Python client's benchmark cases (run by ``bench.sh``), against a running leafid server.

Environment: ``LEAFID_BENCH_URL`` (a running release server), ``LEAFID_BENCH_TAG`` (an existing
segment tag), ``LEAFID_BENCH_SECS`` (seconds per sustained case, default 10), ``LEAFID_BENCH_CASES``
(comma-separated cases to run, default all; the two local cases need no server). Prints one
``BENCH {json}`` line per case on stdout, everything else on stderr:

- ``local``: ``next_id`` of a supply holding one huge range (never fetching) against
  ``next(itertools.count())`` (its bound ``__next__``), both through ``timeit`` with the same
  statement ``f()`` and number of ids; rounds alternate baseline and subject; medians.
- ``formatted_local``: ``next_id`` of a formatted supply (texts of a daily order number,
  ``ORD-`` + 16 digits) holding one batch of as many texts as a round takes (a fresh batch per
  round, made before it is timed; the period far ahead, so the clock is read and compared on
  every call) against the numeric ``next_id`` of ``local`` (baseline), in the same ``timeit``
  rounds, alternating; medians.
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
from leafid_client._wire import FormattedBatch  # noqa: E402

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


def formatted_local() -> None:
    offline = Client(["http://127.0.0.1:9"])
    try:
        numeric = offline.segment("bench")
        with numeric._lock:
            numeric.accept([(1, 1 << 62)])
        numeric.next_id()
        texts = offline.formatted("bench")
        base: List[float] = []
        subject: List[float] = []
        for r in range(LOCAL_ROUNDS):
            batch = [f"ORD-2026{r:04d}{i:08d}" for i in range(LOCAL_IDS)]
            with texts._lock:
                # The round's batch, next in line; marked as refilling so that its preload
                # mark starts no fetch from the offline server (the switch still happens).
                texts.ahead = None
                texts.accept(FormattedBatch(batch, "", float("inf")))
                texts.refilling = True
            del batch
            base.append(timeit.timeit("f()", globals={"f": numeric.next_id}, number=LOCAL_IDS))
            subject.append(timeit.timeit("f()", globals={"f": texts.next_id}, number=LOCAL_IDS))
        assert texts.stats().ids_served == LOCAL_ROUNDS * LOCAL_IDS
        assert texts.stats().discarded_ids == 0
    finally:
        offline.close()
    b, s = statistics.median(base), statistics.median(subject)
    log(f"formatted_local: numeric next_id {b / LOCAL_IDS * 1e9:.1f} ns/id, formatted next_id "
        f"{s / LOCAL_IDS * 1e9:.1f} ns/id")
    emit(
        "formatted_local",
        LOCAL_IDS / s,
        LOCAL_IDS / b,
        "formatted next_id vs numeric next_id",
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


CASES = ("local", "formatted_local", "sustained_1", "sustained_4")


def main() -> None:
    cases = os.environ.get("LEAFID_BENCH_CASES", ",".join(CASES)).split(",")
    unknown = set(cases) - set(CASES)
    if unknown:
        sys.exit(f"bench: unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    url = os.environ.get("LEAFID_BENCH_URL", "")
    tag = os.environ.get("LEAFID_BENCH_TAG", "")
    if (not url or not tag) and any(c.startswith("sustained") for c in cases):
        sys.exit("bench: set LEAFID_BENCH_URL (a running server) and LEAFID_BENCH_TAG (a tag)")
    seconds = float(os.environ.get("LEAFID_BENCH_SECS", "10"))
    log(f"bench: {platform.python_implementation()} {platform.python_version()}, {url} {tag}")
    if "local" in cases:
        local()
    if "formatted_local" in cases:
        formatted_local()
    for threads in (1, 4):
        if f"sustained_{threads}" in cases:
            sustained(threads, url, tag, seconds)


if __name__ == "__main__":
    main()
