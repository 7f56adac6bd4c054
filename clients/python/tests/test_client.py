"""The blocking client against real leafid servers (SQLite): ids, refusals, failover, health
probes, exact 64-bit values, concurrency and close()."""

from __future__ import annotations

import bisect
import json
import sys
import threading
import time
from typing import Callable, List, Tuple

import pytest

from leafid_client import (
    Client,
    ClientClosedError,
    InvalidTagError,
    RejectedError,
    UnavailableError,
)
from conftest import BadServer
from leafid_server import LeafidServer, free_low_port

SEEDED = "leaf-segment-test"


def strictly_increasing(ids: List[int]) -> bool:
    return all(a < b for a, b in zip(ids, ids[1:]))


def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_ids_of_a_tag_increase_batch_by_batch(shared_pair: List[LeafidServer]) -> None:
    with Client([s.url for s in shared_pair], batch=50, max_batch=50) as c:
        ids = [c.next_id(SEEDED) for _ in range(500)]
        stats = c.stats()
    assert strictly_increasing(ids)
    assert stats.ids_served == 500 and stats.failovers == 0 and stats.discarded_ids == 0
    assert 10 <= stats.batches <= 11, stats


def test_the_next_batch_is_fetched_once_ten_percent_is_used(
    shared_pair: List[LeafidServer], new_tag: Callable[[], str]
) -> None:
    tag = new_tag()
    shared_pair[0].create_tag(tag)
    with Client([shared_pair[0].url], batch=100) as c:
        supply = c.segment(tag)
        for _ in range(10):
            supply.next_id()
        time.sleep(0.3)
        assert supply.stats().batches == 1, "no refill before the preload mark"
        assert supply.try_next_id() is not None  # index 10: 10% of the batch
        assert wait_until(lambda: supply.stats().batches == 2, 5), supply.stats()
        time.sleep(0.2)
        assert supply.stats().batches == 2, "one refill (single flight)"


def test_an_unknown_tag_is_rejected_without_failover(shared_pair: List[LeafidServer]) -> None:
    with Client([s.url for s in shared_pair]) as c:
        with pytest.raises(RejectedError) as e:
            c.next_id("no-such-tag")
        assert (e.value.code, e.value.status) == ("unknown_biz_tag", 404)
        assert e.value.server == shared_pair[0].url
        assert c.stats().failovers == 0 and c.down_servers() == []
        # The supply is not stuck: the refusal comes again, and other tags still work.
        with pytest.raises(RejectedError):
            c.next_id("no-such-tag")
        assert c.next_id(SEEDED) > 0


def test_ids_near_2_pow_63_are_exact_until_the_tag_is_exhausted(
    shared_pair: List[LeafidServer], new_tag: Callable[[], str]
) -> None:
    tag = new_tag()
    shared_pair[0].create_tag(tag, step=1000, max_id=9223372036854770000)
    got: List[int] = []
    with Client([s.url for s in shared_pair], batch=700) as c:
        with pytest.raises(RejectedError) as e:
            while True:
                got.append(c.next_id(tag))
        assert e.value.code == "biz_tag_exhausted"
        assert c.stats().failovers == 0
    assert got[0] == 9223372036854770000
    assert got[:3] == [int("9223372036854770000"), int("9223372036854770001"),
                       int("9223372036854770002")]
    assert strictly_increasing(got) and got[-1] <= 2**63 - 1 and len(got) >= 1000


def test_a_closed_port_is_skipped_within_the_same_call(shared_pair: List[LeafidServer]) -> None:
    dead = f"http://127.0.0.1:{free_low_port()}"
    with Client([dead, shared_pair[0].url], batch=10) as c:
        ids = [c.next_id(SEEDED) for _ in range(100)]
        assert strictly_increasing(ids)
        assert c.down_servers() == [dead]
        assert c.preferred_server() == shared_pair[0].url
        assert c.stats().failovers == 1, "the down server is not asked again"


