"""The shared client vectors (``clients/conformance/vectors/*.json``) run against this client's
own rule functions: the same files every client's tests read. No server."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest

from leafid_client._supply import catch_up_count, next_size
from leafid_client.errors import RejectedError
from leafid_client._wire import (
    BatchRequest,
    bounds_instants,
    parse_bounds,
    parse_formatted,
    parse_ranges,
    quota_wait,
    refusal_is_final,
    rfc3339_unix_ms,
    valid_tag,
)

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "vectors"


def cases(file: str) -> list:
    doc = json.loads((VECTORS / file).read_text(encoding="utf-8"))
    assert doc["description"] and doc["version"] >= 1 and doc["cases"], file
    return [pytest.param(c, id=c["name"]) for c in doc["cases"]]


@pytest.mark.parametrize("c", cases("errors.json"))
def test_errors(c: dict) -> None:
    if c["status"] == 200:
        pytest.skip("not_formatted: made by parse_formatted, not by the refusal table")
    if refusal_is_final(c["status"], c["code"]):
        got = "reject"
    elif quota_wait(c["status"], c["code"]):
        got = "wait"
    else:
        got = "failover"
    assert got == c["action"]


@pytest.mark.parametrize("c", cases("tags.json"))
def test_tags(c: dict) -> None:
    assert valid_tag(c["tag"]) is c["valid"]


@pytest.mark.parametrize("c", cases("batch.json"))
def test_batch_sizing(c: dict) -> None:
    if c["rule"] == "demand":
        got = next_size(
            c["size"],
            size=c["batch_ids"],
            used=c["used"],
            elapsed=c["elapsed_ms"] / 1000,
            starved=c["starved"],
            target=c["target_ms"] / 1000,
            minimum=c["min"],
            maximum=c["max"],
        )
    else:
        assert c["rule"] == "catch_up"
        got = catch_up_count(c["floor"], c["last"], c["size"], c["limit"])
    assert got == c["want"]


def _instant(text: str) -> datetime.datetime:
    """A vector's instant; Python's datetime holds microseconds, so finer cases are skipped."""
    frac = re.search(r"\.(\d+)", text)
    if frac and len(frac.group(1)) > 6:
        pytest.skip("nanoseconds: finer than a datetime")
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize("c", cases("bounds.json"))
def test_bounds_rounding(c: dict) -> None:
    got = bounds_instants(_instant(c["from"]), _instant(c["to"]))
    assert got == (c["query_from"], c["query_to"])


@pytest.mark.parametrize("c", cases("responses.json"))
def test_responses(c: dict) -> None:
    body = c["body"].encode()
    if c["kind"] == "ranges":
        req = BatchRequest("/r", c["asked"], c["tag"])
        if c["valid"]:
            got = parse_ranges(body, req)
            assert got == [(int(a), int(b)) for a, b in c["runs"]]
            assert got.strict is c.get("strict", False)
        else:
            with pytest.raises(ValueError):
                parse_ranges(body, req)
    else:
        assert c["kind"] == "bounds"
        if c["valid"]:
            assert tuple(parse_bounds(body)) == (int(c["min_id"]), int(c["max_id"]))
        else:
            with pytest.raises(ValueError):
                parse_bounds(body)


@pytest.mark.parametrize("c", cases("rfc3339.json"))
def test_rfc3339(c: dict) -> None:
    if c["valid"]:
        assert rfc3339_unix_ms(c["text"]) == c["unix_ms"]
    else:
        with pytest.raises(ValueError):
            rfc3339_unix_ms(c["text"])


@pytest.mark.parametrize("c", cases("formats.json"))
def test_formats(c: dict) -> None:
    req = BatchRequest.formatted_list(c["tag"], c["asked"])
    body = c["body"].encode()
    if c["result"] == "ok":
        got = parse_formatted("s", body, req)
        assert (got.ids, got.ordered) == (c["ids"], c["ordered"])
        assert round(got.period_end * 1000) == c["period_end_ms"]
    elif c["result"] == "not_formatted":
        with pytest.raises(RejectedError) as e:
            parse_formatted("s", body, req)
        assert (e.value.status, e.value.code) == (200, "not_formatted")
    else:
        assert c["result"] == "fault"
        with pytest.raises(ValueError):
            parse_formatted("s", body, req)
