"""The snowflake bounds helper (issue 35): ``snowflake_bounds(from_, to)`` on both clients
against real servers (equal to the route's answer, refusals, failover), and its wire."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, Dict, List, Tuple, TypeVar

import pytest

from leafid_client import (
    AsyncClient,
    Bounds,
    Client,
    ClientClosedError,
    RejectedError,
    UnavailableError,
)
from leafid_client._wire import (
    MAX_ID,
    BoundsRequest,
    ServerFailure,
    bounds_instants,
    parse_bounds,
    rfc3339_ms,
)
from leafid_server import LeafidServer, free_low_port

from conftest import BadServer

T = TypeVar("T")

UTC = timezone.utc


def fast(**kw: object) -> Dict[str, Any]:
    opts: Dict[str, Any] = dict(
        batch=10, request_timeout=1.0, wait_timeout=2.0, backoff_min=0.02, backoff_max=0.2
    )
    opts.update(kw)
    return opts


def route(server: LeafidServer, frm: str, to: str) -> Tuple[int, Dict[str, Any]]:
    """The bounds route asked directly (not through the client)."""
    query = urllib.parse.urlencode({"from": frm, "to": to, "stringify_ids": "true"})
    try:
        with urllib.request.urlopen(f"{server.url}/api/v1/snowflake/bounds?{query}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def unix_ms(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


class Both:
    """Runs one scenario on the blocking ``Client`` or on ``AsyncClient``: ``call(f)`` awaits
    ``f()`` when it is a coroutine."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def run(self, urls: List[str], body: Callable[[Any, "Both"], Awaitable[None]], **kw: object) -> None:
        if self.mode == "blocking":
            with Client(urls, **fast(**kw)) as c:
                asyncio.run(body(c, self))
        else:

            async def main() -> None:
                async with AsyncClient(urls, **fast(**kw)) as c:
                    await body(c, self)

            asyncio.run(main())

    @staticmethod
    async def call(value: "T | Awaitable[T]") -> T:
        if asyncio.iscoroutine(value):
            return await value  # type: ignore[no-any-return]
        return value  # type: ignore[return-value]


# -- the wire -------------------------------------------------------------------------------


def test_instants_are_sent_as_utc_milliseconds() -> None:
    t = datetime(2026, 11, 27, 0, 0, 0, tzinfo=UTC)
    assert rfc3339_ms("to", t) == "2026-11-27T00:00:00.000Z"
    # Another zone: converted to UTC.
    east = timezone(timedelta(hours=8))
    assert rfc3339_ms("to", datetime(2026, 11, 27, 8, 0, 0, 123000, tzinfo=east)) == (
        "2026-11-27T00:00:00.123Z"
    )
    # A fraction of a millisecond is cut, or rounds up when asked (`to` of a non-empty range:
    # vectors/bounds.json), across a second and a day too.
    assert rfc3339_ms("from_", t.replace(microsecond=1)) == "2026-11-27T00:00:00.000Z"
    assert rfc3339_ms("to", t.replace(microsecond=1), up=True) == "2026-11-27T00:00:00.001Z"
    assert rfc3339_ms("to", t.replace(microsecond=999_001), up=True) == "2026-11-27T00:00:01.000Z"
    late = datetime(2026, 11, 26, 23, 59, 59, 999_999, tzinfo=UTC)
    assert rfc3339_ms("to", late, up=True) == "2026-11-27T00:00:00.000Z"
    top = datetime.max.replace(tzinfo=UTC)
    assert rfc3339_ms("to", top, up=True) == "9999-12-31T23:59:59.999Z"
    with pytest.raises(ValueError, match="aware"):
        rfc3339_ms("from_", datetime(2026, 11, 27))
    with pytest.raises(TypeError):
        rfc3339_ms("from_", 1795824000.0)
    req = BoundsRequest.between(t, t + timedelta(hours=1))
    assert req.path == (
        "/api/v1/snowflake/bounds?from=2026-11-27T00%3A00%3A00.000Z"
        "&to=2026-11-27T01%3A00%3A00.000Z&stringify_ids=true"
    )


def test_a_bounds_answer_is_taken_only_when_valid() -> None:
    ok = {"min_id": "5", "max_id": str(MAX_ID), "layout": "41/10/12", "from": "x", "to": "y"}
    assert parse_bounds(json.dumps(ok).encode()) == Bounds(5, MAX_ID)
    # Numbers are not what stringify_ids=true asked for (vectors/responses.json).
    with pytest.raises(ValueError):
        parse_bounds(b'{"min_id": 7, "max_id": 7}')
    # A range in the layout's first tick starts at 0.
    assert parse_bounds(b'{"min_id": "0", "max_id": "5"}') == (0, 5)
    for bad in [
        {"min_id": "00", "max_id": "5"},
        {"min_id": False, "max_id": "5"},
        {"min_id": "-1", "max_id": "5"},
        {"min_id": "1", "max_id": str(MAX_ID + 1)},
        {"min_id": "9", "max_id": "8"},
        {"min_id": "01", "max_id": "8"},
        {"min_id": "1"},
        {"min_id": 1.5, "max_id": 8},
        {"min_id": True, "max_id": 8},
        [1, 2],
    ]:
        with pytest.raises(ValueError):
            parse_bounds(json.dumps(bad).encode())
    with pytest.raises(ValueError):
        parse_bounds(b"not json")
    req = BoundsRequest("/x")
    refusal = b'{"code": "invalid_time_range", "message": "empty"}'
    with pytest.raises(RejectedError) as e:
        req.interpret("s", 400, refusal)
    assert (e.value.status, e.value.code, e.value.message) == (400, "invalid_time_range", "empty")
    with pytest.raises(RejectedError):
        req.interpret("s", 400, b'{"code": "invalid_request", "message": "m"}')
    # That server's failures: another 4xx code (the engine is off there), 5xx, a bad body.
    for status, body, kind in [
        (404, b'{"code": "engine_disabled", "message": "m"}', "status"),
        (404, b"<html>", "status"),
        (503, b'{"code": "invalid_time_range"}', "status"),
        (500, b"", "status"),
        (200, b'{"min_id": "9", "max_id": "8"}', "bad_response"),
    ]:
        with pytest.raises(ServerFailure) as f:
            req.interpret("s", status, body)
        assert f.value.fault.kind == kind, (status, body)


