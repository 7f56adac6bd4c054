"""The conformance adapter of the Python client (clients/conformance/PROTOCOL.md).

Reads one JSON command per line on stdin, answers one JSON line on stdout. It translates the
driver's commands into calls of leafid_client's public API and never talks HTTP itself.

By default it drives the blocking ``Client`` (one thread per caller). With
``LEAFID_PY_ADAPTER=async`` (or ``--async``) it drives ``AsyncClient`` instead (one task per
caller; stdin is read on the event loop, so the client's tasks also run between commands).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from leafid_client import (  # noqa: E402
    AsyncClient,
    Bounds,
    Client,
    ConfigError,
    InvalidTagError,
    RejectedError,
    Stats,
    ThrottledError,
    UnavailableError,
)


def kind_of(e: BaseException) -> Tuple[str, str]:
    """The protocol's error kind and code of an exception."""
    if isinstance(e, RejectedError):
        return "rejected", e.code
    if isinstance(e, ThrottledError):
        return "throttled", e.code
    if isinstance(e, UnavailableError):
        return "unavailable", ""
    if isinstance(e, InvalidTagError):
        return "invalid_tag", ""
    if isinstance(e, ConfigError):
        return "config", ""
    return "internal", ""


def failure(e: BaseException) -> Dict[str, Any]:
    kind, code = kind_of(e)
    message = f"{type(e).__name__}: {e}"
    return {"ok": False, "error": {"kind": kind, "code": code, "message": message}}


def settings(cmd: Dict[str, Any]) -> Dict[str, Any]:
    """The client's keyword settings from an ``open`` command."""

    def ms(key: str, default: float) -> float:
        return float(cmd.get(key, default)) / 1000.0

    lifetime = cmd.get("target_lifetime_ms")
    out: Dict[str, Any] = dict(
        batch=cmd.get("batch", 1000),
        max_batch=cmd.get("max_batch"),
        target_lifetime=1.0 if lifetime is None else float(lifetime) / 1000.0,
        request_timeout=ms("request_timeout_ms", 2000),
        wait_timeout=ms("wait_timeout_ms", 5000),
        backoff_min=ms("backoff_min_ms", 50),
        backoff_max=ms("backoff_max_ms", 5000),
    )
    if isinstance(cmd.get("token"), str):
        out["token"] = cmd["token"]
    offset_ms = cmd.get("clock_offset_ms")
    if offset_ms is not None:
        # The client's public clock hook: the system clock plus the offset.
        offset = float(offset_ms) / 1000.0
        out["clock"] = lambda: time.time() + offset
    return out


def instant(text: object) -> datetime:
    """An RFC 3339 UTC instant with milliseconds (``2026-11-27T00:00:00.000Z``) as an aware
    datetime (``fromisoformat`` takes ``Z`` only from Python 3.11 on)."""
    if not isinstance(text, str) or not text.endswith("Z"):
        raise ValueError(f"not an RFC 3339 UTC instant: {text!r}")
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in text else "%Y-%m-%dT%H:%M:%S"
    return datetime.strptime(text[:-1], fmt).replace(tzinfo=timezone.utc)


def bounds_args(cmd: Dict[str, Any]) -> Tuple[datetime, datetime]:
    return instant(cmd.get("from")), instant(cmd.get("to"))


def bounds_reply(b: Bounds) -> Dict[str, Any]:
    return {"ok": True, "min_id": str(b.min_id), "max_id": str(b.max_id)}


def stats_reply(s: Stats) -> Dict[str, Any]:
    return {
        "ok": True,
        "ids_served": s.ids_served,
        "batches": s.batches,
        "failovers": s.failovers,
        "discarded_ids": s.discarded_ids,
        "batch_size": s.batch_size,
    }


def take_reply(
    ids: List[List[str]], errors: List["Counter[Tuple[str, str]]"], slowest: List[float]
) -> Dict[str, Any]:
    """The take answer; ``slowest``: each caller's longest single call, in seconds."""
    total: "Counter[Tuple[str, str]]" = Counter()
    for c in errors:
        total.update(c)
    grouped = [{"kind": k, "code": c, "count": n} for (k, c), n in sorted(total.items())]
    return {"ok": True, "ids": ids, "errors": grouped, "max_call_ms": max(slowest, default=0.0) * 1000.0}


def take_args(cmd: Dict[str, Any]) -> Tuple[str, Any, int, int, float]:
    engine = cmd.get("engine")
    if engine not in ("segment", "snowflake", "formatted"):
        raise ValueError(f"unknown engine {engine!r}")
    return (
        engine,
        cmd.get("tag"),
        int(cmd.get("callers", 1)),
        int(cmd.get("per_caller", 1)),
        float(cmd.get("pause_ms", 0)) / 1000.0,
    )