def test_every_server_down_raises_unavailable_naming_the_last_failure() -> None:
    dead = [f"http://127.0.0.1:{free_low_port()}" for _ in range(2)]
    with Client(dead, wait_timeout=0.5, backoff_min=0.05, backoff_max=0.2) as c:
        t0 = time.monotonic()
        with pytest.raises(UnavailableError) as e:
            c.next_id(SEEDED)
        elapsed = time.monotonic() - t0
        assert 0.45 <= elapsed < 3, elapsed
        assert e.value.last is not None and e.value.last.server in dead
        assert e.value.last.kind == "transport"
        t0 = time.monotonic()
        with pytest.raises(UnavailableError):
            c.snowflake().next_id(timeout=0.1)
        assert time.monotonic() - t0 < 1.5
        assert sorted(c.down_servers()) == sorted(dead)


def test_failover_when_the_preferred_server_is_killed(
    servers: Callable[..., LeafidServer]
) -> None:
    a = servers()
    b = servers()
    with Client([a.url, b.url], batch=20, request_timeout=1) as c:
        seg, snow = c.segment(SEEDED), c.snowflake()
        before = [seg.next_id() for _ in range(50)] + [snow.next_id() for _ in range(50)]
        a.kill()
        after_seg = [seg.next_id() for _ in range(300)]
        after_snow = [snow.next_id() for _ in range(300)]
        stats = c.stats()
        assert c.down_servers() == [a.url]
    seg_ids = before[:50] + after_seg
    snow_ids = before[50:] + after_snow
    assert strictly_increasing(seg_ids) and strictly_increasing(snow_ids)
    assert stats.failovers >= 1 and stats.ids_served == 700


def test_a_stopped_server_times_out_and_the_next_one_answers(
    servers: Callable[..., LeafidServer]
) -> None:
    a = servers()
    b = servers()
    # request_timeout: a's requests must time out, b's must not, even on a loaded machine.
    with Client([a.url, b.url], batch=10, request_timeout=1.0) as c:
        first = c.next_id(SEEDED)
        a.stop()
        try:
            t0 = time.monotonic()
            ids = [c.next_id(SEEDED) for _ in range(100)]
            assert time.monotonic() - t0 < 5
            assert c.down_servers() == [a.url]
        finally:
            a.cont()
        assert strictly_increasing([first] + ids)
        # The probe of /health/ready brings it back.
        assert wait_until(lambda: c.down_servers() == [], 10)


def test_a_server_without_the_snowflake_engine_is_failed_over(
    servers: Callable[..., LeafidServer]
) -> None:
    a = servers(env={"LEAFID__SNOWFLAKE__ENABLED": "false"})
    b = servers()
    with Client([a.url, b.url], batch=10) as c:
        ids = [c.snowflake().next_id() for _ in range(50)]
        assert strictly_increasing(ids)
        # a is marked down, but its /health/ready answers 200 (only that engine is off): its
        # probe may already have marked it up again, on a loaded machine before the 50 ids are
        # taken. b, which answered, stays the one asked first.
        assert c.stats().failovers == 1 and c.preferred_server() == b.url


def test_a_server_restarted_on_its_port_is_used_again(
    servers: Callable[..., LeafidServer]
) -> None:
    a = servers(port=free_low_port())
    with Client([a.url], batch=5, wait_timeout=0.5, backoff_min=0.05, backoff_max=0.2) as c:
        ids = [c.next_id(SEEDED) for _ in range(5)]  # the first batch, exactly
        a.kill()
        with pytest.raises(UnavailableError) as e:
            for _ in range(20):
                ids.append(c.next_id(SEEDED))
        assert e.value.last is not None and e.value.last.server == a.url
        a.start()
        assert wait_until(lambda: c.down_servers() == [], 10), "the probe brings it back"
        ids += [c.next_id(SEEDED) for _ in range(20)]
    assert strictly_increasing(ids) and len(ids) >= 25


def _ranges(*pairs: "tuple[str, str]", tag: str = SEEDED, count: "int | None" = None) -> bytes:
    n = sum(int(last) - int(first) + 1 for first, last in pairs) if count is None else count
    doc = {"biz_tag": tag, "count": n, "ranges": [{"first": f, "last": l} for f, l in pairs]}
    return json.dumps(doc).encode()