# -- real servers ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_the_bounds_are_the_routes_and_hold_the_ids_taken(
    mode: str, shared_pair: List[LeafidServer]
) -> None:
    a = shared_pair[0]

    async def body(c: Any, both: Both) -> None:
        start = datetime.now(UTC) - timedelta(seconds=60)
        ids = [await both.call(c.next_snowflake_id()) for _ in range(300)]
        end = datetime.now(UTC) + timedelta(seconds=60)
        got = await both.call(c.snowflake_bounds(start, end))
        assert isinstance(got, Bounds) and isinstance(got.min_id, int)
        status, want = route(a, *bounds_instants(start, end))
        assert status == 200, want
        assert (str(got.min_id), str(got.max_id)) == (want["min_id"], want["max_id"])
        lo, hi = got
        assert 0 < lo <= hi <= MAX_ID
        assert all(lo <= i <= hi for i in ids)
        # A fraction of a millisecond widens the range: `from` down, `to` up, the same as the
        # route's answer for those whole milliseconds (the route also takes unix ms).
        t0 = start.replace(microsecond=start.microsecond // 1000 * 1000 + 400)
        t1 = end.replace(microsecond=end.microsecond // 1000 * 1000 + 600)
        status, want = route(a, str(unix_ms(t0)), str(unix_ms(t1) + 1))
        assert status == 200, want
        assert await both.call(c.snowflake_bounds(t0, t1)) == (
            int(want["min_id"]),
            int(want["max_id"]),
        )
        # One millisecond from t0: the two ticks it overlaps.
        one = await both.call(c.snowflake_bounds(t0, t0 + timedelta(milliseconds=1)))
        assert one.min_id <= one.max_id < got.max_id
        assert c.stats().failovers == 0

    Both(mode).run([s.url for s in shared_pair], body)


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_a_range_the_layout_cannot_hold_is_rejected_without_failover(
    mode: str, shared_pair: List[LeafidServer]
) -> None:
    async def body(c: Any, both: Both) -> None:
        now = datetime.now(UTC)
        for frm, to in [
            (now, now),  # empty
            (now, now - timedelta(seconds=1)),  # reversed
            (datetime(2000, 1, 1, tzinfo=UTC), datetime(2000, 1, 2, tzinfo=UTC)),  # before the epoch
            (now, datetime(9999, 1, 1, tzinfo=UTC)),  # past the end of the time field
        ]:
            with pytest.raises(RejectedError) as e:
                await both.call(c.snowflake_bounds(frm, to))
            assert (e.value.status, e.value.code) == (400, "invalid_time_range"), (frm, to)
        with pytest.raises(ValueError):
            await both.call(c.snowflake_bounds(datetime.now(), now))  # naive
        assert c.stats().failovers == 0 and c.down_servers() == []

    Both(mode).run([s.url for s in shared_pair], body)


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_bounds_fail_over_like_batches(
    mode: str, servers: Callable[..., LeafidServer]
) -> None:
    """A refused connection and a 404 ``engine_disabled`` are those servers' failures: the
    next server answers, two failovers counted, both marked down."""
    dead = f"http://127.0.0.1:{free_low_port()}"
    off = servers(env={"LEAFID__SNOWFLAKE__ENABLED": "false"})
    on = servers(db=off.db)
    now = datetime.now(UTC)
    frm, to = now - timedelta(hours=1), now

    async def body(c: Any, both: Both) -> None:
        got = await both.call(c.snowflake_bounds(frm, to))
        status, want = route(on, *bounds_instants(frm, to))
        assert got == (int(want["min_id"]), int(want["max_id"]))
        assert c.stats().failovers == 2
        assert sorted(c.down_servers()) == sorted([dead, off.url])
        assert c.preferred_server() == on.url

    status, answer = route(off, rfc3339_ms("", frm), rfc3339_ms("", to))
    assert (status, answer.get("code")) == (404, "engine_disabled")
    Both(mode).run([dead, off.url, on.url], body)


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_bounds_when_no_server_answers(
    mode: str, bad_server: "Tuple[str, type[BadServer]]"
) -> None:
    """A server whose 200 body is not valid bounds fails every round: UnavailableError after the
    wait, naming it; then a closed client refuses at once."""
    url, handler = bad_server
    handler.body = b'{"min_id": "9", "max_id": "8"}'
    now = datetime.now(UTC)

    async def body(c: Any, both: Both) -> None:
        began = time.monotonic()
        with pytest.raises(UnavailableError) as e:
            await both.call(c.snowflake_bounds(now - timedelta(hours=1), now))
        took = time.monotonic() - began
        assert 0.1 <= took < 2.0, took
        assert e.value.last is not None and e.value.last.kind == "bad_response"
        assert len(handler.paths) >= 2  # rounds retried with backoff
        assert handler.paths[0].startswith("/api/v1/snowflake/bounds?from=")
        with pytest.raises(UnavailableError):
            await both.call(c.snowflake_bounds(now - timedelta(hours=1), now, timeout=0))
        await both.call(c.close())
        with pytest.raises(ClientClosedError):
            await both.call(c.snowflake_bounds(now - timedelta(hours=1), now))

    Both(mode).run([url], body, wait_timeout=0.5)
