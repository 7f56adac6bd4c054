"""The asyncio client against real leafid servers: ids, refusals, failover, timeouts and
cancellation, concurrency of tasks, close()."""

from __future__ import annotations

import asyncio
import time
from typing import Callable, List, Tuple

import pytest

from leafid_client import AsyncClient, ClientClosedError, RejectedError, UnavailableError
from leafid_server import LeafidServer, free_low_port
from test_client import assert_real_time_order

SEEDED = "leaf-segment-test"


def strictly_increasing(ids: List[int]) -> bool:
    return all(a < b for a, b in zip(ids, ids[1:]))


def run(coro: "asyncio.Future | object") -> object:
    """Runs a test coroutine; afterwards no task of it may be left on the loop."""

    async def main() -> object:
        result = await coro  # type: ignore[misc]
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not left, f"tasks left after close(): {left}"
        return result

    return asyncio.run(main())


def test_ids_and_stats(shared_pair: List[LeafidServer]) -> None:
    async def main() -> None:
        async with AsyncClient([s.url for s in shared_pair], batch=50, max_batch=50) as c:
            seg = [await c.next_id(SEEDED) for _ in range(500)]
            snow = [await c.next_snowflake_id() for _ in range(120)]
            stats = c.stats()
        assert strictly_increasing(seg) and strictly_increasing(snow)
        assert stats.ids_served == 620 and stats.failovers == 0 and stats.batches >= 13

    run(main())


def test_concurrent_tasks_get_unique_increasing_ids(shared_pair: List[LeafidServer]) -> None:
    async def main() -> None:
        async with AsyncClient([s.url for s in shared_pair], batch=100) as c:
            seg = c.segment(SEEDED)
            order: List[int] = []

            async def caller() -> List[int]:
                mine = []
                for _ in range(500):
                    i = await seg.next_id()
                    mine.append(i)
                    order.append(i)
                    if len(mine) % 50 == 0:
                        await asyncio.sleep(0)
                return mine

            lists = await asyncio.gather(*(caller() for _ in range(20)))
        assert all(strictly_increasing(m) for m in lists)
        assert len({i for m in lists for i in m}) == 10_000
        # One loop: the order calls returned in is a real-time order.
        assert strictly_increasing(order)

    run(main())


def test_an_unknown_tag_is_rejected_without_failover(shared_pair: List[LeafidServer]) -> None:
    async def main() -> None:
        async with AsyncClient([s.url for s in shared_pair]) as c:
            with pytest.raises(RejectedError) as e:
                await c.next_id("no-such-tag")
            assert e.value.code == "unknown_biz_tag"
            assert c.stats().failovers == 0 and c.down_servers() == []

    run(main())


def test_failover_when_the_preferred_server_is_killed(
    servers: Callable[..., LeafidServer]
) -> None:
    a, b = servers(), servers()

    async def main() -> None:
        async with AsyncClient([a.url, b.url], batch=20, request_timeout=1) as c:
            ids = [await c.next_id(SEEDED) for _ in range(30)]
            a.kill()
            ids += [await c.next_id(SEEDED) for _ in range(300)]
            assert c.down_servers() == [a.url] and c.stats().failovers >= 1
        assert strictly_increasing(ids)

    run(main())


def test_a_stopped_server_times_out_and_comes_back(servers: Callable[..., LeafidServer]) -> None:
    a, b = servers(), servers()

    async def main() -> None:
        # request_timeout: a's requests must time out, b's must not, even on a loaded machine
        # (0.3 s was too short for b there: b was marked down too).
        async with AsyncClient(
            [a.url, b.url], batch=10, request_timeout=1.0, backoff_min=0.05, backoff_max=0.2
        ) as c:
            ids = [await c.next_snowflake_id()]
            a.stop()
            try:
                ids += [await c.next_snowflake_id() for _ in range(100)]
                assert c.down_servers() == [a.url]
            finally:
                a.cont()
            deadline = time.monotonic() + 10
            while c.down_servers() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert c.down_servers() == [], "the probe brings it back"
        assert strictly_increasing(ids)

    run(main())


def test_every_server_down_raises_unavailable_after_the_wait() -> None:
    dead = f"http://127.0.0.1:{free_low_port()}"

    async def main() -> None:
        async with AsyncClient([dead], wait_timeout=0.4, backoff_min=0.05) as c:
            t0 = time.monotonic()
            with pytest.raises(UnavailableError) as e:
                await c.next_id(SEEDED)
            assert 0.35 <= time.monotonic() - t0 < 3
            assert e.value.last is not None and e.value.last.server == dead
            t0 = time.monotonic()
            with pytest.raises(UnavailableError):
                await c.next_id(SEEDED, timeout=0.1)
            assert time.monotonic() - t0 < 1

    run(main())