BAD_BODIES = [
    b"not json",
    json.dumps({"biz_tag": SEEDED, "ids": ["999999998", "999999999"]}).encode(),  # not ranges
    _ranges(("999999999", "999999999"), ("999999990", "999999990")),  # decreasing
    _ranges(("999999990", "999999995"), ("999999995", "999999996")),  # overlapping
    _ranges(("999999999", "999999999"), tag="other"),
    _ranges(("0", "1")),
    _ranges(("999999990", "999999989"), count=0),
    _ranges(("999999990", "999999999"), count=9),  # sizes do not add up to count
    _ranges(("999999980", "999999990")),  # 11 ids for a count of 10
    _ranges(("9223372036854775808", "9223372036854775808")),
]


@pytest.mark.parametrize("raw", BAD_BODIES)
def test_a_malformed_200_is_that_servers_failure(
    raw: bytes, bad_server: Tuple[str, "type[BadServer]"], shared_pair: List[LeafidServer]
) -> None:
    url, handler = bad_server
    handler.body = raw
    with Client([url, shared_pair[0].url], batch=10) as c:
        ids = [c.next_id(SEEDED) for _ in range(30)]
        assert c.down_servers() == [url] and c.stats().failovers == 1
    assert strictly_increasing(ids) and max(ids) < 999999998


