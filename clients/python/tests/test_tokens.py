"""Caller tokens and quotas (issue 44) in both clients, against scripted local HTTP servers: the
header sent, the token never shown, leafid's 401/403 final, a proxy's 401 a failover, a 429
``quota_exhausted`` waited out on the same server, one past the wait timeout a
:class:`ThrottledError`. (The conformance suite's ``tokens`` scenario runs the same rules
against real servers.)"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Tuple

import pytest

from leafid_client import (
    AsyncClient,
    Client,
    ConfigError,
    RejectedError,
    ThrottledError,
)

SECRET = "lid_0123456789abcdefSECRET"

Reply = Tuple[int, Optional[str], bytes]


def ids(first: int, last: int) -> Reply:
    body = {
        "biz_tag": "orders",
        "count": last - first + 1,
        "ranges": [{"first": str(first), "last": str(last)}],
    }
    return 200, None, json.dumps(body).encode()


def refusal(status: int, retry_after: Optional[str], code: str) -> Reply:
    return status, retry_after, json.dumps({"code": code, "message": f"{code} here"}).encode()


class Fake:
    """A local server answering its replies in order (the last again), recording the
    ``Authorization`` of each id request."""

    def __init__(self, *replies: Reply) -> None:
        self.auth: List[str] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/health"):
                    status, retry, body = 200, None, b"{}"
                else:
                    fake.auth.append(self.headers.get("Authorization") or "")
                    status, retry, body = replies[min(len(fake.auth), len(replies)) - 1]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if retry is not None:
                    self.send_header("Retry-After", retry)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake() -> Iterator[Callable[..., Fake]]:
    made: List[Fake] = []

    def make(*replies: Reply) -> Fake:
        f = Fake(*replies)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


def settings(wait: float) -> dict:
    return dict(
        batch=10, max_batch=10, wait_timeout=wait, backoff_min=0.02, backoff_max=0.1, token=SECRET
    )


# Each scenario runs on the blocking client and on the asyncio one: `take(servers, wait, what)`
# returns the id (or raises) and the client's failovers.


def take_blocking(servers: List[str], wait: float, what: str = "segment") -> Tuple[Any, int]:
    with Client(servers, **settings(wait)) as c:
        try:
            if what == "snowflake":
                return c.next_snowflake_id(), c.stats().failovers
            return c.next_id("orders"), c.stats().failovers
        finally:
            take_blocking.failovers = c.stats().failovers  # type: ignore[attr-defined]


def take_async(servers: List[str], wait: float, what: str = "segment") -> Tuple[Any, int]:
    async def run() -> Tuple[Any, int]:
        async with AsyncClient(servers, **settings(wait)) as c:
            try:
                if what == "snowflake":
                    return await c.next_snowflake_id(), c.stats().failovers
                return await c.segment("orders").next_id(), c.stats().failovers
            finally:
                take_async.failovers = c.stats().failovers  # type: ignore[attr-defined]

    return asyncio.run(run())


TAKES = [pytest.param(take_blocking, id="blocking"), pytest.param(take_async, id="asyncio")]


@pytest.mark.parametrize("take", TAKES)
def test_every_request_carries_the_token(take: Callable, fake: Callable[..., Fake]) -> None:
    a = fake(ids(1, 10))
    assert take([a.url], 2.0)[0] == 1
    assert a.auth and all(h == f"Bearer {SECRET}" for h in a.auth), a.auth


def test_the_token_is_never_shown_and_checked(fake: Callable[..., Fake]) -> None:
    a = fake(ids(1, 10))
    with Client([a.url], token=SECRET) as c:
        assert SECRET not in repr(c) and SECRET not in str(c)
        assert SECRET not in repr(c.segment("orders"))
    ac = AsyncClient([a.url], token=SECRET)
    assert SECRET not in repr(ac)
    for bad in ("", "two words", 5):
        with pytest.raises(ConfigError):
            Client([a.url], token=bad)  # type: ignore[arg-type]
    # Without a token no header is sent.
    p = fake(ids(1, 10))
    with Client([p.url]) as c:
        c.next_id("orders")
    assert p.auth == [""]


@pytest.mark.parametrize("take", TAKES)
@pytest.mark.parametrize("status,code", [(401, "unauthorized"), (403, "forbidden")])
def test_leafid_401_and_403_are_final_and_no_failover(
    take: Callable, status: int, code: str, fake: Callable[..., Fake]
) -> None:
    for what in ("segment", "snowflake"):
        a = fake(refusal(status, None, code))
        b = fake(ids(1, 10))
        with pytest.raises(RejectedError) as e:
            take([a.url, b.url], 2.0, what)
        assert (e.value.status, e.value.code) == (status, code)
        assert b.auth == [], "the next server was asked"
        assert take.failovers == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("take", TAKES)
def test_a_proxys_401_without_leafids_body_is_a_failover(
    take: Callable, fake: Callable[..., Fake]
) -> None:
    a = fake((401, None, b"<html>login</html>"))
    b = fake(ids(1, 10))
    assert take([a.url, b.url], 2.0) == (1, 1)


@pytest.mark.parametrize("take", TAKES)
def test_quota_exhausted_waits_retry_after_on_the_same_server(
    take: Callable, fake: Callable[..., Fake]
) -> None:
    a = fake(refusal(429, "1", "quota_exhausted"), ids(1, 10))
    b = fake(ids(1000, 1009))
    t0 = time.monotonic()
    assert take([a.url, b.url], 5.0) == (1, 0)
    took = time.monotonic() - t0
    assert 0.95 <= took < 4, f"{took:.3f} s: Retry-After not honoured"
    assert len(a.auth) == 2, "the same server asked again"
    assert b.auth == [], "never another server"


@pytest.mark.parametrize("take", TAKES)
def test_quota_exhausted_past_the_wait_timeout_is_throttled(
    take: Callable, fake: Callable[..., Fake]
) -> None:
    a = fake(refusal(429, "3600", "quota_exhausted"))
    b = fake(ids(1, 10))
    t0 = time.monotonic()
    with pytest.raises(ThrottledError) as e:
        take([a.url, b.url], 2.0)
    assert time.monotonic() - t0 < 1, "it waited in vain"
    assert (e.value.code, e.value.retry_after) == ("quota_exhausted", 3600)
    assert b.auth == []
    assert take.failovers == 0  # type: ignore[attr-defined]
    # A proxy's 429 (not leafid's code) stays a failover.
    p = fake(refusal(429, "1", "rate_limited"))
    assert take([p.url, b.url], 2.0)[1] == 1
