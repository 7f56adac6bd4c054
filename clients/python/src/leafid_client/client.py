"""The blocking client: :class:`Client` and its handles :class:`SegmentSupply` and
:class:`SnowflakeSupply`, safe to share between threads.

Threads it runs, all owned and joined by :meth:`Client.close`:

- one ``leafid-refill`` thread per supply while that supply fetches a batch (single flight),
  started when 10% of the current batch is used or when a caller finds both batches spent;
- one ``leafid-health`` thread, started when a server is first marked down, which probes the
  down servers' ``/health/ready`` on their backoff schedule and sleeps while none is down.
"""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar, Union

from ._servers import Endpoint, ServerSet, backoff
from ._settings import Settings, check_clock, check_token
from ._formatted import FormattedCore
from ._supply import LOCK_FREE, Stats, SupplyCore
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
from .errors import (
    ClientClosedError,
    RejectedError,
    ThrottledError,
    ServerFault,
    UnavailableError,
)

__all__ = ["Client", "FormattedSupply", "SegmentSupply", "SnowflakeSupply"]

T = TypeVar("T")

log = logging.getLogger("leafid_client")

_IDLE_PER_SERVER = 4
"""Idle keep-alive connections kept per server."""

_tls: Optional[ssl.SSLContext] = None


def _tls_context() -> ssl.SSLContext:
    """The default SSL context (system CAs, host names checked), made once."""
    global _tls
    if _tls is None:
        _tls = ssl.create_default_context()
    return _tls


