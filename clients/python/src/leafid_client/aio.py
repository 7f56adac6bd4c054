"""The asyncio client: :class:`AsyncClient` and its handles, for one event loop.

Same semantics as the blocking :class:`~leafid_client.Client`, with tasks instead of threads:
one refill task per supply while it fetches (single flight) and one health task, started when a
server is first marked down. HTTP/1.1 over ``asyncio`` streams (keep-alive, ``Content-Length`` or
chunked bodies), standard library only. :meth:`AsyncClient.close` cancels and awaits every task
and closes every connection.

``next_id`` honours task cancellation and ``asyncio.wait_for``: a cancelled caller leaves the
supply as it was (a refill it started goes on for the next caller).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Dict,
    List,
    Optional,
    Set,
    Tuple,
    TypeVar,
    Union,
)

from ._servers import Endpoint, ServerSet, backoff
from ._settings import Settings, check_clock, check_token
from ._formatted import FormattedCore
from ._supply import Stats, SupplyCore
from ._wire import (
    MAX_FORMATTED_COUNT,
    MAX_SEGMENT_COUNT,
    MAX_SNOWFLAKE_COUNT,
    AllFailed,
    BatchRequest,
    Bounds,
    BoundsRequest,
    Request,
    ServerFailure,
    check_tag,
    throttled,
)
from .client import _tls_context
from .errors import (
    ClientClosedError,
    RejectedError,
    ServerFault,
    ThrottledError,
    UnavailableError,
)

__all__ = ["AsyncClient", "AsyncFormattedSupply", "AsyncSegmentSupply", "AsyncSnowflakeSupply"]

log = logging.getLogger("leafid_client")

T = TypeVar("T")

_IDLE_PER_SERVER = 4
"""Idle keep-alive connections kept per server."""

_MAX_BODY = 64 << 20
"""Largest response body read (a range batch is a few runs, far below it)."""

_YIELD_EVERY = 256
"""While a refill runs, a caller yields to the loop once per this many ids (pieces are cut to
it), so a caller that never awaits anything else still lets the refill's request out and its
answer in."""


_Conn = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _StaleConnection(ConnectionError):
    """A kept-alive connection closed by the server before it answered."""


class _AsyncHttp:
    """Keep-alive HTTP/1.1 connections per server over asyncio streams."""

    def __init__(self, authorization: Optional[str] = None) -> None:
        self._idle: Dict[Endpoint, List[_Conn]] = {}
        self._closed = False
        self._auth_line = "" if authorization is None else f"Authorization: {authorization}\r\n"
        """The ``Authorization`` header line of every request but the health probe, or empty."""

    async def get(
        self, ep: Endpoint, path: str, timeout: float
    ) -> Tuple[int, bytes, Optional[str]]:
        """``GET`` ``path`` on ``ep``: status, body and ``Retry-After``, all of it within
        ``timeout`` seconds."""
        return await asyncio.wait_for(self._get(ep, path), timeout)

    async def _get(self, ep: Endpoint, path: str) -> Tuple[int, bytes, Optional[str]]:
        auth = "" if path == "/health/ready" else self._auth_line
        request = (
            f"GET {ep.prefix}{path} HTTP/1.1\r\nHost: {ep.host_header}\r\n{auth}"
            "Accept: application/json\r\nUser-Agent: leafid-client-python\r\n\r\n"
        ).encode("ascii")
        for attempt in (0, 1):
            if self._closed:
                raise ConnectionAbortedError("client closed")
            idle = self._idle.get(ep)
            conn = idle.pop() if idle else None
            reused = conn is not None
            if conn is None:
                conn = await asyncio.open_connection(
                    ep.host, ep.port, ssl=_tls_context() if ep.secure else None
                )
            reader, writer = conn
            try:
                try:
                    writer.write(request)
                    await writer.drain()
                except ConnectionError:
                    if reused:
                        raise _StaleConnection("connection closed before the request") from None
                    raise
                status, body, keep, retry_after = await _read_response(reader, reused)
            except _StaleConnection:
                writer.close()
                if attempt == 0:
                    continue
                raise
            except BaseException:
                writer.close()
                raise
            if keep and not self._closed and len(self._idle.setdefault(ep, [])) < _IDLE_PER_SERVER:
                self._idle[ep].append(conn)
            else:
                writer.close()
            return status, body, retry_after
        raise AssertionError("unreachable")

    def forget(self, ep: Endpoint) -> None:
        """Closes the idle connections to ``ep`` (it failed: they are likely dead too)."""
        for _, writer in self._idle.pop(ep, []):
            writer.close()

    async def close(self) -> None:
        """Closes every idle connection; no new ones."""
        self._closed = True
        conns = [c for cs in self._idle.values() for c in cs]
        self._idle.clear()
        for _, writer in conns:
            writer.close()
        for _, writer in conns:
            try:
                await writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass


async def _read_response(
    reader: asyncio.StreamReader, reused: bool
) -> Tuple[int, bytes, bool, Optional[str]]:
    """Status, body, whether the connection may be reused, and the ``Retry-After``."""
    retry_after: Optional[str] = None
    try:
        line = await reader.readline()
    except ConnectionError:
        if reused:
            raise _StaleConnection("connection closed before the answer") from None
        raise
    if not line:
        if reused:
            raise _StaleConnection("connection closed before the answer")
        raise ConnectionResetError("connection closed before the answer")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP answer: {line[:80]!r}")
    status = int(parts[1])
    keep = parts[0] == b"HTTP/1.1"
    length: Optional[int] = None
    chunked = False
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n"):
            break
        if not h:
            raise ConnectionResetError("connection closed in the headers")
        name, _, value = h.partition(b":")
        name = name.strip().lower()
        value = value.strip().lower()
        if name == b"content-length":
            length = int(value)
            if not 0 <= length <= _MAX_BODY:
                raise ConnectionError(f"body of {length} bytes")
        elif name == b"transfer-encoding" and value != b"identity":
            chunked = True
        elif name == b"connection":
            keep = value == b"keep-alive" or (keep and value != b"close")
        elif name == b"retry-after":
            retry_after = value.decode("latin-1")
    if chunked:
        chunks = []
        total = 0
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"x", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            total += size
            if total > _MAX_BODY:
                raise ConnectionError("body too large")
            chunks.append(await reader.readexactly(size))
            await reader.readline()
        body = b"".join(chunks)
    elif length is not None:
        body = await reader.readexactly(length)
    else:
        # No length: the body runs to the end of the connection.
        chunks = []
        total = 0
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > _MAX_BODY:
                raise ConnectionError("body too large")
            chunks.append(chunk)
        body = b"".join(chunks)
        keep = False
    return status, body, keep, retry_after


class _AsyncDriver:
    """What drives a supply's core (:class:`SupplyCore` for numbers, :class:`FormattedCore` for
    texts) on the loop: waiting callers, refill tasks. Mixed in before the core; the public
    handles below are the supply object itself. Their public surface is ``next_id``,
    ``try_next_id`` and ``stats``.

    One event loop, one thread: nothing else runs between two awaits, so the local path
    (``next()`` on the piece in use, no await) needs no lock and the switch to the next piece
    happens between two calls, never inside one; the order rules of
    :mod:`leafid_client._supply` follow."""

    if not TYPE_CHECKING:  # the concrete supplies declare the slots
        __slots__ = ()

    _client: "AsyncClient"
    _request_for: Callable[[int], BatchRequest]
    """The batch request for a count."""
    _name: str
    _refilled: Optional[asyncio.Event]
    """Set when a refill ends (successful or not) or the client closes; replaced by a new
    event for each refill. Made on the loop (an Event binds to one on Python 3.9)."""

    if TYPE_CHECKING:  # the core's surface, as the driver uses it
        refilling: bool
        refused: Optional[Union[RejectedError, ThrottledError]]
        last_fault: Optional[ServerFault]
        failed_rounds: int
        count: int
        strict: bool
        floor: Any
        chunk: int

        def take(self) -> Tuple[Any, bool]: ...
        def begin_refill(self) -> bool: ...
        def starve(self) -> None: ...
        def accept(self, batch: Any) -> Any: ...
        def retry(self, server: str, answer: Any) -> Tuple[int, bool]: ...
        def drop(self) -> None: ...
        def pass_through(self, server: str, runs: Any, floor: Any) -> Any: ...

    def _setup(
        self, client: "AsyncClient", request_for: Callable[[int], BatchRequest], name: str
    ) -> None:
        self.chunk = _YIELD_EVERY
        self._client = client
        self._request_for = request_for
        self._name = name
        self._refilled = None

    def try_next_id(self) -> Any:
        """An id of the local batches if they hold one, else ``None``; never waits (the refill
        still starts at the preload mark)."""
        if self._client._closed:
            return None
        id_, refill = self.take()
        if refill:
            self._start_refill()
        return id_

    def late(self) -> None:
        """Counts a text the local path took after its period ended (formatted supplies)."""
        raise AssertionError("numbers have no period")

    async def _next_id_slow(self, timeout: Optional[float], late: bool = False) -> Any:
        if late:
            # The local path took a text whose period had ended: never handed out.
            self.late()
        if self.refilling:
            # While a refill runs, pieces hold at most _YIELD_EVERY ids and the caller yields to
            # the loop here, so one that never awaits anything else still lets the refill's
            # request out and its answer in. Before taking: calls return in the order of ids.
            await asyncio.sleep(0)
        wait = self._client._settings.wait_timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + wait
        waited = False
        while True:
            if self._client._closed:
                raise ClientClosedError("the client is closed")
            id_, refill = self.take()
            if refill:
                self._start_refill()
            if id_ is not None:
                return id_
            if self.strict:
                # Pass-through (a strict tag): this call's own request.
                return await self._pass_through(self.floor, started, deadline, wait)
            if waited and self.refused is not None:
                raise self.refused.copy()
            if not waited:
                self.starve()
            self._start_refill()
            waited = True
            event = self._refilled
            remaining = deadline - loop.time()
            if remaining <= 0 or event is None:
                raise UnavailableError(
                    loop.time() - started, self.last_fault, wait
                )
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def _pass_through(self, floor: Any, started: float, deadline: float, wait: float) -> Any:
        """A strict supply's call (see :mod:`leafid_client._supply`): one request for one id,
        sent now, after the call began, through the usual server order and failover; a refusal
        reaches the caller; failed rounds are retried with backoff until ``deadline``. The id is
        handed out only when above ``floor`` (the floor when the call began)."""
        client = self._client
        s = client._settings
        loop = asyncio.get_running_loop()
        request = self._request_for(1)
        failures = 0
        while True:
            if client._closed:
                raise ClientClosedError("the client is closed")
            try:
                runs, server = await client._fetch(request)
            except AllFailed as e:
                self.failed_rounds += 1
                self.last_fault = e.last
                failures += 1
                pause = backoff(s.backoff_min, s.backoff_max, failures)
            else:
                id_ = self.pass_through(server, runs, floor)
                if id_ is not None:
                    return id_
                pause = 0.0
            if loop.time() + pause >= deadline:
                raise UnavailableError(loop.time() - started, self.last_fault, wait)
            if pause:
                await asyncio.sleep(pause)

    def _start_refill(self) -> None:
        if self.begin_refill():
            self._refilled = asyncio.Event()
            if not self._client._spawn(self._refill()):
                self.refilling = False

    async def _refill(self) -> None:
        """Fetches one batch above the floor into ``ahead``; retries failed rounds with backoff
        for at most the wait timeout."""
        client = self._client
        s = client._settings
        loop = asyncio.get_running_loop()
        deadline = loop.time() + s.wait_timeout
        failures = 0
        request = self._request_for(self.count)
        try:
            while not client._closed:
                try:
                    batch, server = await client._fetch(request)
                except (RejectedError, ThrottledError) as e:
                    self.refused = e
                    return
                except AllFailed as e:
                    self.failed_rounds += 1
                    self.last_fault = e.last
                    failures += 1
                    pause = backoff(s.backoff_min, s.backoff_max, failures)
                else:
                    if client._closed:
                        return
                    answer = self.accept(batch)
                    if answer is None:
                        return
                    # Nothing usable: that server is behind (the catch-up: ask again at once,
                    # for enough to pass the floor), or its period already ended by this
                    # client's clock (ask again after a pause).
                    count, wait = self.retry(server, answer)
                    request = self._request_for(count)
                    pause = s.backoff_min if wait else 0.0
                if loop.time() + pause >= deadline:
                    return
                await asyncio.sleep(pause)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug, not a server's failure: keep it visible
            log.exception("leafid refill of %s failed", self._name)
            self.last_fault = ServerFault("", "internal", repr(e))
        finally:
            self.refilling = False
            self._wake_all()

    def _wake_all(self) -> None:
        if self._refilled is not None:
            self._refilled.set()

    def _close(self) -> None:
        self.drop()
        self._wake_all()


class _AsyncSupply(_AsyncDriver, SupplyCore):
    """One id stream: :class:`SupplyCore` on the loop, fed by refill tasks."""

    __slots__ = ("_client", "_request_for", "_name", "_refilled")

    def __init__(
        self,
        client: "AsyncClient",
        request_for: Callable[[int], BatchRequest],
        name: str,
        limit: int,
    ) -> None:
        s = client._settings
        SupplyCore.__init__(self, s.batch, s.max_batch, s.target_lifetime, limit)
        self._setup(client, request_for, name)

    async def next_id(self, timeout: Optional[float] = None) -> int:
        """The next id: from the local batches when they hold one (no await), else after the
        refill, waiting at most ``timeout`` seconds (the client's ``wait_timeout`` when
        ``None``). Cancellable (``asyncio.wait_for``, ``Task.cancel``): a cancelled caller takes
        nothing and leaves the refill running for the next one.

        :raises RejectedError: the servers refused (e.g. ``unknown_biz_tag``, ``formatted_tag``).
        :raises UnavailableError: no ids within the timeout: every server failed or is down.
        :raises ClientClosedError: the client is closed.
        """
        try:
            return next(self.current)
        except StopIteration:
            pass
        result: int = await self._next_id_slow(timeout)
        return result

    def try_next_id(self) -> Optional[int]:
        """An id of the local batches if they hold one, else ``None``; never waits (the refill
        still starts at the preload mark)."""
        result: Optional[int] = _AsyncDriver.try_next_id(self)
        return result

    def stats(self) -> Stats:
        """This supply's counters (``failovers`` is client-wide)."""
        return SupplyCore.stats(self)


