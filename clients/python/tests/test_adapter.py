"""The conformance adapter speaks PROTOCOL.md: one JSON answer per command, ids as decimal
strings, errors grouped by kind and code, close() exits 0 with nothing left running."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest

from leafid_server import LeafidServer, free_low_port

ADAPTER = Path(__file__).resolve().parents[1] / "conformance-adapter"


class Adapter:
    def __init__(self, mode: str) -> None:
        self.proc = subprocess.Popen(
            [str(ADAPTER)] + (["--async"] if mode == "async" else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_the_adapter_follows_the_protocol(mode: str, shared_pair: List[LeafidServer]) -> None:
    a = Adapter(mode)
    try:
        bad = a.send({"op": "open", "servers": ["ftp://x"], "batch": 10, "request_timeout_ms": 500,
                      "wait_timeout_ms": 1000, "backoff_min_ms": 20, "backoff_max_ms": 200})
        assert bad["ok"] is False and bad["error"]["kind"] == "config"
        dead = f"http://127.0.0.1:{free_low_port()}"
        opened = a.send({"op": "open", "servers": [dead] + [s.url for s in shared_pair],
                         "batch": 10, "request_timeout_ms": 500, "wait_timeout_ms": 1000,
                         "backoff_min_ms": 20, "backoff_max_ms": 200})
        assert opened == {"ok": True}
        r = a.send({"op": "take", "engine": "segment", "tag": "leaf-segment-test", "callers": 3,
                    "per_caller": 40, "pause_ms": 0})
        assert r["ok"] and r["errors"] == [] and len(r["ids"]) == 3
        ids = [int(i) for lst in r["ids"] for i in lst]
        assert all(isinstance(i, str) for lst in r["ids"] for i in lst)
        assert len(set(ids)) == 120
        r = a.send({"op": "take", "engine": "snowflake", "callers": 2, "per_caller": 5,
                    "pause_ms": 1})
        assert r["ok"] and sum(len(x) for x in r["ids"]) == 10
        r = a.send({"op": "take", "engine": "segment", "tag": "no-such-tag", "callers": 2,
                    "per_caller": 2, "pause_ms": 0})
        assert r["errors"] == [{"kind": "rejected", "code": "unknown_biz_tag", "count": 4}]
        r = a.send({"op": "take", "engine": "segment", "tag": "a/b", "callers": 1,
                    "per_caller": 3, "pause_ms": 0})
        assert r["errors"] == [{"kind": "invalid_tag", "code": "", "count": 3}]
        s = a.send({"op": "stats"})
        assert s["ok"] and s["ids_served"] == 130 and s["failovers"] == 1
        assert s["batches"] >= 3 and s["discarded_ids"] >= 0 and s["batch_size"] >= 10
        assert a.send({"op": "close"}) == {"ok": True}
        assert a.proc.wait(10) == 0
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
            a.proc.wait()


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_the_adapter_takes_formatted_texts(mode: str, shared_pair: List[LeafidServer]) -> None:
    tag = f"py-adapter-orders-{mode}"
    shared_pair[0].create_tag(tag, step=100, format={
        "prefix": "ORD-", "date": "yyyyMMdd", "width": 8, "reset": "daily", "time_zone": "UTC"})
    a = Adapter(mode)
    try:
        opened = a.send({"op": "open", "servers": [s.url for s in shared_pair], "batch": 10,
                         "request_timeout_ms": 500, "wait_timeout_ms": 1000,
                         "backoff_min_ms": 20, "backoff_max_ms": 200})
        assert opened == {"ok": True}
        r = a.send({"op": "take", "engine": "formatted", "tag": tag, "callers": 3,
                    "per_caller": 40, "pause_ms": 0})
        assert r["ok"] and r["errors"] == [] and len(r["ids"]) == 3
        texts = [i for lst in r["ids"] for i in lst]
        assert len(set(texts)) == 120
        assert all(re.fullmatch(r"ORD-[0-9]{8}[0-9]{8}", i) for i in texts)
        assert all(lst == sorted(lst) for lst in r["ids"])
        r = a.send({"op": "take", "engine": "formatted", "tag": "leaf-segment-test",
                    "callers": 2, "per_caller": 2, "pause_ms": 0})
        assert r["errors"] == [{"kind": "rejected", "code": "not_formatted", "count": 4}]
        s = a.send({"op": "stats"})
        assert s["ok"] and s["ids_served"] == 120 and s["failovers"] == 0
        assert a.send({"op": "close"}) == {"ok": True}
        assert a.proc.wait(10) == 0
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
            a.proc.wait()


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_the_adapter_answers_bounds_and_takes_a_clock_offset(
    mode: str, shared_pair: List[LeafidServer]
) -> None:
    """``bounds`` answers the route's ids as decimal strings, an empty range is
    rejected/invalid_time_range; ``clock_offset_ms`` reaches the formatted supply's clock (a
    day ahead: today's texts are all of an ended period, none handed out, all discarded)."""
    tag = f"py-adapter-offset-{mode}"
    shared_pair[0].create_tag(tag, step=100, format={
        "prefix": "ORD-", "date": "yyyyMMdd", "width": 8, "reset": "daily", "time_zone": "UTC"})
    a = Adapter(mode)
    try:
        opened = a.send({"op": "open", "servers": [s.url for s in shared_pair], "batch": 10,
                         "request_timeout_ms": 500, "wait_timeout_ms": 300,
                         "backoff_min_ms": 20, "backoff_max_ms": 200,
                         "clock_offset_ms": 86_400_000})
        assert opened == {"ok": True}
        frm, to = "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.500Z"
        r = a.send({"op": "bounds", "from": frm, "to": to})
        query = urllib.parse.urlencode({"from": frm, "to": to, "stringify_ids": "true"})
        url = f"{shared_pair[1].url}/api/v1/snowflake/bounds?{query}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            want = json.loads(resp.read())
        assert r == {"ok": True, "min_id": want["min_id"], "max_id": want["max_id"]}
        r = a.send({"op": "bounds", "from": to, "to": to})
        assert r["ok"] is False
        assert (r["error"]["kind"], r["error"]["code"]) == ("rejected", "invalid_time_range")
        r = a.send({"op": "take", "engine": "formatted", "tag": tag, "callers": 1,
                    "per_caller": 1, "pause_ms": 0})
        assert r["ids"] == [[]] and r["errors"] == [{"kind": "unavailable", "code": "", "count": 1}]
        s = a.send({"op": "stats"})
        assert s["ok"] and s["ids_served"] == 0 and s["discarded_ids"] >= 10
        assert s["failovers"] == 0
        assert a.send({"op": "close"}) == {"ok": True}
        assert a.proc.wait(10) == 0
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
            a.proc.wait()
