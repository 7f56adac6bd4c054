"""The formatted supply (issue 34): texts of a formatted tag from real servers, the period rule
with an injected wall clock against a real server's period_end, the string floor, refusals."""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import re
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

from leafid_client import AsyncClient, Client, ConfigError, RejectedError, UnavailableError
from leafid_client._formatted import FormattedCore
from leafid_client._wire import BatchRequest, FormattedBatch, parse_formatted, parse_rfc3339
from leafid_server import LeafidServer

from conftest import BadServer

DAILY = {"prefix": "ORD-", "date": "yyyyMMdd", "width": 8, "reset": "daily", "time_zone": "UTC"}
ORDER = re.compile(r"ORD-[0-9]{8}[0-9]{8}")
PERMUTED = {"prefix": "T-", "radix": "crockford32", "width": 6, "permute": {"key_id": "conformance"}}
CODE = re.compile(r"T-[0-9A-HJKMNP-TV-Z]{6}")


def fast(servers: List[str], **kw: object) -> dict:
    opts = dict(batch=10, request_timeout=1.0, wait_timeout=2.0, backoff_min=0.02, backoff_max=0.2)
    opts.update(kw)
    return opts


async def settle(done: Callable[[], bool], within: float = 10.0) -> None:
    """Waits (on the loop, so an AsyncClient's refill runs) until ``done()``."""
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


# -- the wire -------------------------------------------------------------------------------


def test_rfc3339_instants() -> None:
    assert parse_rfc3339("2026-11-28T00:00:00Z") == 1795824000.0
    assert parse_rfc3339("2026-11-28T01:00:00+01:00") == 1795824000.0
    assert parse_rfc3339("2026-11-27T16:00:00.5Z") == 1795824000.0 - 8 * 3600 + 0.5
    assert parse_rfc3339("9999-12-31T23:59:59.999999999Z") > 2.5e11
    for bad in ["2026-11-28", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "x", 5, None,
                "2026-11-28T00:00:00", "2026-11-28T24:00:00Z", "2026-11-28T00:00:00z"]:
        with pytest.raises(ValueError):
            parse_rfc3339(bad)