class AsyncFormattedSupply(_AsyncDriver, FormattedCore):
    """The ids of one formatted tag, as text (see :class:`~leafid_client.FormattedSupply`),
    for asyncio. Get it from :meth:`AsyncClient.formatted`."""

    __slots__ = ("_client", "_request_for", "_name", "_refilled", "tag")

    def __init__(self, client: "AsyncClient", tag: str) -> None:
        s = client._settings
        FormattedCore.__init__(
            self,
            s.batch,
            s.max_batch,
            s.target_lifetime,
            MAX_FORMATTED_COUNT,
            wall=client._clock,
        )
        self._setup(client, lambda n: BatchRequest.formatted_list(tag, n), tag)
        self.tag = tag
        """The biz tag."""

    async def next_id(self, timeout: Optional[float] = None) -> str:
        """The next id, as text: from the local batches when they hold one of a period that has
        not ended by the client's clock (no await), else after the refill, waiting at most
        ``timeout`` seconds. See :meth:`leafid_client.FormattedSupply.next_id`.

        :raises RejectedError: ``not_formatted`` (a plain tag), ``sequence_exhausted``...
        :raises UnavailableError: no ids within the timeout: every server failed or is down.
        :raises ClientClosedError: the client is closed.
        """
        it, ended = self.current
        for text in it:
            if not ended[0]:
                return text
            result: str = await self._next_id_slow(timeout, True)
            return result
        result = await self._next_id_slow(timeout)
        return result

    def try_next_id(self) -> Optional[str]:
        """A text of the local batches if they hold one, else ``None``; never waits."""
        result: Optional[str] = _AsyncDriver.try_next_id(self)
        return result

    def late(self) -> None:
        FormattedCore.late(self)

    def stats(self) -> Stats:
        """This supply's counters (``failovers`` is client-wide)."""
        return FormattedCore.stats(self)

    def __repr__(self) -> str:
        return f"AsyncFormattedSupply({self.tag!r})"