def test_concurrent_callers_get_unique_ids_in_real_time_order(
    shared_pair: List[LeafidServer],
) -> None:
    threads, per = 8, 2000
    calls: List[List[Tuple[int, int, int]]] = [[] for _ in range(threads)]
    with Client([s.url for s in shared_pair], batch=100) as c:

        def work(k: int, take: Callable[[], int]) -> None:
            out = calls[k]
            clock = time.perf_counter_ns
            for _ in range(per):
                t0 = clock()
                i = take()
                out.append((t0, clock(), i))

        for take in (c.segment(SEEDED).next_id, c.snowflake().next_id):
            for out in calls:
                out.clear()
            ts = [threading.Thread(target=work, args=(k, take)) for k in range(threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            every = [call for out in calls for call in out]
            ids = [i for _, _, i in every]
            assert len(set(ids)) == threads * per, "no id twice"
            for out in calls:
                assert strictly_increasing([i for _, _, i in out])
            assert_real_time_order(every)


@pytest.mark.parametrize("engine", ["segment", "snowflake"])
def test_a_hammer_of_threads_on_small_ranges(
    engine: str, shared_pair: List[LeafidServer]
) -> None:
    """Several threads on one client, batches of 7 to 20 ids so pieces and batches switch
    all the time, the GIL handed over every 10 us: no id twice, each caller's ids increase, and
    a call that started after another ended got a larger id."""
    threads, per = 6, 3000
    calls: List[List[Tuple[int, int, int]]] = [[] for _ in range(threads)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with Client([shared_pair[0].url], batch=7, max_batch=20) as c:
            supply = c.segment(SEEDED) if engine == "segment" else c.snowflake()

            def work(out: List[Tuple[int, int, int]]) -> None:
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
    assert len({i for _, _, i in every}) == threads * per, "no id twice"
    for out in calls:
        assert strictly_increasing([i for _, _, i in out])
    assert_real_time_order(every)
    assert stats.ids_served == threads * per and stats.batches >= threads * per // 20, stats


def assert_real_time_order(calls: List[Tuple[int, int, int]]) -> None:
    """A call that started after another returned got a larger id."""
    by_end = sorted(calls, key=lambda c: c[1])
    ends = [c[1] for c in by_end]
    prefix_max = []
    best = 0
    for c in by_end:
        best = max(best, c[2])
        prefix_max.append(best)
    for start, _, id_ in calls:
        k = bisect.bisect_left(ends, start)  # calls that ended strictly before this one began
        if k:
            assert prefix_max[k - 1] < id_, (start, id_)


def test_close_aborts_a_request_in_flight_and_leaves_no_thread(
    servers: Callable[..., LeafidServer]
) -> None:
    a = servers()
    c = Client([a.url], request_timeout=30, wait_timeout=30)
    assert c.next_id(SEEDED) > 0
    c.segment(SEEDED)  # same supply
    a.stop()
    try:
        errors: List[BaseException] = []

        def caller() -> None:
            try:
                for _ in range(2000):
                    c.next_id(SEEDED)
            except BaseException as e:  # noqa: BLE001 - the test inspects it
                errors.append(e)

        t = threading.Thread(target=caller)
        t.start()
        time.sleep(0.5)
        assert any(x.name.startswith("leafid-refill") for x in threading.enumerate())
        t0 = time.monotonic()
        c.close()
        assert time.monotonic() - t0 < 2, "close() does not wait for the hung server"
        t.join(5)
        assert not t.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], ClientClosedError)
        assert [x.name for x in threading.enumerate() if x.name.startswith("leafid-")] == []
        with pytest.raises(ClientClosedError):
            c.next_id(SEEDED)
        c.close()  # idempotent
    finally:
        a.cont()


def test_an_adaptive_batch_grows_while_callers_wait(shared_pair: List[LeafidServer]) -> None:
    with Client([shared_pair[0].url], batch=10, max_batch=5000) as c:
        supply = c.segment(SEEDED)
        ids = [supply.next_id() for _ in range(20_000)]
        stats = supply.stats()
    assert strictly_increasing(ids)
    # 20,000 ids in batches of 10 would be 2,000 requests.
    assert stats.batch_size > 10 and stats.batches < 500, stats


def test_a_lagging_server_after_failover_is_cut_to_the_floor(
    servers: Callable[..., LeafidServer], new_tag: Callable[[], str]
) -> None:
    a, b = servers(), servers()
    tag = new_tag()
    a.create_tag(tag, step=1000)
    # b leases the first segment, a the one above it: after a dies, b is behind.
    b_first = _get_ids(b, tag, 1)[0]
    a_first = _get_ids(a, tag, 1)[0]
    assert a_first > b_first + 500
    with Client([a.url, b.url], batch=10) as c:
        ids = [c.next_id(tag) for _ in range(15)]
        assert ids[0] > a_first
        a.kill()
        t0 = time.monotonic()
        ids += [c.next_id(tag) for _ in range(100)]
        elapsed = time.monotonic() - t0
        stats = c.stats()
    assert strictly_increasing(ids)
    assert stats.discarded_ids >= 500, stats  # b's segment below the floor, never handed out
    assert elapsed < 5, elapsed


def _get_ids(server: LeafidServer, tag: str, count: int) -> List[int]:
    import urllib.request

    url = f"{server.url}/api/v1/segment/{tag}/ids?count={count}&stringify_ids=true"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return [int(i) for i in json.loads(resp.read())["ids"]]


def test_a_down_server_is_probed_with_exponential_backoff_until_close(
    bad_server: Tuple[str, "type[BadServer]"], shared_pair: List[LeafidServer]
) -> None:
    url, handler = bad_server
    handler.body = b"not json"
    c = Client([url, shared_pair[0].url], batch=10, backoff_min=0.05, backoff_max=0.2)
    try:
        c.next_id(SEEDED)
        assert c.down_servers() == [url]
        time.sleep(1.0)
        probes = handler.paths.count("/health/ready")
        # Due at 0.05, 0.15, 0.35, 0.55, 0.75, 0.95 s (doubling, capped at 0.2 s).
        assert 3 <= probes <= 8, handler.paths
        assert c.down_servers() == [url], "a 503 from /health/ready keeps it down"
    finally:
        c.close()
    n = len(handler.paths)
    time.sleep(0.4)
    assert len(handler.paths) == n, "no probe after close()"


def test_an_https_url_speaks_tls(shared_pair: List[LeafidServer]) -> None:
    # A plain HTTP server behind an https:// URL: the TLS handshake fails (that server's
    # failure, so the client fails over), which shows the client spoke TLS to it.
    tls = shared_pair[0].url.replace("http://", "https://")
    with Client([tls, shared_pair[1].url], batch=10) as c:
        assert c.next_id(SEEDED) > 0
        assert c.down_servers() == [tls] and c.stats().failovers == 1


def test_a_zero_wait_on_a_cold_tag_says_so(shared_pair: List[LeafidServer]) -> None:
    with Client([shared_pair[0].url]) as c:
        with pytest.raises(UnavailableError) as e:
            c.next_id(SEEDED, timeout=0)
        assert "within the 0 ms wait" in str(e.value) and e.value.last is None
        with pytest.raises(InvalidTagError, match="missing"):
            c.next_id(None)  # type: ignore[arg-type]