# -- blocking: Client, one thread per caller ----------------------------------------------------


def take(client: Client, cmd: Dict[str, Any]) -> Dict[str, Any]:
    engine, tag, callers, per_caller, pause = take_args(cmd)
    call: Callable[[], object]
    if engine == "segment":
        call = lambda: client.next_id(tag)  # noqa: E731
    elif engine == "formatted":
        # The texts, as received (str() of a str is itself).
        call = lambda: client.next_formatted(tag)  # noqa: E731
    else:
        call = client.next_snowflake_id
    ids: List[List[str]] = [[] for _ in range(callers)]
    errors: List["Counter[Tuple[str, str]]"] = [Counter() for _ in range(callers)]
    slowest = [0.0] * callers
    start = threading.Barrier(callers)

    def caller(k: int) -> None:
        mine, errs = ids[k], errors[k]
        start.wait()
        for _ in range(per_caller):
            began = time.monotonic()
            try:
                mine.append(str(call()))
            except Exception as e:  # every error a caller sees is reported, grouped
                errs[kind_of(e)] += 1
            slowest[k] = max(slowest[k], time.monotonic() - began)
            if pause:
                time.sleep(pause)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return take_reply(ids, errors, slowest)


def main_blocking() -> int:
    client: Optional[Client] = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
            op = cmd.get("op")
            if op == "open":
                if client is not None:
                    client.close()
                client = Client(cmd.get("servers"), **settings(cmd))
                reply: Dict[str, Any] = {"ok": True}
            elif op == "close":
                if client is not None:
                    client.close()
                left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
                answer(failure(RuntimeError(f"threads left: {left}")) if left else {"ok": True})
                return 0
            elif client is None:
                raise RuntimeError(f"{op} before open")
            elif op == "take":
                reply = take(client, cmd)
            elif op == "bounds":
                reply = bounds_reply(client.snowflake_bounds(*bounds_args(cmd)))
            elif op == "stats":
                reply = stats_reply(client.stats())
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:
            print(f"adapter: {type(e).__name__}: {e}", file=sys.stderr)
            reply = failure(e)
        answer(reply)
    if client is not None:
        client.close()
    return 0


# -- asyncio: AsyncClient, one task per caller ---------------------------------------------------


async def take_async(client: AsyncClient, cmd: Dict[str, Any]) -> Dict[str, Any]:
    engine, tag, callers, per_caller, pause = take_args(cmd)
    call: Callable[[], Awaitable[object]]
    if engine == "segment":
        call = lambda: client.next_id(tag)  # noqa: E731
    elif engine == "formatted":
        call = lambda: client.next_formatted(tag)  # noqa: E731
    else:
        call = client.next_snowflake_id
    ids: List[List[str]] = [[] for _ in range(callers)]
    errors: List["Counter[Tuple[str, str]]"] = [Counter() for _ in range(callers)]
    slowest = [0.0] * callers

    async def caller(k: int) -> None:
        mine, errs = ids[k], errors[k]
        for _ in range(per_caller):
            began = time.monotonic()
            try:
                mine.append(str(await call()))
            except Exception as e:  # every error a caller sees is reported, grouped
                errs[kind_of(e)] += 1
            slowest[k] = max(slowest[k], time.monotonic() - began)
            if pause:
                await asyncio.sleep(pause)

    await asyncio.gather(*(caller(k) for k in range(callers)))
    return take_reply(ids, errors, slowest)


async def main_async() -> int:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    client: Optional[AsyncClient] = None
    while True:
        line = await stdin.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
            op = cmd.get("op")
            if op == "open":
                if client is not None:
                    await client.close()
                client = AsyncClient(cmd.get("servers"), **settings(cmd))
                reply: Dict[str, Any] = {"ok": True}
            elif op == "close":
                if client is not None:
                    await client.close()
                me = asyncio.current_task()
                left = [repr(t) for t in asyncio.all_tasks() if t is not me]
                left += [t.name for t in threading.enumerate() if t is not threading.main_thread()]
                answer(failure(RuntimeError(f"left running: {left}")) if left else {"ok": True})
                return 0
            elif client is None:
                raise RuntimeError(f"{op} before open")
            elif op == "take":
                reply = await take_async(client, cmd)
            elif op == "bounds":
                reply = bounds_reply(await client.snowflake_bounds(*bounds_args(cmd)))
            elif op == "stats":
                reply = stats_reply(client.stats())
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:
            print(f"adapter: {type(e).__name__}: {e}", file=sys.stderr)
            reply = failure(e)
        answer(reply)
    if client is not None:
        await client.close()
    return 0


def answer(reply: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if "--async" in sys.argv[1:] or os.environ.get("LEAFID_PY_ADAPTER") == "async":
        sys.exit(asyncio.run(main_async()))
    sys.exit(main_blocking())