class AsyncSegmentSupply(_AsyncSupply):
    """The ids of one tag (see :class:`~leafid_client.SegmentSupply`), for asyncio. Get it
    from :meth:`AsyncClient.segment`."""

    __slots__ = ("tag",)

    def __init__(self, client: "AsyncClient", tag: str) -> None:
        super().__init__(
            client, lambda n: BatchRequest.segment(tag, n), tag, MAX_SEGMENT_COUNT
        )
        self.tag = tag
        """The biz tag."""

    def __repr__(self) -> str:
        return f"AsyncSegmentSupply({self.tag!r})"


class AsyncSnowflakeSupply(_AsyncSupply):
    """Snowflake ids, buffered like a tag's, for asyncio. Get it from
    :meth:`AsyncClient.snowflake`."""

    __slots__ = ()

    def __init__(self, client: "AsyncClient") -> None:
        super().__init__(client, BatchRequest.snowflake, "snowflake", MAX_SNOWFLAKE_COUNT)

    def __repr__(self) -> str:
        return "AsyncSnowflakeSupply()"


class AsyncClient:
    """The asyncio leafid client; same settings as :class:`~leafid_client.Client`
    (``request_timeout`` bounds the whole request here; ``clock``, the formatted supplies'
    wall clock, is a callable returning unix seconds; ``token``, the caller token, is never
    shown and raises the same errors). Use it from one event loop; the
    constructor needs no loop, tasks start on first use.

    ::

        async with AsyncClient(["http://10.0.0.1:8080", "http://10.0.0.2:8080"]) as client:
            order_id = await client.segment("orders").next_id()
    """

    def __init__(
        self,
        servers: "List[str] | Tuple[str, ...] | str",
        *,
        batch: int = 1000,
        max_batch: Optional[int] = None,
        target_lifetime: float = 1.0,
        request_timeout: float = 2.0,
        wait_timeout: float = 5.0,
        backoff_min: float = 0.05,
        backoff_max: float = 5.0,
        clock: Callable[[], float] = time.time,
        token: Optional[str] = None,
    ) -> None:
        self._clock = check_clock(clock)
        authorization = check_token(token)
        self._settings = Settings.build(
            servers,
            batch,
            max_batch,
            target_lifetime,
            request_timeout,
            wait_timeout,
            backoff_min,
            backoff_max,
        )
        self._servers = ServerSet(
            self._settings.endpoints,
            self._settings.backoff_min,
            self._settings.backoff_max,
            on_down=self._on_down,
        )
        self._http = _AsyncHttp(authorization)
        self._segments: Dict[str, AsyncSegmentSupply] = {}
        self._formatted: Dict[str, AsyncFormattedSupply] = {}
        self._snowflake: Optional[AsyncSnowflakeSupply] = None
        self._tasks: Set["asyncio.Task[Any]"] = set()
        self._health_started = False
        self._health_wake: Optional[asyncio.Event] = None
        self._closed = False

    def segment(self, tag: str) -> AsyncSegmentSupply:
        """The supply of a tag (the same stream on every call for that tag)."""
        supply = self._segments.get(tag) if isinstance(tag, str) else None
        if supply is None:
            supply = self._segments[check_tag(tag)] = AsyncSegmentSupply(self, tag)
        return supply

    def formatted(self, tag: str) -> AsyncFormattedSupply:
        """The supply of a formatted tag (ids as text; see :meth:`Client.formatted`), the same
        stream on every call for that tag."""
        supply = self._formatted.get(tag) if isinstance(tag, str) else None
        if supply is None:
            supply = self._formatted[check_tag(tag)] = AsyncFormattedSupply(self, tag)
        return supply

    async def next_formatted(self, tag: str, timeout: Optional[float] = None) -> str:
        """Shorthand for ``await client.formatted(tag).next_id(timeout)``."""
        return await self.formatted(tag).next_id(timeout)

    def snowflake(self) -> AsyncSnowflakeSupply:
        """The snowflake supply (one per client)."""
        if self._snowflake is None:
            self._snowflake = AsyncSnowflakeSupply(self)
        return self._snowflake

    async def next_id(self, tag: str, timeout: Optional[float] = None) -> int:
        """Shorthand for ``await client.segment(tag).next_id(timeout)``."""
        return await self.segment(tag).next_id(timeout)

    async def next_snowflake_id(self, timeout: Optional[float] = None) -> int:
        """Shorthand for ``await client.snowflake().next_id(timeout)``."""
        return await self.snowflake().next_id(timeout)

    async def snowflake_bounds(
        self, from_: datetime, to: datetime, timeout: Optional[float] = None
    ) -> Bounds:
        """The smallest and largest snowflake id any worker can issue in ``[from_, to)`` (aware
        datetimes); see :meth:`leafid_client.Client.snowflake_bounds`. Fails over like a batch
        request; rounds in which every server failed are retried with backoff for at most
        ``timeout`` seconds (``wait_timeout`` when ``None``). Cancellable.

        :raises RejectedError: ``invalid_time_range`` or ``invalid_request``; never a failover.
        :raises UnavailableError: every server failed or is down.
        :raises ClientClosedError: the client is closed.
        :raises ValueError: a naive datetime (``TypeError``: not a datetime).
        """
        request = BoundsRequest.between(from_, to)
        s = self._settings
        wait = s.wait_timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        started = loop.time()
        failures = 0
        while True:
            if self._closed:
                raise ClientClosedError("the client is closed")
            try:
                bounds, _ = await self._fetch(request)
                return bounds
            except AllFailed as e:
                last = e.last
            if self._closed:
                raise ClientClosedError("the client is closed")
            failures += 1
            pause = backoff(s.backoff_min, s.backoff_max, failures)
            if loop.time() + pause - started >= wait:
                raise UnavailableError(loop.time() - started, last, wait)
            await asyncio.sleep(pause)

    def stats(self) -> Stats:
        """Counters summed over every supply, plus the client's failovers."""
        total = Stats(failovers=self._servers.failovers)
        for s in self._supplies():
            total = total + s.stats()
        return total

    def down_servers(self) -> List[str]:
        """Base URLs of the servers currently marked down."""
        return self._servers.down_urls()

    def preferred_server(self) -> str:
        """Base URL of the server asked first."""
        return self._servers.servers[self._servers.preferred].endpoint.url

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def close(self) -> None:
        """Cancels and awaits every task of this client and closes its connections; waiting
        callers get :class:`ClientClosedError`. Idempotent."""
        self._closed = True
        for s in self._supplies():
            s._close()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        await self._http.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        urls = [e.url for e in self._settings.endpoints]
        return f"AsyncClient({urls!r}, batch={self._settings.batch})"

    # -- internals -----------------------------------------------------------------------

    def _supplies(self) -> "List[Union[_AsyncSupply, AsyncFormattedSupply]]":
        out: "List[Union[_AsyncSupply, AsyncFormattedSupply]]" = list(self._segments.values())
        out += self._formatted.values()
        if self._snowflake is not None:
            out.append(self._snowflake)
        return out

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> bool:
        if self._closed:
            coro.close()
            return False
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _on_down(self) -> None:
        if not self._health_started:
            self._health_wake = asyncio.Event()
            self._health_started = self._spawn(self._health_loop())
        if self._health_wake is not None:
            self._health_wake.set()

    async def _fetch(self, req: "Request[T]") -> Tuple[T, str]:
        """One answer's value (a batch, bounds) and the URL of the server that sent it (see the
        blocking client's)."""
        s = self._settings
        last: Optional[ServerFault] = None
        loop = asyncio.get_running_loop()
        # A wait for 429 quota_exhausted ends by this instant or not at all.
        deadline = loop.time() + s.wait_timeout
        for i in self._servers.plan():
            if last is not None:
                self._servers.failovers += 1
            ep = self._servers.servers[i].endpoint
            seen = self._servers.servers[i].downs
            try:
                status, body, retry_after = await self._get(ep, req.path, s.request_timeout)
                # 429 quota_exhausted: the same server again after its Retry-After (see the
                # blocking client's): never another server, no failover counted.
                th = throttled(ep.url, status, body, retry_after)
                while th is not None:
                    self._servers.preferred = i
                    if loop.time() + th.retry_after > deadline:
                        raise th
                    await asyncio.sleep(th.retry_after)
                    if self._closed:
                        raise AllFailed(last)
                    status, body, retry_after = await self._get(ep, req.path, s.request_timeout)
                    th = throttled(ep.url, status, body, retry_after)
                value = req.interpret(ep.url, status, body)
            except ServerFailure as f:
                last = f.fault
            else:
                self._servers.succeeded(i, seen)
                return value, ep.url
            if self._closed:
                break
            self._http.forget(ep)
            self._servers.mark_down(i, last)
        raise AllFailed(last)

    async def _get(
        self, ep: Endpoint, path: str, timeout: float
    ) -> Tuple[int, bytes, Optional[str]]:
        try:
            return await self._http.get(ep, path, timeout)
        except asyncio.TimeoutError:
            raise ServerFailure(ServerFault(ep.url, "transport", "timed out")) from None
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            detail = f"{type(e).__name__}: {e}"
            raise ServerFailure(ServerFault(ep.url, "transport", detail)) from None

    async def _health_loop(self) -> None:
        """Probes every down server when its backoff has passed; sleeps while none is down."""
        wake = self._health_wake
        assert wake is not None
        while not self._closed:
            delay = self._servers.next_probe_in()
            try:
                await asyncio.wait_for(wake.wait(), delay)
            except asyncio.TimeoutError:
                pass
            wake.clear()
            for i in self._servers.due_probes():
                ep = self._servers.servers[i].endpoint
                seen = self._servers.servers[i].downs
                try:
                    status, _, _ = await self._http.get(
                        ep, "/health/ready", self._settings.request_timeout
                    )
                    ok = status == 200
                except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                    ok = False
                if ok:
                    self._servers.mark_up(i, seen)
                elif self._servers.servers[i].down:
                    self._servers.mark_down(i)

