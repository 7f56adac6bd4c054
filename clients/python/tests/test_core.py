"""The pure parts: tag rule, settings, body validation, refusal vs failure, backoff, the server
order, the range buffer and its floor, the demand rule, the catch-up. No server needed."""

from __future__ import annotations

import json

import pytest

from leafid_client import (
    Client,
    ConfigError,
    InvalidTagError,
    RejectedError,
    ServerFault,
    UnavailableError,
    valid_tag,
)
from leafid_client._servers import Endpoint, ServerSet, backoff
from leafid_client._supply import SupplyCore, catch_up_count, next_size
from leafid_client._wire import BatchRequest, ServerFailure, interpret, parse_ranges

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
        dict(servers=["ftp://a:1"]),
        dict(servers=["a:1"]),
        dict(servers=["http://a:1?x=1"]),
        dict(servers=["http://a:99999"]),
        dict(servers=["http://a:1"], batch=0),
        dict(servers=["http://a:1"], batch=1_000_001),
        dict(servers=["http://a:1"], target_lifetime=0),
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
    ep = Endpoint.parse("https://ids.example.com")
    assert (ep.secure, ep.port, ep.host_header) == (True, 443, "ids.example.com")
    assert Endpoint.parse("https://h:8443").host_header == "h:8443"


def runs(*pairs: "tuple[object, object]", **extra: object) -> bytes:
    doc = {"ranges": [{"first": f, "last": l} for f, l in pairs]}
    doc.update(extra)
    return json.dumps(doc).encode()


