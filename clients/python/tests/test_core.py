"""The pure parts: tag rule, settings, body validation, refusal vs failure, backoff, the server
order, the double buffer and its floor. No server needed."""

from __future__ import annotations

import json

import pytest

from leafid_client import Client, ConfigError, InvalidTagError, RejectedError, valid_tag
from leafid_client._core import (
    MAX_BATCH,
    BatchRequest,
    Behind,
    Endpoint,
    ServerFailure,
    ServerSet,
    SupplyCore,
    backoff,
    behind_tail,
    catch_up_count,
    interpret,
    parse_batch,
)

SEG = BatchRequest.segment("t", 3)
SNOW = BatchRequest.snowflake(3)


def body(**doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_tags_follow_the_server_rule() -> None:
    assert valid_tag("orders.v2:eu-1_x")
    assert valid_tag("a" * 128)
    for bad in ["", "a/b", "a b", "é", "a" * 129, "a\n", None, 5, b"ab"]:
        assert not valid_tag(bad), bad


def test_the_constructor_refuses_bad_settings() -> None:
    for kwargs in [
        dict(servers=[]),
        dict(servers=["https://a:1"]),
        dict(servers=["a:1"]),
        dict(servers=["http://a:1?x=1"]),
        dict(servers=["http://a:99999"]),
        dict(servers=["http://a:1"], batch=0),
        dict(servers=["http://a:1"], batch=100_001),
        dict(servers=["http://a:1"], batch=True),
        dict(servers=["http://a:1"], batch=1.5),
        dict(servers=["http://a:1"], request_timeout=0),
        dict(servers=["http://a:1"], wait_timeout=-1),
        dict(servers=["http://a:1"], backoff_min=2, backoff_max=1),
    ]:
        with pytest.raises(ConfigError):
            Client(**kwargs)  # type: ignore[arg-type]


def test_a_url_keeps_its_port_and_prefix() -> None:
    ep = Endpoint.parse("http://127.0.0.1:8080/")
    assert (ep.url, ep.host, ep.port, ep.prefix) == ("http://127.0.0.1:8080", "127.0.0.1", 8080, "")
    ep = Endpoint.parse("http://[::1]/leafid")
    assert (ep.host, ep.port, ep.prefix, ep.host_header) == ("::1", 80, "/leafid", "[::1]")


def test_a_valid_batch_is_read_exactly() -> None:
    big = [str(2**63 - 3), str(2**63 - 2), str(2**63 - 1)]
    assert parse_batch(body(biz_tag="t", ids=big), SEG) == [2**63 - 3, 2**63 - 2, 2**63 - 1]
    assert parse_batch(body(ids=["1", "5"]), SNOW) == [1, 5]
    assert parse_batch(body(ids=[7]), SNOW) == [7]


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1,2]",
        body(biz_tag="t"),
        body(biz_tag="t", ids=[]),
        body(biz_tag="t", ids=["1", "2", "3", "4"]),
        body(biz_tag="t", ids=["0", "1"]),
        body(biz_tag="t", ids=["2", "2"]),
        body(biz_tag="t", ids=["3", "2"]),
        body(biz_tag="t", ids=["-1"]),
        body(biz_tag="t", ids=[" 1"]),
        body(biz_tag="t", ids=["1e3"]),
        body(biz_tag="t", ids=[1.0]),
        body(biz_tag="t", ids=[True]),
        body(biz_tag="t", ids=[str(2**64)]),
        body(biz_tag="u", ids=["1"]),
        body(ids=["1"]),
    ],
)
def test_a_body_that_is_not_a_batch_is_refused_whole(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_batch(raw, SEG)
    with pytest.raises(ServerFailure) as e:
        interpret("http://s", 200, raw, SEG)
    assert e.value.fault.kind == "bad_response"


def test_only_refusals_of_the_request_itself_are_final() -> None:
    for code in ["unknown_biz_tag", "invalid_biz_tag", "biz_tag_exhausted", "invalid_count",
                 "invalid_request"]:
        with pytest.raises(RejectedError) as r:
            interpret("http://s", 404, body(code=code, message="m"), SEG)
        assert (r.value.code, r.value.status, r.value.server) == (code, 404, "http://s")
    for status, raw in [
        (404, body(code="engine_disabled", message="m")),
        (404, b"<html>not found</html>"),
        (401, body(code="unauthorized", message="m")),
        (429, body(code="rate_limited")),
        (503, body(code="segments_not_ready", message="m")),
        (500, b""),
        (302, b""),
    ]:
        with pytest.raises(ServerFailure) as f:
            interpret("http://s", status, raw, SEG)
        assert f.value.fault.kind == "status"


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff(0.05, 5, f) for f in (1, 2, 3)] == [0.05, 0.1, 0.2]
    assert backoff(0.05, 5, 8) == 5
    assert backoff(0.05, 5, 10**6) == 5


def test_the_preferred_server_comes_first_and_down_ones_last() -> None:
    now = [100.0]
    eps = [Endpoint.parse(f"http://s{i}") for i in range(3)]
    downs = []
    ss = ServerSet(eps, 0.5, 4.0, on_down=lambda: downs.append(1), clock=lambda: now[0])
    assert list(ss.plan()) == [0, 1, 2]
    ss.mark_down(0)
    ss.succeeded(2, ss.servers[2].downs)
    assert list(ss.plan()) == [2, 1, 0]
    assert ss.down_urls() == ["http://s0"] and downs == [1]
    assert ss.next_probe_in() == 0.5 and ss.due_probes() == []
    now[0] += 0.5
    assert ss.due_probes() == [0]
    ss.mark_down(0)  # a failed probe: the backoff doubles
    assert ss.next_probe_in() == 1.0
    assert ss.mark_up(0, ss.servers[0].downs)
    assert ss.next_probe_in() is None and ss.down_urls() == []


