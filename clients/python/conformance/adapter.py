"""The conformance adapter of the Python client (clients/conformance/PROTOCOL.md).

Reads one JSON command per line on stdin, answers one JSON line on stdout. It translates the
driver's commands into calls of leafid_client's public API and never talks HTTP itself.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from leafid_client import (  # noqa: E402
    Client,
    ConfigError,
    InvalidTagError,
    RejectedError,
    UnavailableError,
)


def kind_of(e: BaseException) -> Tuple[str, str]:
    """The protocol's error kind and code of an exception."""
    if isinstance(e, RejectedError):
        return "rejected", e.code
    if isinstance(e, UnavailableError):
        return "unavailable", ""
    if isinstance(e, InvalidTagError):
        return "invalid_tag", ""
    if isinstance(e, ConfigError):
        return "config", ""
    return "internal", ""


def failure(e: BaseException) -> Dict[str, Any]:
    kind, code = kind_of(e)
    return {"ok": False, "error": {"kind": kind, "code": code, "message": f"{type(e).__name__}: {e}"}}


def open_client(cmd: Dict[str, Any]) -> Client:
    def ms(key: str, default: float) -> float:
        return float(cmd.get(key, default)) / 1000.0

    return Client(
        cmd.get("servers"),  # type: ignore[arg-type]
        batch=cmd.get("batch", 1000),
        request_timeout=ms("request_timeout_ms", 2000),
        wait_timeout=ms("wait_timeout_ms", 5000),
        backoff_min=ms("backoff_min_ms", 50),
        backoff_max=ms("backoff_max_ms", 5000),
    )


def take(client: Client, cmd: Dict[str, Any]) -> Dict[str, Any]:
    engine = cmd.get("engine")
    tag = cmd.get("tag")
    callers = int(cmd.get("callers", 1))
    per_caller = int(cmd.get("per_caller", 1))
    pause = float(cmd.get("pause_ms", 0)) / 1000.0
    if engine == "segment":
        call: Callable[[], int] = lambda: client.next_id(tag)  # type: ignore[arg-type]  # noqa: E731
    elif engine == "snowflake":
        call = client.next_snowflake_id
    else:
        raise ValueError(f"unknown engine {engine!r}")
    ids: List[List[str]] = [[] for _ in range(callers)]
    errors: List[Counter] = [Counter() for _ in range(callers)]
    start = threading.Barrier(callers)

    def caller(k: int) -> None:
        mine, errs = ids[k], errors[k]
        start.wait()
        for _ in range(per_caller):
            try:
                mine.append(str(call()))
            except Exception as e:  # every error a caller sees is reported, grouped
                errs[kind_of(e)] += 1
            if pause:
                time.sleep(pause)

    threads = [threading.Thread(target=caller, args=(k,), name=f"caller-{k}") for k in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total: Counter = Counter()
    for c in errors:
        total.update(c)
    return {
        "ok": True,
        "ids": ids,
        "errors": [{"kind": k, "code": c, "count": n} for (k, c), n in sorted(total.items())],
    }


def main() -> int:
    client: Optional[Client] = None
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
            op = cmd.get("op")
            if op == "open":
                if client is not None:
                    client.close()
                client = open_client(cmd)
                reply: Dict[str, Any] = {"ok": True}
            elif op == "take":
                if client is None:
                    raise RuntimeError("take before open")
                reply = take(client, cmd)
            elif op == "stats":
                if client is None:
                    raise RuntimeError("stats before open")
                s = client.stats()
                reply = {
                    "ok": True,
                    "ids_served": s.ids_served,
                    "batches": s.batches,
                    "failovers": s.failovers,
                    "discarded_ids": s.discarded_ids,
                }
            elif op == "close":
                if client is not None:
                    client.close()
                left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
                if left:
                    reply = failure(RuntimeError(f"threads left after close(): {left}"))
                else:
                    reply = {"ok": True}
                out.write(json.dumps(reply) + "\n")
                out.flush()
                return 0
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:
            print(f"adapter: {type(e).__name__}: {e}", file=sys.stderr)
            reply = failure(e)
        out.write(json.dumps(reply) + "\n")
        out.flush()
    if client is not None:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