def body(**doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_a_list_body_is_taken_only_when_valid() -> None:
    req = BatchRequest.formatted_list("orders", 3)
    assert req.path == "/api/v1/segment/orders/ids?count=3"
    end = "2026-11-28T00:00:00Z"
    ok = parse_formatted("s", body(biz_tag="orders", ids=["A1", "A2"], period="p", period_end=end), req)
    assert ok == FormattedBatch(["A1", "A2"], "p", 1795824000.0)
    bad = [
        dict(biz_tag="orders", ids=[], period_end=end),  # empty
        dict(biz_tag="orders", ids=["A1", ""], period_end=end),  # an empty text
        dict(biz_tag="orders", ids=["A2", "A1"], period_end=end),  # not increasing
        dict(biz_tag="orders", ids=["A1", "A1"], period_end=end),  # twice
        dict(biz_tag="orders", ids=["A1", "A2", "A3", "A4"], period_end=end),  # more than asked
        dict(biz_tag="other", ids=["A1"], period_end=end),  # another tag
        dict(biz_tag="orders", ids=["A1"]),  # no period_end
        dict(biz_tag="orders", ids=["A1"], period_end="tomorrow"),
        dict(biz_tag="orders", ids=[1, "A2"], period_end=end),
        dict(biz_tag="orders", ids=["1", "2"]),  # strings without period_end: not a plain body
    ]
    for doc in bad:
        with pytest.raises(ValueError):
            parse_formatted("s", body(**doc), req)
    with pytest.raises(ValueError):
        parse_formatted("s", b"[1,2]", req)
    # "ordered": true, or absent, is the same: the byte order is checked.
    for ordered in [True, None]:
        doc = dict(biz_tag="orders", ids=["A2", "A1"], period_end=end)
        if ordered is not None:
            doc["ordered"] = ordered
        with pytest.raises(ValueError):
            parse_formatted("s", body(**doc), req)
    # A plain tag's body: numbers, no period_end.
    with pytest.raises(RejectedError) as e:
        parse_formatted("s", body(biz_tag="orders", ids=[1, 2]), req)
    assert e.value.code == "not_formatted"


def test_an_unordered_list_body_is_taken_in_any_order() -> None:
    """A permuted tag's answer says ``"ordered": false``: no byte-order check; the rest of the
    validation holds, and a text twice in one answer is still refused."""
    req = BatchRequest.formatted_list("codes", 4)
    end = "2026-11-28T00:00:00Z"
    ok = parse_formatted(
        "s", body(biz_tag="codes", ids=["T-9F", "T-0A", "T-ZZ"], period_end=end, ordered=False),
        req,
    )
    assert ok.ids == ["T-9F", "T-0A", "T-ZZ"] and ok.ordered is False
    assert parse_formatted("s", body(biz_tag="codes", ids=["a", "b"], period_end=end), req).ordered
    bad = [
        dict(ids=["T-9F", "T-0A", "T-9F"]),  # twice
        dict(ids=["T-9F", ""]),
        dict(ids=["T-9F", 7]),
        dict(ids=[]),
        dict(ids=["a", "b", "c", "d", "e"]),  # more than asked
        dict(ids=["b", "a"], ordered="false"),  # not a boolean
        dict(ids=["b", "a"], ordered=0),
        dict(ids=["b", "a"], biz_tag="other"),
        dict(ids=["b", "a"], period_end="soon"),
    ]
    for doc in bad:
        full = dict(biz_tag="codes", period_end=end, ordered=False)
        full.update(doc)
        with pytest.raises(ValueError):
            parse_formatted("s", body(**full), req)


def test_the_core_hands_unordered_texts_out_as_received() -> None:
    """No floor for an unordered batch: texts at or below the last one are handed out, in the
    order received, none discarded; only the period rule drops them."""
    now = [1000.0]
    core = FormattedCore(2, 100, limit=100_000, wall=lambda: now[0])
    assert core.begin_refill()
    assert core.accept(FormattedBatch(["m", "c", "x", "a"], "", 2000.0, ordered=False)) is None
    core.refilling = False
    assert [core.take()[0] for _ in range(2)] == ["m", "c"]
    assert core.begin_refill()
    # Wholly "below" everything seen: for an ordered batch, a lagging server's; here, taken.
    assert core.accept(FormattedBatch(["b", "a0"], "", 3000.0, ordered=False)) is None
    core.refilling = False
    assert core.floor == ""  # no floor for unordered batches
    assert [core.take()[0] for _ in range(3)] == ["x", "a", "b"]
    assert core.stats().discarded_ids == 0
    # The period rule still holds: the rest of a batch whose period ended is dropped, counted.
    now[0] = 3000.0
    assert core.take()[0] is None
    s = core.stats()
    assert (s.ids_served, s.discarded_ids, s.ids_received) == (5, 1, 6)
    assert core.begin_refill()
    assert core.accept(FormattedBatch(["q", "p"], "", 3000.0, ordered=False)) == "expired"
    assert core.stats().discarded_ids == 3


# -- the core: the period rule and the string floor, without a server -----------------------


def test_the_core_drops_ended_batches_and_cuts_at_the_floor() -> None:
    now = [1000.0]
    core = FormattedCore(2, 100, limit=100_000, wall=lambda: now[0])
    assert core.begin_refill()
    assert core.accept(FormattedBatch(["a1", "a2", "a3", "a4"], "", 2000.0)) is None
    core.refilling = False
    assert core.take() == ("a1", True)  # a tenth of 4 is 0: the refill starts at once
    # The next batch: what lies at or below the floor ("a4") is cut and counted.
    assert core.begin_refill()
    assert core.accept(FormattedBatch(["a3", "a4", "a5", "a6"], "", 3000.0)) is None
    core.refilling = False
    assert core.stats().discarded_ids == 2
    # The first batch's period ends: its rest is dropped whole, the next one served.
    now[0] = 2000.0
    assert core.take()[0] == "a5"
    assert core.stats().discarded_ids == 2 + 3
    # Both ended: nothing is handed out; the next batch is dropped as soon as it is reached.
    now[0] = 3000.0
    assert core.take()[0] is None
    s = core.stats()
    assert s.ids_served == 2 and s.discarded_ids == 6 and s.ids_received == 8
    # A batch that ended before it arrived is dropped at once.
    assert core.begin_refill()
    assert core.accept(FormattedBatch(["b1"], "", 3000.0)) == "expired"
    assert core.accept(FormattedBatch(["a0"], "", 9000.0)) == "a0"  # behind the floor
    size = core.count
    assert core.retry("s", "a0") == (2 * size, False)  # the catch-up: twice the size, at once
    assert core.count == size
    assert core.accept(FormattedBatch(["b1", "b2"], "", 9000.0)) is None
    core.refilling = False
    assert [core.take()[0], core.take()[0], core.take()[0]] == ["b1", "b2", None]
    assert core.stats().ids_served == 4 and core.stats().discarded_ids == 8


def test_the_core_starts_the_refill_at_a_tenth() -> None:
    core = FormattedCore(100, 100, limit=100_000)
    assert core.begin_refill()
    core.accept(FormattedBatch([f"x{i:04d}" for i in range(100)], "", float("inf")))
    core.refilling = False
    starts = [core.take()[1] for _ in range(100)]
    assert starts.index(True) == 10 and starts.count(True) == 1
    assert core.stats().ids_served == 100


# -- real servers ---------------------------------------------------------------------------


def test_texts_from_several_threads_are_unique_and_increasing(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    a = servers()
    b = servers(db=a.db)
    tag = new_tag()
    a.create_tag(tag, step=100, format=DAILY)
    with Client([a.url, b.url], **fast([], max_batch=40)) as client:
        supply = client.formatted(tag)
        assert client.formatted(tag) is supply and client.next_formatted(tag)
        got: List[List[str]] = [[] for _ in range(4)]

        def caller(k: int) -> None:
            for _ in range(500):
                got[k].append(supply.next_id())

        ts = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        every = [i for lst in got for i in lst]
        assert len(every) == 2000 and len(set(every)) == 2000
        assert all(ORDER.fullmatch(i) for i in every)
        for lst in got:
            assert lst == sorted(lst)
        # After every call returned, the next is larger than all.
        a.kill()  # and failover: the second server goes on
        after = [supply.next_id() for _ in range(300)]
        assert after == sorted(after) and after[0] > max(every)
        s = client.stats()
        assert s.ids_served == 2301 and s.failovers >= 1 and 10 <= s.batch_size <= 40


def test_async_texts_are_unique_and_increasing(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    a = servers()
    tag = new_tag()
    a.create_tag(tag, step=100, format=DAILY)

    async def main() -> Tuple[List[List[str]], int]:
        async with AsyncClient([a.url], **fast([])) as client:
            supply = client.formatted(tag)
            assert client.formatted(tag) is supply

            async def caller() -> List[str]:
                out = []
                for k in range(500):
                    out.append(await supply.next_id())
                    if k % 7 == 0:
                        await asyncio.sleep(0)
                return out

            got = await asyncio.gather(*(caller() for _ in range(4)))
            return list(got), client.stats().ids_served

    got, served = asyncio.run(main())
    every = [i for lst in got for i in lst]
    assert len(set(every)) == 2000 == served
    assert all(ORDER.fullmatch(i) for i in every)
    for lst in got:
        assert lst == sorted(lst)


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_a_batch_whose_period_ended_is_never_handed_out(
    mode: str, servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    """The period rule with an injected wall clock, on a real server's answers: the server's
    real ``period_end`` (the next UTC midnight); the client's clock set past it."""
    a = servers()
    tag = new_tag()
    a.create_tag(tag, step=1000, format=DAILY)
    now = [time.time()]

    def clock() -> float:
        return now[0]

    async def run(client: "Client | AsyncClient") -> None:
        supply = client.formatted(tag)

        async def next_id() -> str:
            if isinstance(client, AsyncClient):
                return await client.formatted(tag).next_id()
            return client.formatted(tag).next_id()

        first = [await next_id() for _ in range(50)]
        await settle(lambda: client.stats().ids_received > 50)  # the next batch is in
        end = supply.rest_end
        day = time.strftime("%Y%m%d", time.gmtime(end - 1))
        assert all(i.startswith(f"ORD-{day}") for i in first)
        assert end == parse_rfc3339(time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(end)))
        before = client.stats()
        assert before.ids_received > before.ids_served == 50 and before.discarded_ids == 0
        # The client's clock reaches the period's end: nothing it holds is handed out, and
        # what the server still answers (the same period, by its clock) is dropped too.
        now[0] = end
        with pytest.raises(UnavailableError):
            await next_id()
        await settle(lambda: client.stats().ids_received > before.ids_received)
        after = client.stats()
        assert after.ids_served == 50
        assert after.discarded_ids == after.ids_received - 50 > before.ids_received - 50
        assert supply.try_next_id() is None
        # The clock back before the end: the server's answers are taken again, above the last.
        now[0] = end - 3600
        more = [await next_id() for _ in range(20)]
        assert more == sorted(more) and more[0] > first[-1]
        assert client.stats().ids_served == 70

    if mode == "blocking":
        with Client([a.url], **fast([], wait_timeout=0.5, clock=clock)) as c:
            asyncio.run(run(c))
    else:

        async def main() -> None:
            async with AsyncClient([a.url], **fast([], wait_timeout=0.5, clock=clock)) as c:
                await run(c)

        asyncio.run(main())


def test_the_clock_setting_is_checked() -> None:
    for cls in (Client, AsyncClient):
        for clock in [5, "time", lambda: "now", lambda: None, lambda: True, lambda: 1 / 0]:
            with pytest.raises(ConfigError):
                cls(["http://127.0.0.1:1"], clock=clock)  # type: ignore[arg-type]
        cls(["http://127.0.0.1:1"], clock=lambda: 0)  # an int is unix seconds too


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_the_clock_hook_drops_what_ended_by_its_time(
    mode: str, servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    """The public ``clock`` setting is what the period rule reads: a clock one day ahead of the
    system's (and of the server's) sees every batch of today's period as ended, so the client
    hands out nothing and counts every text it received as discarded; the same tag on a client
    with the system clock hands texts out."""
    a = servers()
    tag = new_tag()
    a.create_tag(tag, step=1000, format=DAILY)
    ahead = lambda: time.time() + 86400  # noqa: E731
    opts = fast([], wait_timeout=0.4, clock=ahead)

    async def check(client: "Client | AsyncClient") -> None:
        supply = client.formatted(tag)
        with pytest.raises(UnavailableError) as e:
            got = supply.next_id()
            if asyncio.iscoroutine(got):
                await got
        assert e.value.last is not None and e.value.last.kind == "behind"
        s = client.stats()
        assert s.ids_received >= 10 and s.discarded_ids == s.ids_received
        assert s.ids_served == 0 and s.batches == 0 and supply.try_next_id() is None

    if mode == "blocking":
        with Client([a.url], **opts) as c:
            asyncio.run(check(c))
        with Client([a.url], **fast([])) as c:
            assert ORDER.fullmatch(c.next_formatted(tag))
    else:

        async def main() -> None:
            async with AsyncClient([a.url], **opts) as c:
                await check(c)
            async with AsyncClient([a.url], **fast([])) as c:
                assert ORDER.fullmatch(await c.next_formatted(tag))

        asyncio.run(main())


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_unordered_answers_are_handed_out_in_the_order_received(
    mode: str, bad_server: "Tuple[str, type[BadServer]]"
) -> None:
    """The list route's ``"ordered": false`` answers (a permuted tag's) through the whole client:
    texts come out exactly in the order of the bodies, and a second answer lying wholly below
    the first in byte order (for an ordered tag: a lagging server's, all discarded) is handed
    out too: no floor. (A local HTTP server stands in for the answers' shape here, as for the
    malformed bodies; a real server's permuted tag is tested in
    ``test_a_permuted_tag_from_real_servers``.)"""
    url, handler = bad_server
    end = "9999-12-31T23:59:59.999Z"
    first = ["T-9F3K2Q", "T-ZZZZZZ", "T-000005"]
    second = ["T-000003", "T-000001", "T-000002"]
    answers = iter([first, second])

    def do_get(self: BadServer) -> None:
        if self.path.startswith("/api/"):
            ids = next(answers, second)
            self.body = body(biz_tag="codes", ids=ids, period="", period_end=end, ordered=False)
        BadServer.do_GET(self)

    handler.do_GET = do_get  # type: ignore[method-assign]
    opts = fast([], batch=3, max_batch=3, wait_timeout=1.0)

    async def check(client: "Client | AsyncClient") -> None:
        got = []
        for _ in range(6):
            t = client.formatted("codes").next_id()
            got.append(await t if asyncio.iscoroutine(t) else t)
        assert got == first + second
        s = client.stats()
        assert s.discarded_ids == 0 and s.ids_served == 6 and s.failovers == 0

    if mode == "blocking":
        with Client([url], **opts) as c:
            asyncio.run(check(c))
    else:

        async def main() -> None:
            async with AsyncClient([url], **opts) as c:
                await check(c)

        asyncio.run(main())
    assert handler.paths[0] == "/api/v1/segment/codes/ids?count=3"


def test_a_text_taken_as_its_period_ends_is_discarded(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    """The local path compares the clock after taking a text: the clock passes the end between
    two calls; the text taken is counted, never returned, and the batch dropped."""
    a = servers()
    tag = new_tag()
    a.create_tag(tag, step=1000, format=DAILY)
    now = [time.time()]
    with Client([a.url], **fast([], batch=100, wait_timeout=0.3, clock=lambda: now[0])) as c:
        supply = c.formatted(tag)
        taken = [supply.next_id() for _ in range(11)]  # a tenth used: the refill starts
        asyncio.run(settle(lambda: c.stats().ids_received > 100))  # the next batch is in
        now[0] = supply.rest_end + 0.001
        with pytest.raises(UnavailableError):
            supply.next_id()
        s = c.stats()
        assert s.ids_served == 11 and s.discarded_ids == s.ids_received - 11
        assert taken == sorted(taken)


def test_the_deadline_passes_between_two_texts(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    """The default clock (issue 47): no clock read per text; the deadline thread sets the
    period's ended flag. Here the period's deadline is moved to 20 ms from now (armed again on
    the same flag, as the thread does at ``period_end``) between two texts: the first is handed
    out, the second comes from a new answer (the ended batch dropped whole, its 99 texts left
    counted as discarded), above the first."""
    from leafid_client._formatted import DEADLINES

    a = servers()
    tag = new_tag()
    a.create_tag(tag, step=1000, format=DAILY)
    with Client([a.url], **fast([], batch=100, wait_timeout=2.0)) as c:
        supply = c.formatted(tag)
        first = supply.next_id()
        flag = supply.current[1]
        assert isinstance(flag, list) and flag == [False], "the default clock: a flag"
        DEADLINES.arm(0.02, flag)
        asyncio.run(settle(lambda: flag[0], within=5.0))
        second = supply.next_id()
        assert second > first
        s = c.stats()
        assert (s.ids_served, s.discarded_ids, s.batches) == (2, 99, 2), s


def test_the_core_drops_a_batch_at_its_deadline_without_reading_the_clock() -> None:
    """The core alone, default clock: a batch whose period ends 0.4 s after receipt; one text
    before the deadline, none after it (the rest discarded), then the next answer's texts."""
    core = FormattedCore(2, 100, limit=100_000)
    assert core.accept(FormattedBatch(["a1", "a2", "a3"], "", time.time() + 0.4)) is None
    assert core.take()[0] == "a1"
    flag = core.current[1]
    asyncio.run(settle(lambda: flag[0], within=5.0))
    assert core.take()[0] is None
    assert core.stats().discarded_ids == 2
    assert core.accept(FormattedBatch(["b1", "b2"], "", time.time() + 86_400)) is None
    assert core.take()[0] == "b1"
    core.drop()  # cancels the period's deadline: the deadline thread ends


def test_a_plain_tag_on_the_formatted_supply_is_refused(
    shared_pair: List[LeafidServer],
) -> None:
    with Client([s.url for s in shared_pair], **fast([])) as client:
        for _ in range(2):
            with pytest.raises(RejectedError) as e:
                client.formatted("leaf-segment-test").next_id()
            assert e.value.code == "not_formatted" and e.value.status == 200
        assert client.stats().failovers == 0 and client.down_servers() == []

    async def main() -> str:
        async with AsyncClient([s.url for s in shared_pair], **fast([])) as client:
            try:
                await client.next_formatted("leaf-segment-test")
            except RejectedError as e:
                assert client.stats().failovers == 0
                return e.code
            return ""

    assert asyncio.run(main()) == "not_formatted"


def test_a_formatted_tag_on_a_numeric_supply_is_refused(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    a = servers()
    b = servers(db=a.db)
    tag = new_tag()
    a.create_tag(tag, format=DAILY)
    with Client([a.url, b.url], **fast([])) as client:
        with pytest.raises(RejectedError) as e:
            client.next_id(tag)
        assert e.value.code == "formatted_tag" and e.value.status == 400
        assert client.stats().failovers == 0
        assert ORDER.fullmatch(client.next_formatted(tag))


def test_a_period_that_runs_out_is_refused(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    a = servers()
    b = servers(db=a.db)
    tag = new_tag()
    a.create_tag(tag, step=10, format=dict(DAILY, width=2))
    with Client([a.url, b.url], **fast([])) as client:
        got = []
        with pytest.raises(RejectedError) as e:
            for _ in range(200):
                got.append(client.next_formatted(tag))
        assert e.value.code == "sequence_exhausted" and e.value.status == 503
        assert len(got) == 99 and got == sorted(got) and len(set(got)) == 99
        assert client.stats().failovers == 0


def test_a_bad_list_body_is_that_servers_failure(
    bad_server: "Tuple[str, type[BadServer]]", shared_pair: List[LeafidServer]
) -> None:
    url, handler = bad_server
    handler.body = body(biz_tag="x", ids=["b", "a"], period_end="2999-01-01T00:00:00Z")
    with Client([url], **fast([], wait_timeout=0.3)) as client:
        with pytest.raises(UnavailableError) as e:
            client.next_formatted("x")
        assert e.value.last is not None and e.value.last.kind == "bad_response"
    assert handler.paths[0] == "/api/v1/segment/x/ids?count=10"


def test_a_hammer_of_threads_on_small_batches_of_texts(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    """Six threads on one formatted supply, batches of 7 to 20 texts so pieces and batches
    switch all the time, the GIL handed over every 10 us: no text twice, each caller's texts
    increase, and a call that started after another ended got a larger text."""
    a = servers()
    tag = new_tag()
    a.create_tag(tag, step=50, format=DAILY)
    threads, per = 6, 1500
    calls: List[List[Tuple[int, int, str]]] = [[] for _ in range(threads)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with Client([a.url], batch=7, max_batch=20) as c:
            supply = c.formatted(tag)

            def work(out: List[Tuple[int, int, str]]) -> None:
                clock = time.perf_counter_ns
                take = supply.next_id
                for _ in range(per):
                    t0 = clock()
                    i = take()
                    out.append((t0, clock(), i))

            ts = [threading.Thread(target=work, args=(out,)) for out in calls]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            stats = supply.stats()
    finally:
        sys.setswitchinterval(old)
    every = [call for out in calls for call in out]
    assert len({i for _, _, i in every}) == threads * per, "no text twice"
    for out in calls:
        texts = [i for _, _, i in out]
        assert all(x < y for x, y in zip(texts, texts[1:]))
    by_end = sorted(every, key=lambda c: c[1])
    ends = [c[1] for c in by_end]
    prefix_max: List[str] = []
    best = ""
    for call in by_end:
        best = max(best, call[2])
        prefix_max.append(best)
    for start, _, text in every:
        k = bisect.bisect_left(ends, start)  # calls that ended before this one began
        if k:
            assert prefix_max[k - 1] < text, (start, text)
    assert stats.ids_served == threads * per and stats.batches >= threads * per // 20, stats


def permuted_pair(servers: Callable[..., LeafidServer], tmp_path: Path) -> List[LeafidServer]:
    """Two servers on one database with the permutation key ``conformance`` (a 32-byte key
    file, mode 0600). Skips on a server binary without permuted tags (it refuses the
    ``shapes`` settings at start)."""
    key = tmp_path / "permute.key"
    key.write_text(os.urandom(32).hex() + "\n")
    key.chmod(0o600)
    env: Dict[str, str] = {"LEAFID__SHAPES__KEYS__CONFORMANCE": str(key)}
    try:
        a = servers(env=env)
    except RuntimeError as e:
        if "unknown key shapes" in str(e):
            pytest.skip("this server binary has no permuted tags (shapes.keys)")
        raise
    return [a, servers(env=env, db=a.db)]


def test_a_permuted_tag_from_real_servers(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str], tmp_path: Path
) -> None:
    """A permuted tag's answers say ``"ordered": false`` and show no order; the client hands
    them out (an ordered check would refuse every answer), none twice, from 4 threads while the
    server in use is killed, none discarded (no floor, no period ended)."""
    a, b = permuted_pair(servers, tmp_path)
    tag = new_tag()
    a.create_tag(tag, step=200, format=PERMUTED)
    with urllib.request.urlopen(f"{b.url}/api/v1/segment/{tag}/ids?count=50", timeout=5) as r:
        raw = json.loads(r.read())
    assert raw["ordered"] is False and raw["ids"] != sorted(raw["ids"])
    # max_batch=50: a supply that grew its batch could hold the rest before the kill and
    # never ask again, so the failover this test is about would not happen.
    with Client([a.url, b.url], **fast([], batch=50, max_batch=50, request_timeout=0.5)) as client:
        supply = client.formatted(tag)
        got: List[List[str]] = [[] for _ in range(4)]
        total = [0]

        def caller(k: int) -> None:
            for _ in range(400):
                got[k].append(supply.next_id())
                total[0] += 1
                if k == 0 and total[0] >= 600 and a.proc is not None and a.proc.poll() is None:
                    a.kill()

        ts = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        after = [supply.next_id() for _ in range(200)]
        every = [i for lst in got for i in lst] + after + raw["ids"]
        assert len(every) == 1850 and len(set(every)) == 1850, "no text twice"
        assert all(CODE.fullmatch(i) for i in every)
        assert max(got, key=len) != sorted(max(got, key=len)) and after != sorted(after)
        s = client.stats()
        assert s.ids_served == 1800 and s.failovers >= 1 and s.discarded_ids == 0


def test_a_permuted_tag_on_the_async_client(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str], tmp_path: Path
) -> None:
    a, _ = permuted_pair(servers, tmp_path)
    tag = new_tag()
    a.create_tag(tag, step=200, format=PERMUTED)

    async def main() -> Tuple[List[List[str]], int, int]:
        async with AsyncClient([a.url], **fast([], batch=20)) as client:
            supply = client.formatted(tag)

            async def caller() -> List[str]:
                out = []
                for k in range(300):
                    out.append(await supply.next_id())
                    if k % 7 == 0:
                        await asyncio.sleep(0)
                return out

            got = await asyncio.gather(*(caller() for _ in range(4)))
            s = client.stats()
            return list(got), s.ids_served, s.discarded_ids

    got, served, discarded = asyncio.run(main())
    every = [i for lst in got for i in lst]
    assert len(set(every)) == 1200 == served and discarded == 0
    assert all(CODE.fullmatch(i) for i in every)
    assert any(lst != sorted(lst) for lst in got)