def test_a_200_sent_before_the_latest_failure_marks_nothing_up() -> None:
    # An answer in flight when the server was killed arrives after another request to it failed:
    # older news than that failure.
    ss = ServerSet([Endpoint.parse(f"http://s{i}") for i in range(2)], 1, 1)
    seen = ss.servers[0].downs  # a request to s0 is sent
    ss.mark_down(0)  # another one to s0 fails
    ss.succeeded(1, ss.servers[1].downs)
    ss.succeeded(0, seen)  # the first one's 200 arrives
    assert ss.down_urls() == ["http://s0"] and list(ss.plan()) == [1, 0]
    assert not ss.mark_up(0, seen)
    assert ss.mark_up(0, ss.servers[0].downs) and ss.down_urls() == []


def test_a_plan_skips_a_server_marked_down_while_it_runs() -> None:
    ss = ServerSet([Endpoint.parse(f"http://s{i}") for i in range(3)], 1, 1)
    plan = ss.plan()
    assert next(plan) == 0
    ss.mark_down(1)
    assert list(plan) == [2, 1]


def test_the_floor_cuts_what_is_not_above_the_last_batch() -> None:
    core = SupplyCore()
    assert core.take() == (None, False)
    assert core.accept([10, 11, 12])
    assert [core.take()[0] for _ in range(3)] == [10, 11, 12]
    assert not core.accept([5, 6, 12]), "nothing above the floor: no batch"
    assert core.discarded == 3 and core.next is None
    assert core.accept([11, 12, 13, 14])
    assert core.discarded == 5
    assert [core.take()[0] for _ in range(3)] == [13, 14, None]
    stats = core.stats()
    assert (stats.ids_served, stats.batches, stats.ids_received) == (5, 2, 10)
    core.close()
    assert core.take() == (None, False) and core.stats().ids_served == 5


def test_the_refill_starts_once_ten_percent_of_a_batch_is_used() -> None:
    core = SupplyCore()
    assert core.begin_refill() and not core.begin_refill(), "single flight"
    core.accept(list(range(1, 101)))
    core.refilling = False
    starts = [core.take()[1] for _ in range(100)]
    assert starts.index(True) == 10 and starts.count(True) == 1
    assert core.begin_refill() and core.accept([1000])
    assert not core.begin_refill(), "the next batch is there"


def test_an_invalid_tag_fails_locally() -> None:
    with Client(["http://127.0.0.1:9"]) as c:
        for bad in ["", "a/b", "x" * 129]:
            with pytest.raises(InvalidTagError):
                c.segment(bad)
        assert c.stats().batches == 0 and c.down_servers() == []


def test_an_adaptive_supply_doubles_when_callers_wait_and_halves_when_idle() -> None:
    core = SupplyCore(10, 40)
    core.starve()  # an empty supply is no sign of demand
    assert core.begin_refill() and core.count == 10
    counts = []
    for first in (1, 100, 200, 300):
        assert core.accept(list(range(first, first + 10)))
        core.refilling = False
        while core.take()[0] is not None:
            pass
        core.starve()  # a caller found both batches spent
        assert core.begin_refill()
        counts.append(core.count)
    assert counts == [20, 40, 40, 40]
    core.accept([1000, 1001])
    core.refilling = False
    core.promoted_at -= SupplyCore.SHRINK_AFTER + 1  # the last batch lasted over a minute
    assert core.take()[0] == 1000
    assert core.count == 20 and core.stats().batch_size == 20
    assert SupplyCore(10, 10).count == 10


def test_max_batch_is_checked() -> None:
    for bad in (5, 100_001, "x"):
        with pytest.raises(ConfigError):
            Client(["http://a:1"], batch=10, max_batch=bad)  # type: ignore[arg-type]
    Client(["http://a:1"], batch=10, max_batch=10).close()


def test_the_catch_up_asks_past_the_floor_in_one_request_within_the_server_limit() -> None:
    # Answer ended at 500, floor 1000, batch 100: 500 ids to reach the floor, then a batch.
    assert catch_up_count(1000, 500, 100) == 600
    assert catch_up_count(1000, 1000, 100) == 100
    assert catch_up_count(6_000_000, 1_000_000, 100) == MAX_BATCH
    assert catch_up_count(2**63 - 1, 1, 100) == MAX_BATCH
    assert catch_up_count(10, 5, MAX_BATCH) == MAX_BATCH


def test_an_answer_wholly_behind_the_floor_is_read_from_its_tail_only() -> None:
    assert behind_tail(b'{"biz_tag":"t","ids":["7","8","9"]}\n', SEG, 9) == Behind(3, 9)
    assert behind_tail(b'{"ids":["5"]}', SNOW, 100) == Behind(1, 5)
    assert interpret("s", 200, b'{"ids":["5"]}', SNOW, 100) == Behind(1, 5)
    # Above the floor, no floor yet, another shape, more ids than asked: parsed whole.
    assert behind_tail(b'{"biz_tag":"t","ids":["9","10"]}', SEG, 9) is None
    assert behind_tail(b'{"ids":["5"]}', SNOW, 0) is None
    assert behind_tail(b'{"ids":[5]}', SNOW, 100) is None
    assert behind_tail(b'{"ids":["5"],"x":1}', SNOW, 100) is None
    assert behind_tail(b'{"ids":["0"]}', SNOW, 100) is None
    assert behind_tail(b'{"ids":["1","2","3","4"]}', SNOW, 100) is None
    assert interpret("s", 200, b'{"biz_tag":"t","ids":["9","10"]}', SEG, 9) == [9, 10]