def test_a_valid_batch_is_read_exactly() -> None:
    top = 2**63 - 1
    raw = runs((str(top - 2), str(top)), biz_tag="t", count=3)
    assert parse_ranges(raw, SEG) == [(top - 2, top)]
    assert parse_ranges(runs(("1", "1"), ("5", "6"), count=3), SNOW) == [(1, 1), (5, 6)]
    # JSON numbers are not what stringify_ids=true asked for (vectors/responses.json).
    with pytest.raises(ValueError):
        parse_ranges(runs((7, 7), count=1), SNOW)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1,2]",
        body(biz_tag="t", count=1),
        runs(biz_tag="t", count=0),
        runs(("1", "4"), biz_tag="t", count=4),  # more than asked
        runs(("1", "2"), biz_tag="t", count=3),  # sizes do not add up
        runs(("1", "2"), biz_tag="t"),  # no count
        runs(("1", "2"), biz_tag="t", count="2"),
        runs(("0", "1"), biz_tag="t", count=2),
        runs(("2", "1"), biz_tag="t", count=0),
        runs(("1", "2"), ("2", "2"), biz_tag="t", count=3),  # overlapping
        runs(("5", "5"), ("3", "3"), biz_tag="t", count=2),  # decreasing
        runs(("-1", "1"), biz_tag="t", count=3),
        runs((" 1", "1"), biz_tag="t", count=1),
        runs(("01", "1"), biz_tag="t", count=1),
        runs(("1e3", "1e3"), biz_tag="t", count=1),
        runs((1.0, 1.0), biz_tag="t", count=1),
        runs((True, True), biz_tag="t", count=1),
        runs((str(2**63), str(2**63)), biz_tag="t", count=1),
        runs(("1", "1"), biz_tag="u", count=1),
        runs(("1", "1"), count=1),
        json.dumps({"biz_tag": "t", "count": 1, "ranges": ["1"]}).encode(),
    ],
)
def test_a_body_that_is_not_a_batch_is_refused_whole(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_ranges(raw, SEG)
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
        (401, b"<html>login</html>"),
        (403, body(code="unauthorized", message="m")),
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


def drain(core: SupplyCore) -> "list[int]":
    out = []
    while True:
        i, _ = core.take()
        if i is None:
            return out
        out.append(i)


def test_the_floor_cuts_what_is_not_above_the_last_batch() -> None:
    core = SupplyCore()
    assert core.take() == (None, False)
    assert core.accept([(10, 12)]) is None
    assert drain(core) == [10, 11, 12]
    assert core.accept([(5, 6), (12, 12)]) == 12, "nothing above the floor: no batch"
    assert core.discarded == 3 and core.ahead is None
    assert core.accept([(8, 9), (11, 14)]) is None  # the trimmed part of a run counts too
    assert core.discarded == 7
    assert drain(core) == [13, 14]
    stats = core.stats()
    assert (stats.ids_served, stats.batches, stats.ids_received) == (5, 2, 12)
    core.drop()
    assert core.take() == (None, False) and core.stats().ids_served == 5


def test_a_batch_of_several_runs_is_served_in_order() -> None:
    core = SupplyCore()
    core.accept([(1, 3), (10, 10), (20, 22)])
    assert drain(core) == [1, 2, 3, 10, 20, 21, 22]
    assert core.stats().ids_served == 7


def test_the_local_path_is_one_step_of_the_piece_in_use() -> None:
    core = SupplyCore()
    core.accept([(100, 199)])
    assert core.take()[0] == 100  # a piece is current now: 100..=109 (the preload mark)
    taken = [next(core.current) for _ in range(5)]
    assert taken == [101, 102, 103, 104, 105]
    assert core.stats().ids_served == 6
    assert [next(core.current) for _ in range(4)] == [106, 107, 108, 109]
    with pytest.raises(StopIteration):
        next(core.current)  # spent: the slow path moves on
    assert core.take() == (110, True) and core.stats().ids_served == 11


def test_ids_near_the_top_are_exact() -> None:
    top = 2**63 - 1
    core = SupplyCore()
    core.accept([(top - 2, top)])
    assert drain(core) == [top - 2, top - 1, top]
    assert core.stats().ids_served == 3


def test_the_refill_starts_once_ten_percent_of_a_batch_is_used() -> None:
    core = SupplyCore()
    assert core.begin_refill() and not core.begin_refill(), "single flight"
    core.accept([(1, 50), (61, 110)])
    core.refilling = False
    starts = [core.take()[1] for _ in range(100)]
    assert starts.index(True) == 10 and starts.count(True) == 1
    assert core.begin_refill() and core.accept([(1000, 1000)]) is None
    assert not core.begin_refill(), "the next batch is there"


def test_the_demand_rule_grows_shrinks_and_keeps_its_bounds() -> None:
    rule = dict(target=1.0, minimum=10, maximum=1000)
    # Projected lifetime elapsed * size / used.
    # 10 of 100 ids used: lifetime 10 x elapsed; within 0.5 s..=2 s the size stays.
    assert next_size(100, size=100, used=10, elapsed=0.01, starved=False, **rule) == 200
    assert next_size(100, size=100, used=10, elapsed=0.049, starved=False, **rule) == 200
    assert next_size(100, size=100, used=10, elapsed=0.051, starved=False, **rule) == 100
    assert next_size(100, size=100, used=10, elapsed=0.1, starved=False, **rule) == 100
    assert next_size(100, size=100, used=10, elapsed=0.199, starved=False, **rule) == 100
    assert next_size(100, size=100, used=10, elapsed=0.201, starved=False, **rule) == 50
    assert next_size(100, size=100, used=10, elapsed=5.0, starved=False, **rule) == 50
    # A starved supply doubles whatever the projection says.
    assert next_size(100, size=100, used=10, elapsed=5.0, starved=True, **rule) == 200
    # Bounds.
    assert next_size(800, size=800, used=800, elapsed=0, starved=False, **rule) == 1000
    assert next_size(1000, size=1000, used=1, elapsed=0, starved=True, **rule) == 1000
    assert next_size(12, size=12, used=1, elapsed=60, starved=False, **rule) == 10
    assert next_size(10, size=10, used=1, elapsed=60, starved=False, **rule) == 10
    # used 0 counts as 1, elapsed below 1 ms as 1 ms.
    assert next_size(10, size=10, used=0, elapsed=0, starved=False, **rule) == 20


def test_a_supply_sizes_each_request_from_the_batch_in_use() -> None:
    now = [0.0]
    core = SupplyCore(10, 40, target=1.0, clock=lambda: now[0])
    core.starve()  # an empty supply is no sign of demand
    assert core.begin_refill() and core.count == 10
    counts = []
    for first in (1, 100, 200, 300):
        assert core.accept([(first, first + core.count - 1)]) is None
        core.refilling = False
        drain(core)
        core.starve()  # a caller found both batches spent
        assert core.begin_refill()
        counts.append(core.count)
    assert counts == [20, 40, 40, 40]
    core.refilling = False
    core.accept([(1000, 1039)])
    core.take()
    now[0] += 100.0  # 1 of 40 ids in 100 s: it would last 4000 s
    assert core.begin_refill() and core.count == 20 and core.stats().batch_size == 20
    assert SupplyCore(10, 10).count == 10
    assert SupplyCore(1000, 10**6, limit=100_000).max_count == 100_000


def test_an_invalid_tag_fails_locally() -> None:
    with Client(["http://127.0.0.1:9"]) as c:
        for bad in ["", "a/b", "x" * 129]:
            with pytest.raises(InvalidTagError):
                c.segment(bad)
        assert c.stats().batches == 0 and c.down_servers() == []


def test_max_batch_is_checked() -> None:
    for bad in (5, 1_000_001, "x"):
        with pytest.raises(ConfigError):
            Client(["http://a:1"], batch=10, max_batch=bad)  # type: ignore[arg-type]
    Client(["http://a:1"], batch=10, max_batch=10).close()
    Client(["http://a:1"], batch=1_000_000).close()


def test_the_catch_up_asks_past_the_floor_in_one_request_within_the_route_limit() -> None:
    # Answer ended at 500, floor 1000, size 100: 500 ids to reach the floor, then a batch.
    assert catch_up_count(1000, 500, 100, 10**6) == 600
    assert catch_up_count(1000, 1000, 100, 10**6) == 100
    assert catch_up_count(6_000_000, 1_000_000, 100, 10**6) == 10**6
    assert catch_up_count(6_000_000, 1_000_000, 100, 100_000) == 100_000
    assert catch_up_count(2**63 - 1, 1, 100, 10**6) == 10**6
    assert catch_up_count(10, 5, 10**6, 10**6) == 10**6


def test_errors_name_their_cause() -> None:
    assert "missing" in str(InvalidTagError(None)) and "'None'" not in str(InvalidTagError(None))
    assert "int" in str(InvalidTagError(5))
    cold = str(UnavailableError(0.0, None, 0.0))
    assert "within the 0 ms wait" in cold and "no server answered" not in cold
    lag = UnavailableError(5.0, ServerFault("http://b", "behind", "its ids lie below"), 5.0)
    assert "http://b" in str(lag) and "lags behind" in str(lag)
    down = UnavailableError(5.0, ServerFault("http://a", "transport", "refused"), 5.0)
    assert "every server failed" in str(down) and "http://a" in str(down)


def test_while_a_refill_runs_pieces_can_be_cut_short() -> None:
    # The asyncio client's setting: a caller yields to the loop between two pieces.
    core = SupplyCore()
    core.chunk = 4
    core.accept([(1, 100)])
    ids = []
    while True:
        i, refill = core.take()
        ids.append(i)
        if refill:
            break
    assert ids == list(range(1, 12)) and core.current_size == 4  # 11..=14 after the mark
    core.refilling = True
    assert drain(core) == list(range(12, 101))