def test_a_waiting_caller_can_be_cancelled_and_close_ends_everything(
    servers: Callable[..., LeafidServer]
) -> None:
    a = servers()

    async def main() -> None:
        c = AsyncClient([a.url], batch=10, request_timeout=30, wait_timeout=30)
        seg = c.segment(SEEDED)
        for _ in range(10):
            await seg.next_id()
        a.stop()
        try:
            # wait_for's cancellation: the caller gives up, the supply is intact.
            with pytest.raises(asyncio.TimeoutError):
                for _ in range(100):
                    await asyncio.wait_for(seg.next_id(), 0.3)
            task = asyncio.ensure_future(seg.next_id())
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            waiter = asyncio.ensure_future(seg.next_id())
            await asyncio.sleep(0.1)
            t0 = time.monotonic()
            await c.close()
            assert time.monotonic() - t0 < 2
            with pytest.raises(ClientClosedError):
                await waiter
            with pytest.raises(ClientClosedError):
                await seg.next_id()
        finally:
            a.cont()

    run(main())


def test_a_malformed_200_is_that_servers_failure(
    bad_server: "tuple", shared_pair: List[LeafidServer]
) -> None:
    url, handler = bad_server
    handler.body = b'{"biz_tag":"leaf-segment-test","ids":["999999999","999999998"]}'

    async def main() -> None:
        async with AsyncClient([url, shared_pair[0].url], batch=10) as c:
            ids = [await c.next_id(SEEDED) for _ in range(30)]
            assert c.down_servers() == [url] and c.stats().failovers == 1
        assert strictly_increasing(ids) and max(ids) < 999999998

    run(main())


@pytest.mark.parametrize("engine", ["segment", "snowflake"])
def test_a_hammer_of_tasks_on_small_ranges(engine: str, shared_pair: List[LeafidServer]) -> None:
    """Several tasks on one client, batches of 7 to 20 ids so pieces and batches switch all the
    time, each task yielding now and then: no id twice, each caller's ids increase, and a call
    that started after another ended got a larger id."""
    tasks, per = 8, 2000

    async def main() -> List[List[Tuple[int, int, int]]]:
        async with AsyncClient([shared_pair[0].url], batch=7, max_batch=20) as c:
            supply = c.segment(SEEDED) if engine == "segment" else c.snowflake()

            async def caller(k: int) -> List[Tuple[int, int, int]]:
                out = []
                clock = time.perf_counter_ns
                for n in range(per):
                    t0 = clock()
                    i = await supply.next_id()
                    out.append((t0, clock(), i))
                    if (n + k) % 3 == 0:
                        await asyncio.sleep(0)
                return out

            calls = await asyncio.gather(*(caller(k) for k in range(tasks)))
            stats = supply.stats()
        assert stats.ids_served == tasks * per and stats.batches >= tasks * per // 20, stats
        return list(calls)

    calls = run(main())
    every = [call for out in calls for call in out]  # type: ignore[attr-defined]
    assert len({i for _, _, i in every}) == tasks * per, "no id twice"
    for out in calls:  # type: ignore[attr-defined]
        assert strictly_increasing([i for _, _, i in out])
    assert_real_time_order(every)


def test_an_adaptive_batch_grows_while_callers_wait(shared_pair: List[LeafidServer]) -> None:
    async def main() -> None:
        async with AsyncClient([shared_pair[0].url], batch=10, max_batch=5000) as c:
            supply = c.segment(SEEDED)
            ids = [await supply.next_id() for _ in range(20_000)]
            stats = supply.stats()
        assert strictly_increasing(ids)
        assert stats.batch_size > 10 and stats.batches < 500, stats

    run(main())


def test_a_down_server_is_probed_with_exponential_backoff_until_close(
    bad_server: "tuple", shared_pair: List[LeafidServer]
) -> None:
    url, handler = bad_server
    handler.body = b"not json"

    async def main() -> None:
        c = AsyncClient([url, shared_pair[0].url], batch=10, backoff_min=0.05, backoff_max=0.2)
        try:
            await c.next_id(SEEDED)
            assert c.down_servers() == [url]
            await asyncio.sleep(1.0)
            probes = handler.paths.count("/health/ready")
            assert 3 <= probes <= 8, handler.paths
        finally:
            await c.close()
        n = len(handler.paths)
        await asyncio.sleep(0.4)
        assert len(handler.paths) == n, "no probe after close()"

    run(main())


def test_an_https_url_speaks_tls(shared_pair: List[LeafidServer]) -> None:
    tls = shared_pair[0].url.replace("http://", "https://")

    async def main() -> None:
        async with AsyncClient([tls, shared_pair[1].url], batch=10) as c:
            assert await c.next_id(SEEDED) > 0
            assert c.down_servers() == [tls] and c.stats().failovers == 1

    run(main())


def test_a_zero_wait_on_a_cold_tag_says_so(shared_pair: List[LeafidServer]) -> None:
    async def main() -> None:
        async with AsyncClient([shared_pair[0].url]) as c:
            with pytest.raises(UnavailableError) as e:
                await c.next_id(SEEDED, timeout=0)
            assert "within the 0 ms wait" in str(e.value) and e.value.last is None

    run(main())
