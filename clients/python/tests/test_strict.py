"""Strict tags (issue 45): an answer with ``"strict": true`` turns a supply into pass-through
for good: the ids it holds and those of that answer are discarded, no prefetch starts again, and
every later call is one request for one id. Against a small local server that records the count
of every request and answers scripted ranges."""

from __future__ import annotations

import asyncio
import json
import socketserver
import threading
import time
from typing import Callable, Iterator, List, Optional, Tuple

import pytest

from leafid_client import AsyncClient, Client

TAG = "msgs"

# (count asked, number of the request from 0) -> (first id, strict) of the answer's one run.
Script = Callable[[int, int], Tuple[int, bool]]


class Recorder:
    """The counts the server was asked for, in order; the answers follow ``script``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.counts: List[int] = []
        self.lock = threading.Lock()

    def answer(self, count: int) -> bytes:
        with self.lock:
            n = len(self.counts)
            self.counts.append(count)
            first, strict = self.script(count, n)
        doc = {
            "biz_tag": TAG,
            "count": count,
            "ranges": [{"first": str(first), "last": str(first + count - 1)}],
        }
        if strict:
            doc["strict"] = True
        return json.dumps(doc).encode()

    def seen(self) -> List[int]:
        with self.lock:
            return list(self.counts)


def serve(rec: Recorder) -> Iterator[str]:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = self.rfile.readline()
                    if not line:
                        return
                    head += line
                count = int(head.split(b"count=")[1].split(b"&")[0])
                body = rec.answer(count)
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def consecutive(strict_from: int) -> Script:
    """Consecutive ids from 1; answers from request ``strict_from`` on are marked strict."""
    state = {"next": 1}

    def script(count: int, n: int) -> Tuple[int, bool]:
        first = state["next"]
        state["next"] += count
        return first, n >= strict_from

    return script


@pytest.fixture
def strict_server() -> Iterator[Tuple[str, Recorder]]:
    rec = Recorder(consecutive(0))
    for url in serve(rec):
        yield url, rec


def test_a_strict_answer_turns_the_supply_into_pass_through(
    strict_server: Tuple[str, Recorder]
) -> None:
    url, rec = strict_server
    with Client([url], batch=50) as c:
        ids = [c.next_id(TAG) for _ in range(21)]
        # The first answer (1..50) revealed the tag strict: dropped whole, never handed out.
        assert ids == list(range(51, 72))
        time.sleep(0.05)  # a prefetch, if one were started, would show now
        # One request per call, each for one id; nothing fetched between calls.
        assert rec.seen() == [50] + [1] * 21
        assert c.segment(TAG).try_next_id() is None
        assert rec.seen() == [50] + [1] * 21
        s = c.stats()
        assert (s.ids_served, s.batches, s.discarded_ids, s.batch_size) == (21, 21, 50, 50)


def test_a_supply_turning_strict_drops_what_it_holds() -> None:
    # The first answer is plain (buffered); its preload's answer is strict.
    rec = Recorder(consecutive(1))
    for url in serve(rec):
        with Client([url], batch=10) as c:
            # The preload starts when the second id is taken (the piece is cut at 10%).
            first = [c.next_id(TAG), c.next_id(TAG)]
            deadline = time.monotonic() + 5
            while len(rec.seen()) < 2 and time.monotonic() < deadline:
                time.sleep(0.005)
            assert len(rec.seen()) == 2, "the preload request"
            # Until the strict answer is taken (its ids discarded): polled, for a slow machine.
            while c.stats().discarded_ids == 0 and time.monotonic() < deadline + 5:
                time.sleep(0.005)
            later = []
            for _ in range(5):
                later.append(c.next_id(TAG))
            ids = first + later
            assert all(a < b for a, b in zip(ids, ids[1:])), ids
            seen = rec.seen()
            # Once strict (the second answer), every call is one request for one id, and each
            # id lies above the strict answer (11..) and everything buffered before.
            strict_last = 10 + seen[1]
            passed = [x for x in later if x > strict_last]
            assert seen[2:] == [1] * len(passed)
            assert len(seen) == 2 + len(passed)
            s = c.stats()
            assert s.ids_served == 7
            assert s.discarded_ids == 10 + seen[1] - (len(later) - len(passed)) - 2


def test_a_pass_through_id_below_the_floor_is_never_handed_out() -> None:
    # Strict 1..20 first (discarded, floor 20); then one answer at 7 (behind: an id whose answer
    # was complete before the request, which a strict server never gives); then 30, 31...
    def script(count: int, n: int) -> Tuple[int, bool]:
        if n == 0:
            return 1, True
        if n == 1:
            return 7, True
        return 28 + n, True

    rec = Recorder(script)
    for url in serve(rec):
        with Client([url], batch=20) as c:
            assert c.next_id(TAG) == 30
            assert c.next_id(TAG) == 31
            assert rec.seen() == [20, 1, 1, 1]
            s = c.stats()
            assert (s.ids_served, s.discarded_ids) == (2, 21)


def test_pass_through_from_many_threads(strict_server: Tuple[str, Recorder]) -> None:
    url, rec = strict_server
    got: List[List[int]] = [[] for _ in range(4)]
    with Client([url], batch=100) as c:

        def caller(i: int) -> None:
            for _ in range(50):
                got[i].append(c.next_id(TAG))

        threads = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        flat = [x for ids in got for x in ids]
        assert len(set(flat)) == 200 and min(flat) > 100
        for ids in got:
            assert all(a < b for a, b in zip(ids, ids[1:]))
        assert sorted(rec.seen()) == [1] * 200 + [100]
        assert c.stats().ids_served == 200


def test_the_asyncio_client_passes_through(strict_server: Tuple[str, Recorder]) -> None:
    url, rec = strict_server

    async def main() -> Tuple[List[int], Optional[int]]:
        async with AsyncClient([url], batch=50) as c:
            ids = [await c.next_id(TAG) for _ in range(10)]
            both = await asyncio.gather(c.next_id(TAG), c.next_id(TAG))
            ids += sorted(both)
            none = c.segment(TAG).try_next_id()
            s = c.stats()
            assert (s.ids_served, s.batches, s.discarded_ids) == (12, 12, 50)
            return ids, none

    ids, none = asyncio.run(main())
    assert ids == list(range(51, 63))
    assert none is None
    assert rec.seen() == [50] + [1] * 12