class _HttpPool:
    """Keep-alive ``http.client`` connections per server. :meth:`abort` shuts down the sockets
    of requests in flight, so :meth:`Client.close` need not wait for a hung server."""

    def __init__(self, authorization: Optional[str] = None) -> None:
        self._authorization = authorization
        """``Bearer <token>`` for every request but the health probe, or ``None``."""
        self._lock = threading.Lock()
        self._idle: Dict[Endpoint, List[http.client.HTTPConnection]] = {}
        self._active: Set[http.client.HTTPConnection] = set()
        self._closed = False

    def get(self, ep: Endpoint, path: str, timeout: float) -> Tuple[int, bytes, Optional[str]]:
        """``GET`` ``path`` on ``ep``: status, body and ``Retry-After``. ``timeout`` bounds the connect, then
        the head and the body are each given the time left (a server that trickles bytes
        can stretch the body's read). A kept-alive connection the server closed meanwhile is
        retried once on a new one (that is not the server's failure)."""
        deadline = time.monotonic() + timeout
        for attempt in (0, 1):
            conn, reused = self._checkout(ep, timeout)
            try:
                headers = {"Accept": "application/json"}
                if self._authorization is not None and path != "/health/ready":
                    headers["Authorization"] = self._authorization
                conn.request("GET", ep.prefix + path, headers=headers)
                _time_left(conn, deadline)
                resp = conn.getresponse()
                _time_left(conn, deadline)
                body = resp.read()
            except (ConnectionError, http.client.BadStatusLine):
                conn.close()
                if reused and attempt == 0:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            finally:
                with self._lock:
                    self._active.discard(conn)
            if resp.will_close:
                conn.close()
            else:
                self._checkin(ep, conn)
            return resp.status, body, resp.getheader("Retry-After")
        raise AssertionError("unreachable")

    def _checkout(self, ep: Endpoint, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._closed:
                raise ConnectionAbortedError("client closed")
            idle = self._idle.get(ep)
            conn = idle.pop() if idle else None
            reused = conn is not None
            if conn is None and ep.secure:
                conn = http.client.HTTPSConnection(
                    ep.host, ep.port, timeout=timeout, context=_tls_context()
                )
            elif conn is None:
                conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)
            else:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
            self._active.add(conn)
        return conn, reused

    def _checkin(self, ep: Endpoint, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(ep, [])
            if self._closed or len(idle) >= _IDLE_PER_SERVER:
                conn.close()
            else:
                idle.append(conn)

    def forget(self, ep: Endpoint) -> None:
        """Closes the idle connections to ``ep`` (it failed: they are likely dead too)."""
        with self._lock:
            idle = self._idle.pop(ep, [])
        for c in idle:
            c.close()

    def abort(self) -> None:
        """Closes every idle connection and shuts down the ones in use; no new ones."""
        with self._lock:
            self._closed = True
            idle = [c for cs in self._idle.values() for c in cs]
            self._idle.clear()
            active = list(self._active)
        for c in idle:
            c.close()
        for c in active:
            sock = c.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _time_left(conn: http.client.HTTPConnection, deadline: float) -> None:
    """Gives the connection's next reads what is left until ``deadline``."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    if conn.sock is not None:
        conn.sock.settimeout(left)


class _Driver:
    """What drives a supply's core (:class:`SupplyCore` for numbers, :class:`FormattedCore` for
    texts) in the blocking client: its lock, the waiting callers, the refill threads. Mixed in
    before the core; the public handles are the supply object itself (no indirection on the
    local path). Their public surface is ``next_id``, ``try_next_id`` and ``stats``."""

    if not TYPE_CHECKING:  # the concrete supplies declare the slots
        __slots__ = ()

    _client: "Client"
    _request_for: Callable[[int], BatchRequest]
    """The batch request for a count."""
    _name: str
    _lock: threading.Lock
    _cond: threading.Condition
    """Notified when a refill ends (successful or not) and on close."""

    if TYPE_CHECKING:  # the core's surface, as the driver uses it
        refilling: bool
        refused: Optional[Union[RejectedError, ThrottledError]]
        last_fault: Optional[ServerFault]
        failed_rounds: int
        count: int
        strict: bool
        floor: Any

        def take(self) -> Tuple[Any, bool]: ...
        def begin_refill(self) -> bool: ...
        def starve(self) -> None: ...
        def accept(self, batch: Any) -> Any: ...
        def retry(self, server: str, answer: Any) -> Tuple[int, bool]: ...
        def drop(self) -> None: ...
        def pass_through(self, server: str, runs: Any, floor: Any) -> Any: ...

    def _setup(self, client: "Client", request_for: Callable[[int], BatchRequest], name: str) -> None:
        self._client = client
        self._request_for = request_for
        self._name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)

    def try_next_id(self) -> Any:
        """An id of the local batches if they hold one, else ``None``; never waits (the refill
        still starts at the preload mark)."""
        with self._lock:
            if self._client._closed:
                return None
            id_, refill = self.take()
            if refill:
                self._start_refill_locked()
            return id_

    def _next_id_slow(self, timeout: Optional[float], late: bool = False) -> Any:
        wait = self._client._settings.wait_timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + wait
        # A refusal counts only from a refill this call waited for, not one from before.
        waited = False
        with self._cond:
            if late:
                # The local path took a text whose period had ended: never handed out.
                self.late()
            while True:
                if self._client._closed:
                    raise ClientClosedError("the client is closed")
                id_, refill = self.take()
                if refill:
                    self._start_refill_locked()
                if id_ is not None:
                    return id_
                if self.strict:
                    # Pass-through (a strict tag): this call's own request, outside the lock.
                    floor = self.floor
                    break
                if waited and self.refused is not None:
                    raise self.refused.copy()
                if not waited:
                    self.starve()
                self._start_refill_locked()
                waited = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise UnavailableError(time.monotonic() - started, self.last_fault, wait)
                self._cond.wait(remaining)
        return self._pass_through(floor, started, deadline, wait)

    def _pass_through(self, floor: int, started: float, deadline: float, wait: float) -> Any:
        """A strict supply's call (see :mod:`leafid_client._supply`): one request for one id,
        sent now, after the call began, through the usual server order and failover; a refusal
        reaches the caller; failed rounds are retried with backoff until ``deadline``. The id is
        handed out only when above ``floor`` (the floor when the call began)."""
        client = self._client
        s = client._settings
        request = self._request_for(1)
        failures = 0
        while True:
            if client._closed:
                raise ClientClosedError("the client is closed")
            try:
                runs, server = client._fetch(request)
            except AllFailed as e:
                with self._lock:
                    self.failed_rounds += 1
                    self.last_fault = e.last
                failures += 1
                pause = backoff(s.backoff_min, s.backoff_max, failures)
            else:
                with self._lock:
                    id_ = self.pass_through(server, runs, floor)
                if id_ is not None:
                    return id_
                pause = 0.0
            if time.monotonic() + pause >= deadline:
                raise UnavailableError(time.monotonic() - started, self.last_fault, wait)
            if pause and client._stop.wait(pause):
                raise ClientClosedError("the client is closed")

    def late(self) -> None:
        """Counts a text the local path took after its period ended (formatted supplies)."""
        raise AssertionError("numbers have no period")

    def _start_refill_locked(self) -> None:
        if self.begin_refill():
            if not self._client._spawn(self._refill, f"leafid-refill-{self._name}"):
                self.refilling = False

    def _refill(self) -> None:
        """Fetches one batch above the floor into ``ahead``; retries failed rounds with backoff
        for at most the wait timeout (then the next caller that needs a batch starts another)."""
        client = self._client
        s = client._settings
        deadline = time.monotonic() + s.wait_timeout
        failures = 0
        with self._lock:
            request = self._request_for(self.count)
        try:
            while not client._closed:
                try:
                    batch, server = client._fetch(request)
                except (RejectedError, ThrottledError) as e:
                    with self._lock:
                        self.refused = e
                    return
                except AllFailed as e:
                    with self._lock:
                        self.failed_rounds += 1
                        self.last_fault = e.last
                    failures += 1
                    pause = backoff(s.backoff_min, s.backoff_max, failures)
                else:
                    with self._lock:
                        if client._closed:
                            return
                        answer = self.accept(batch)
                        if answer is None:
                            return
                        # Nothing usable: that server is behind the one used before (the
                        # catch-up: ask again at once, for enough to pass the floor), or its
                        # period already ended by this client's clock (ask again after a pause).
                        count, wait = self.retry(server, answer)
                        request = self._request_for(count)
                    pause = s.backoff_min if wait else 0.0
                if time.monotonic() + pause >= deadline:
                    return
                if pause and client._stop.wait(pause):
                    return
        except Exception as e:  # a bug, not a server's failure: keep it visible
            log.exception("leafid refill of %s failed", self._name)
            with self._lock:
                self.last_fault = ServerFault("", "internal", repr(e))
        finally:
            with self._cond:
                self.refilling = False
                self._cond.notify_all()

    def _close(self) -> None:
        """Drops the local batches and wakes every waiting caller (they raise)."""
        with self._cond:
            self.drop()
            self._cond.notify_all()


class _Supply(_Driver, SupplyCore):
    """One id stream (a tag, or snowflake): :class:`SupplyCore` behind a lock, fed by refill
    threads."""

    __slots__ = ("_client", "_request_for", "_name", "_lock", "_cond")

    def __init__(
        self, client: "Client", request_for: Callable[[int], BatchRequest], name: str, limit: int
    ) -> None:
        s = client._settings
        SupplyCore.__init__(self, s.batch, s.max_batch, s.target_lifetime, limit)
        self._setup(client, request_for, name)

    def next_id(self, timeout: Optional[float] = None) -> int:
        """The next id. Local path: one ``next()`` on the piece in use (a range iterator: one
        increment and one compare with its end, in C), no lock (see :mod:`leafid_client._supply`
        for why that is safe). When the piece is spent it moves to the next one under the lock;
        when both local batches are spent it waits for the refill, at most ``timeout`` seconds
        (the client's ``wait_timeout`` when ``None``).

        :raises RejectedError: the servers refused (e.g. ``unknown_biz_tag``,
            ``biz_tag_exhausted``, ``formatted_tag``: the tag is formatted, see
            :meth:`Client.formatted`).
        :raises UnavailableError: no ids within the timeout: every server failed or is down.
        :raises ClientClosedError: the client is closed.
        """
        try:
            return next(self.current)
        except StopIteration:
            pass
        result: int = self._next_id_slow(timeout)
        return result

    if not LOCK_FREE:  # a free-threaded build without the GIL: every call takes the lock

        def next_id(self, timeout: Optional[float] = None) -> int:  # noqa: F811
            result: int = self._next_id_slow(timeout)
            return result

    def try_next_id(self) -> Optional[int]:
        """An id of the local batches if they hold one, else ``None``; never waits (the refill
        still starts at the preload mark)."""
        result: Optional[int] = _Driver.try_next_id(self)
        return result

    def stats(self) -> Stats:
        """This supply's counters (``failovers`` is client-wide: see :meth:`Client.stats`)."""
        with self._lock:
            return SupplyCore.stats(self)


class FormattedSupply(_Driver, FormattedCore):
    """The ids of one formatted tag, as text (order numbers like ``20261127000123``): increasing
    as byte strings, never repeated, never of a period that has ended by the client's clock.
    Get it from :meth:`Client.formatted` (the same object for every call with that tag).
    Thread-safe. See :mod:`leafid_client._formatted` for the rules."""

    __slots__ = ("_client", "_request_for", "_name", "_lock", "_cond", "tag")

    def __init__(self, client: "Client", tag: str) -> None:
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

    def next_id(self, timeout: Optional[float] = None) -> str:
        """The next id, as text. Local path: one ``next()`` on the piece in use (a list
        iterator, in C) and one load of its period's ended flag (no clock read with the default
        clock; see :mod:`leafid_client._formatted`), no lock. A text
        whose period has ended is never returned: its batch is dropped (counted in
        ``discarded_ids``) and the next one used or fetched. Waits at most ``timeout`` seconds
        (the client's ``wait_timeout`` when ``None``) when the local batches are spent.

        :raises RejectedError: the servers refused: ``not_formatted`` (the tag is plain: use
            :meth:`Client.segment`), ``sequence_exhausted`` (the period ran out of its width,
            until the next period), ``unknown_biz_tag``...
        :raises UnavailableError: no ids within the timeout: every server failed or is down.
        :raises ClientClosedError: the client is closed.
        """
        it, ended = self.current
        for text in it:
            if not ended[0]:
                return text
            result: str = self._next_id_slow(timeout, True)
            return result
        result = self._next_id_slow(timeout)
        return result

    if not LOCK_FREE:  # a free-threaded build without the GIL: every call takes the lock

        def next_id(self, timeout: Optional[float] = None) -> str:  # noqa: F811
            result: str = self._next_id_slow(timeout)
            return result

    def try_next_id(self) -> Optional[str]:
        """A text of the local batches if they hold one, else ``None``; never waits."""
        result: Optional[str] = _Driver.try_next_id(self)
        return result

    def late(self) -> None:
        FormattedCore.late(self)

    def stats(self) -> Stats:
        """This supply's counters (``failovers`` is client-wide: see :meth:`Client.stats`)."""
        with self._lock:
            return FormattedCore.stats(self)

    def __repr__(self) -> str:
        return f"FormattedSupply({self.tag!r})"


class SegmentSupply(_Supply):
    """The ids of one tag: increasing, never repeated, served from local batches. Get it from
    :meth:`Client.segment` (the same object for every call with that tag). Thread-safe."""

    __slots__ = ("tag",)

    def __init__(self, client: "Client", tag: str) -> None:
        super().__init__(
            client, lambda n: BatchRequest.segment(tag, n), tag, MAX_SEGMENT_COUNT
        )
        self.tag = tag
        """The biz tag."""

    def __repr__(self) -> str:
        return f"SegmentSupply({self.tag!r})"


class SnowflakeSupply(_Supply):
    """Snowflake ids from the servers' batch route, buffered like a tag's; increasing per
    client. Get it from :meth:`Client.snowflake`. Thread-safe."""

    __slots__ = ()

    def __init__(self, client: "Client") -> None:
        super().__init__(client, BatchRequest.snowflake, "snowflake", MAX_SNOWFLAKE_COUNT)

    def __repr__(self) -> str:
        return "SnowflakeSupply()"


class Client:
    """A leafid client: per tag (and for snowflake) a local double-buffered id supply, fed by the
    batch routes of several servers with failover. Thread-safe; use one per process.

    ::

        with Client(["http://10.0.0.1:8080", "http://10.0.0.2:8080"]) as client:
            orders = client.segment("orders")
            order_id = orders.next_id()

    :param servers: base URLs (``http://host:port`` or ``https://...``), the first is
        preferred.
    :param batch: ids of a supply's first request and the least it asks for, 1..=1000000
        (a snowflake supply asks for at most 100000). Each supply holds up to two batches; ids
        left when the client closes are never used (a gap).
    :param max_batch: the most a supply asks for, ``batch..=1000000`` (``None``: 1000000).
        Between the two the size follows demand: it doubles when a batch would last less
        than half ``target_lifetime`` or a caller had to wait, halves when it would last over
        twice as long.
    :param target_lifetime: seconds a batch should last at the callers' rate (default 1).
    :param request_timeout: seconds for one request (the connect; then the head and the body
        each get the time left). A server that takes longer is marked down and the next one
        asked.
    :param wait_timeout: seconds a ``next_id`` waits for ids when its local batches are spent,
        then :class:`UnavailableError`.
    :param backoff_min: first wait (seconds) before probing a down server; doubles per failure.
    :param backoff_max: longest wait between two probes of a down server.
    :param token: the caller token (``lid_...``, made by an admin with ``POST /api/v1/tokens``),
        sent as ``Authorization: Bearer <token>`` on every batch and bounds request (not on the
        health probe). Never shown (``repr`` leaves it out). ``None``: no credentials. leafid's
        401 ``unauthorized`` and 403 ``forbidden`` raise :class:`RejectedError` with that code,
        never a failover; a 429 ``quota_exhausted`` is waited out for its ``Retry-After`` on the
        same server, or raises :class:`ThrottledError` when that wait would pass the wait timeout.
    :param clock: the wall clock the formatted supplies' period rule reads: a callable
        returning seconds since the epoch (unix seconds, ``float``), like ``time.time`` (the
        default). Every formatted ``next_id`` calls it once, so keep it cheap. A batch whose
        ``period_end`` has passed by this clock is dropped, never handed out.
    :raises ConfigError: on unusable settings.
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
        self._lock = threading.Lock()
        """Guards the supplies map, the thread set and the server set (never held while a
        request runs)."""
        self._servers = ServerSet(
            self._settings.endpoints,
            self._settings.backoff_min,
            self._settings.backoff_max,
            on_down=self._on_down_locked,
        )
        self._http = _HttpPool(authorization)
        self._segments: Dict[str, SegmentSupply] = {}
        self._formatted: Dict[str, FormattedSupply] = {}
        self._snowflake: Optional[SnowflakeSupply] = None
        self._threads: Set[threading.Thread] = set()
        self._health_started = False
        self._health_wake = threading.Event()
        self._stop = threading.Event()
        self._closed = False

    # -- public surface -------------------------------------------------------------------

    def segment(self, tag: str) -> SegmentSupply:
        """The supply of a tag (the same stream on every call for that tag). No request is sent
        until its first ``next_id``. :class:`InvalidTagError` unless the tag is 1 to 128 of
        ``A-Z a-z 0-9 . _ : -``."""
        # A dict read is atomic; the insert is locked.
        supply = self._segments.get(tag) if isinstance(tag, str) else None
        if supply is not None:
            return supply
        tag = check_tag(tag)
        with self._lock:
            supply = self._segments.get(tag)
            if supply is None:
                supply = self._segments[tag] = SegmentSupply(self, tag)
            return supply

    def formatted(self, tag: str) -> FormattedSupply:
        """The supply of a formatted tag (``docs/shapes.md``: ids as text, such as daily order
        numbers), the same stream on every call for that tag; its ``next_id()`` returns ``str``.
        No request is sent until its first ``next_id``. :class:`InvalidTagError` unless the tag
        is 1 to 128 of ``A-Z a-z 0-9 . _ : -``."""
        supply = self._formatted.get(tag) if isinstance(tag, str) else None
        if supply is not None:
            return supply
        tag = check_tag(tag)
        with self._lock:
            supply = self._formatted.get(tag)
            if supply is None:
                supply = self._formatted[tag] = FormattedSupply(self, tag)
            return supply

    def next_formatted(self, tag: str, timeout: Optional[float] = None) -> str:
        """Shorthand for ``client.formatted(tag).next_id(timeout)``."""
        return self.formatted(tag).next_id(timeout)

    def snowflake(self) -> SnowflakeSupply:
        """The snowflake supply (one per client)."""
        supply = self._snowflake
        if supply is not None:
            return supply
        with self._lock:
            if self._snowflake is None:
                self._snowflake = SnowflakeSupply(self)
            return self._snowflake

    def next_id(self, tag: str, timeout: Optional[float] = None) -> int:
        """Shorthand for ``client.segment(tag).next_id(timeout)``."""
        return self.segment(tag).next_id(timeout)

    def snowflake_bounds(
        self, from_: datetime, to: datetime, timeout: Optional[float] = None
    ) -> Bounds:
        """The smallest and largest snowflake id any worker can issue in ``[from_, to)`` under
        the servers' layout (``GET /api/v1/snowflake/bounds``), for ``WHERE id BETWEEN min_id
        AND max_id``. ``from_`` and ``to`` are aware datetimes, sent as RFC 3339 UTC with
        milliseconds (``from_`` rounded down, ``to`` up when ``from_ < to``: every tick the range
        overlaps is kept).

        The request fails over like a batch request: a timeout, a 5xx, a refused connection,
        another 4xx (``engine_disabled``) or a bad body is that server's failure and the next
        one is asked; rounds in which every server failed are retried with backoff for at most
        ``timeout`` seconds (the client's ``wait_timeout`` when ``None``; a round under way
        when it runs out is finished).

        :raises RejectedError: ``invalid_time_range`` (an empty range, before the layout's
            epoch, past the end of its time field) or ``invalid_request``; never a failover.
        :raises UnavailableError: every server failed or is down.
        :raises ClientClosedError: the client is closed.
        :raises ValueError: a naive datetime (``TypeError``: not a datetime).
        """
        request = BoundsRequest.between(from_, to)
        s = self._settings
        wait = s.wait_timeout if timeout is None else timeout
        started = time.monotonic()
        failures = 0
        while True:
            if self._closed:
                raise ClientClosedError("the client is closed")
            try:
                bounds, _ = self._fetch(request)
                return bounds
            except AllFailed as e:
                last = e.last
            failures += 1
            pause = backoff(s.backoff_min, s.backoff_max, failures)
            if time.monotonic() + pause - started >= wait:
                if self._closed:
                    raise ClientClosedError("the client is closed")
                raise UnavailableError(time.monotonic() - started, last, wait)
            if self._stop.wait(pause):
                raise ClientClosedError("the client is closed")

    def next_snowflake_id(self, timeout: Optional[float] = None) -> int:
        """Shorthand for ``client.snowflake().next_id(timeout)``."""
        return self.snowflake().next_id(timeout)

    def stats(self) -> Stats:
        """Counters summed over every supply, plus the client's failovers."""
        with self._lock:
            supplies: List[_Driver] = list(self._segments.values())
            supplies += self._formatted.values()
            if self._snowflake is not None:
                supplies.append(self._snowflake)
            failovers = self._servers.failovers
        total = Stats(failovers=failovers)
        for s in supplies:
            assert isinstance(s, (_Supply, FormattedSupply))
            total = total + s.stats()
        return total

    def down_servers(self) -> List[str]:
        """Base URLs of the servers currently marked down."""
        with self._lock:
            return self._servers.down_urls()

    def preferred_server(self) -> str:
        """Base URL of the server asked first (the last one that delivered a batch)."""
        with self._lock:
            return self._servers.servers[self._servers.preferred].endpoint.url

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self, timeout: Optional[float] = None) -> None:
        """Stops every background thread and waits for them (at most ``timeout`` seconds when
        given): requests in flight are aborted, waiting callers get
        :class:`ClientClosedError`. Idempotent."""
        with self._lock:
            self._closed = True
            supplies: List[_Driver] = list(self._segments.values())
            supplies += self._formatted.values()
            if self._snowflake is not None:
                supplies.append(self._snowflake)
        self._stop.set()
        self._health_wake.set()
        self._http.abort()
        for s in supplies:
            s._close()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            threads = [t for t in self._threads if t is not threading.current_thread()]
        for t in threads:
            t.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        with self._lock:
            self._threads = {t for t in self._threads if t.is_alive()}

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        urls = [e.url for e in self._settings.endpoints]
        return f"Client({urls!r}, batch={self._settings.batch})"

    # -- internals -----------------------------------------------------------------------

    def _spawn(self, target: "object", name: str) -> bool:
        """Starts an owned daemon thread unless closed."""
        with self._lock:
            return self._spawn_locked(target, name)

    def _spawn_locked(self, target: "object", name: str) -> bool:
        if self._closed:
            return False
        # Finished threads are pruned here, not by themselves: close() joins every thread still
        # in the set, so none is left even in its last instructions when close() returns.
        self._threads = {t for t in self._threads if t.is_alive()}
        t = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads.add(t)
        t.start()
        return True

    def _on_down_locked(self) -> None:
        """A server was marked down: wake the health thread, or start it."""
        if not self._health_started:
            self._health_started = self._spawn_locked(self._health_loop, "leafid-health")
        self._health_wake.set()

    def _fetch(self, req: "Request[T]") -> Tuple[T, str]:
        """One answer's value (a batch, bounds) and the URL of the server that sent it: the
        preferred server first, then the others (see ServerSet.plan). RejectedError at a
        refusal; AllFailed when every server failed."""
        s = self._settings
        last: Optional[ServerFault] = None
        # A wait for 429 quota_exhausted ends by this instant or not at all.
        deadline = time.monotonic() + s.wait_timeout
        with self._lock:
            plan = self._servers.plan()
        while True:
            with self._lock:
                i = next(plan, None)
                if i is None:
                    raise AllFailed(last)
                if last is not None:
                    self._servers.failovers += 1
                ep = self._servers.servers[i].endpoint
                seen = self._servers.servers[i].downs
            try:
                status, body, retry_after = self._get(ep, req.path, s.request_timeout)
                # 429 quota_exhausted: the same server again after its Retry-After, never
                # another (every server shares the quota) and no failover counted; a wait that
                # would end past the deadline is the caller's ThrottledError. Bounded: each
                # round sleeps at least 1 s and the deadline ends the loop.
                th = throttled(ep.url, status, body, retry_after)
                while th is not None:
                    with self._lock:
                        self._servers.preferred = i
                    if time.monotonic() + th.retry_after > deadline:
                        raise th
                    if self._stop.wait(th.retry_after):
                        raise AllFailed(last)
                    status, body, retry_after = self._get(ep, req.path, s.request_timeout)
                    th = throttled(ep.url, status, body, retry_after)
                value = req.interpret(ep.url, status, body)
            except ServerFailure as f:
                last = f.fault
            else:
                with self._lock:
                    self._servers.succeeded(i, seen)
                return value, ep.url
            if self._closed:
                raise AllFailed(last)
            self._http.forget(ep)
            with self._lock:
                self._servers.mark_down(i, last)

    def _get(self, ep: Endpoint, path: str, timeout: float) -> Tuple[int, bytes, Optional[str]]:
        try:
            return self._http.get(ep, path, timeout)
        except (OSError, http.client.HTTPException) as e:
            detail = "timed out" if isinstance(e, socket.timeout) else f"{type(e).__name__}: {e}"
            raise ServerFailure(ServerFault(ep.url, "transport", detail)) from None

    def _health_loop(self) -> None:
        """Probes every down server when its backoff has passed; sleeps while none is down."""
        while not self._stop.is_set():
            with self._lock:
                delay = self._servers.next_probe_in()
            self._health_wake.wait(delay)
            if self._stop.is_set():
                return
            self._health_wake.clear()
            with self._lock:
                due = self._servers.due_probes()
            for i in due:
                if self._stop.is_set():
                    return
                with self._lock:
                    ep = self._servers.servers[i].endpoint
                    seen = self._servers.servers[i].downs
                try:
                    status, _, _ = self._http.get(ep, "/health/ready", self._settings.request_timeout)
                    ok = status == 200
                except (OSError, http.client.HTTPException):
                    ok = False
                with self._lock:
                    if ok:
                        self._servers.mark_up(i, seen)
                    elif self._servers.servers[i].down:
                        self._servers.mark_down(i)
