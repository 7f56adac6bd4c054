"""The parts shared by the blocking and the asyncio client: no I/O and no waiting here.

- :func:`valid_tag`, :class:`Settings`, :class:`Endpoint`: what the constructors check.
- :func:`interpret`: what one HTTP answer means (ids, a refusal, or that server's failure), with
  the validation of a batch body: only ids that pass it are ever handed out.
- :class:`ServerSet`: which server is asked next, failover, backoff, which probes are due.
- :class:`SupplyCore`: one id stream's double buffer and its *floor* (see below).

The floor: the servers of one database lease disjoint id ranges, but a range leased by another
server is not ordered relative to what this client already received (after a failover the new
server may still serve a lower segment; another snowflake worker may be behind in time). Handing
such ids out would break "increasing", so every batch is cut to its ids above the largest id
accepted so far; the cut ids are counted in ``discarded_ids`` and never handed out.
An answer wholly below the floor starts the catch-up (:func:`catch_up_count`): the next request
follows at once and asks for enough ids to pass the floor, at most 100,000 per request.
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import operator
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence, Union

from .errors import ConfigError, InvalidTagError, RejectedError, ServerFault

log = logging.getLogger("leafid_client")

MAX_BATCH = 100_000
"""Most ids one batch request may ask for (the server's limit)."""

MAX_ID = (1 << 64) - 1
"""Largest id accepted in a body (ids are 64-bit; segment ids stay below 2^63)."""

REFUSAL_CODES = frozenset(
    {"unknown_biz_tag", "invalid_biz_tag", "biz_tag_exhausted", "invalid_count", "invalid_request"}
)
"""4xx codes that refuse the request itself: every server would answer the same."""

_TAG = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_DECIMAL = re.compile(r"[0-9]{1,20}")


def valid_tag(tag: object) -> bool:
    """The server's tag rule: 1 to 128 of ``A-Z a-z 0-9 . _ : -``."""
    return isinstance(tag, str) and _TAG.fullmatch(tag) is not None


def check_tag(tag: object) -> str:
    """``tag`` if valid, else :class:`InvalidTagError`."""
    if not valid_tag(tag):
        raise InvalidTagError(tag)
    assert isinstance(tag, str)
    return tag


def backoff(minimum: float, maximum: float, failures: int) -> float:
    """The wait after ``failures`` failures in a row (at least 1): ``minimum`` doubling up to
    ``maximum``."""
    doublings = min(max(failures - 1, 0), 30)
    return min(minimum * (1 << doublings), maximum)


@dataclass(frozen=True)
class Endpoint:
    """One server's base URL, parsed."""

    url: str
    """The base URL without a trailing ``/`` (how errors and stats name the server)."""
    host: str
    """Host name or address (IPv6 without brackets)."""
    port: int
    """TCP port."""
    prefix: str
    """Path prefix before ``/api/...`` (``""`` when the server is at the root)."""

    @property
    def host_header(self) -> str:
        """The ``Host`` header value."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == 80 else f"{host}:{self.port}"

    @classmethod
    def parse(cls, url: object) -> "Endpoint":
        """An ``http://host[:port][/prefix]`` URL, else :class:`ConfigError`."""
        if not isinstance(url, str):
            raise ConfigError(f"a server URL must be a str, got {url!r}")
        base = url.rstrip("/")
        try:
            parts = urllib.parse.urlsplit(base)
            port = parts.port
        except ValueError as e:
            raise ConfigError(f"not an http:// URL: {url!r} ({e})") from None
        if (
            parts.scheme != "http"
            or not parts.hostname
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            raise ConfigError(f"not an http://host[:port] URL: {url!r}")
        return cls(base, parts.hostname, port if port is not None else 80, parts.path)


@dataclass(frozen=True)
class Settings:
    """The validated settings of one client (seconds for every duration)."""

    endpoints: Sequence[Endpoint]
    batch: int
    max_batch: int
    request_timeout: float
    wait_timeout: float
    backoff_min: float
    backoff_max: float

    @classmethod
    def build(
        cls,
        servers: object,
        batch: object,
        max_batch: object,
        request_timeout: object,
        wait_timeout: object,
        backoff_min: object,
        backoff_max: object,
    ) -> "Settings":
        """Checks every setting, else :class:`ConfigError`."""
        if isinstance(servers, str):
            servers = [servers]
        if not isinstance(servers, (list, tuple)) or not servers:
            raise ConfigError("give at least one server URL (a list of http://host:port)")
        endpoints = [Endpoint.parse(u) for u in servers]
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise ConfigError(f"batch must be an int within 1..={MAX_BATCH} (got {batch!r})")
        if max_batch is None:
            max_batch = batch
        if (
            isinstance(max_batch, bool)
            or not isinstance(max_batch, int)
            or not batch <= max_batch <= MAX_BATCH
        ):
            raise ConfigError(
                f"max_batch must be an int within batch..={MAX_BATCH} (got {max_batch!r})"
            )
        durations = {
            "request_timeout": request_timeout,
            "wait_timeout": wait_timeout,
            "backoff_min": backoff_min,
            "backoff_max": backoff_max,
        }
        for name, value in durations.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{name} must be a positive number of seconds (got {value!r})")
        if backoff_max < backoff_min:  # type: ignore[operator]
            raise ConfigError("backoff needs backoff_min <= backoff_max")
        return cls(
            endpoints,
            batch,
            max_batch,
            float(request_timeout),  # type: ignore[arg-type]
            float(wait_timeout),  # type: ignore[arg-type]
            float(backoff_min),  # type: ignore[arg-type]
            float(backoff_max),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class BatchRequest:
    """One batch route and what its answer must hold."""

    path: str
    """Path and query, e.g. ``/api/v1/segment/orders/ids?count=1000&stringify_ids=true``."""
    count: int
    """Ids asked for: a body with more is invalid."""
    tag: Optional[str]
    """The tag the body must name (segment route); ``None`` for snowflake."""

    @classmethod
    def segment(cls, tag: str, count: int) -> "BatchRequest":
        """The segment route of a (valid) tag."""
        return cls(f"/api/v1/segment/{tag}/ids?count={count}&stringify_ids=true", count, tag)

    @classmethod
    def snowflake(cls, count: int) -> "BatchRequest":
        """The snowflake route."""
        return cls(f"/api/v1/snowflake/ids?count={count}&stringify_ids=true", count, None)


class ServerFailure(Exception):
    """Internal: one server failed one request (it is marked down, the next one is asked)."""

    def __init__(self, fault: ServerFault) -> None:
        super().__init__(str(fault))
        self.fault = fault


class AllFailed(Exception):
    """Internal: every server failed one fetch round; ``last`` is the last failure."""

    def __init__(self, last: Optional[ServerFault]) -> None:
        super().__init__(str(last))
        self.last = last


class Behind(NamedTuple):
    """A 200 answer whose last id lay at or below the floor, read from its tail only
    (:func:`behind_tail`): discarded whole."""

    ids: int
    """Ids in the answer (its commas, plus one)."""
    last: int
    """Its last id."""


_TAIL = re.compile(rb'"([1-9][0-9]{0,18})"\]\}\s*\Z')


def behind_tail(body: bytes, req: BatchRequest, floor: int) -> Optional[Behind]:
    """The size and last id of a 200 body that ends the way leafid writes a batch
    (``..."ids":[...,"<last id>"]}``) when that last id lies at or below ``floor``; else ``None``,
    and the body is parsed whole. Reads the tail and counts commas: a catch-up discards answer
    after answer of 100,000 ids, and decoding each of them (about 100 ms a batch) would cost more
    than the request; none of them is handed out, so none needs validating."""
    if floor <= 0:
        return None
    m = _TAIL.search(body, max(0, len(body) - 64))
    if m is None:
        return None
    last = int(m.group(1))
    if last > floor:
        return None
    # The array's opening, near the start (a tag cannot hold a quote).
    start = body.find(b'"ids":[', 0, m.start())
    if start < 0:
        return None
    ids = body.count(b",", start) + 1
    return Behind(ids, last) if ids <= req.count else None


def catch_up_count(floor: int, last: int, batch: int) -> int:
    """The catch-up rule: after an answer lying wholly at or below the floor (its server is
    behind the one used before: a lower segment of a lagging or restored database, or snowflake
    ids of older ticks), the next request follows at once, without a pause, for enough ids to
    pass the floor: those from the answer's ``last`` id up to the floor, plus a ``batch``, within
    ``batch..=MAX_BATCH`` (the server's limit). A segment server's next ids follow its last ones,
    so a gap within one request is passed in one step; a larger one takes one MAX_BATCH request
    per 100,000 ids, each discarded (counted in ``discarded_ids``) after reading only its tail
    (:func:`behind_tail`)."""
    return max(batch, min(floor - last + batch, MAX_BATCH))


def interpret(
    server: str, status: int, body: bytes, req: BatchRequest, floor: int = 0
) -> Union[List[int], Behind]:
    """The ids of one answer, or :class:`Behind` (a 200 whose last id lies at or below
    ``floor``), or :class:`RejectedError` (a refusal that holds on every server), or
    :class:`ServerFailure` (this server's failure: any other 4xx, a 5xx, a bad 200 body)."""
    if 400 <= status < 500:
        code, message = _error_body(body)
        if code in REFUSAL_CODES:
            raise RejectedError(server, status, code, message)
        raise ServerFailure(ServerFault(server, "status", f"HTTP {status} {code or '(no code)'}"))
    if status != 200:
        raise ServerFailure(ServerFault(server, "status", f"HTTP {status}"))
    behind = behind_tail(body, req, floor)
    if behind is not None:
        return behind
    try:
        return parse_batch(body, req)
    except ValueError as e:
        raise ServerFailure(ServerFault(server, "bad_response", str(e))) from None


def _error_body(body: bytes) -> "tuple[str, str]":
    try:
        doc = json.loads(body)
    except ValueError:
        return "", ""
    if not isinstance(doc, dict):
        return "", ""
    code, message = doc.get("code"), doc.get("message")
    return (code if isinstance(code, str) else "", message if isinstance(message, str) else "")


def parse_batch(body: bytes, req: BatchRequest) -> List[int]:
    """The ids of a 200 body, if it is a batch: JSON ``{"ids": [...]}`` (plus ``"biz_tag"`` equal
    to the tag asked, on the segment route) with 1..count ids, each a decimal string (or JSON
    integer) in 1..2^64-1, strictly increasing. Else ``ValueError``: none of its ids is used."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValueError(f"not JSON: {body[:80]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ids"), list):
        raise ValueError(f"no ids list: {body[:80]!r}")
    if req.tag is not None and doc.get("biz_tag") != req.tag:
        raise ValueError(f"asked for tag {req.tag!r}, got {doc.get('biz_tag')!r}")
    raw = doc["ids"]
    if not 1 <= len(raw) <= req.count:
        raise ValueError(f"{len(raw)} ids for a count of {req.count}")
    if all(type(x) is str for x in raw):
        # The usual body (stringify_ids=true), checked at C speed: non-empty ASCII digits only
        # (no sign, space, "_" or other Unicode digits, which int() would take).
        if not (all(raw) and all(map(str.isascii, raw)) and all(map(str.isdigit, raw))):
            bad = next(x for x in raw if not (x and x.isascii() and x.isdigit()))
            raise ValueError(f"id {bad!r} is not a decimal string")
        ids = list(map(int, raw))
    else:
        ids = []
        for item in raw:
            if isinstance(item, str) and _DECIMAL.fullmatch(item):
                ids.append(int(item))
            elif isinstance(item, int) and not isinstance(item, bool):
                ids.append(item)
            else:
                raise ValueError(f"id {item!r} is not a decimal integer")
    if not all(map(operator.lt, ids, itertools.islice(ids, 1, None))):
        bad = next(k for k in range(1, len(ids)) if ids[k - 1] >= ids[k])
        raise ValueError(f"ids not increasing: {ids[bad - 1]} then {ids[bad]}")
    # Increasing: the first and last bound them all.
    if ids[0] <= 0 or ids[-1] > MAX_ID:
        raise ValueError(f"ids {ids[0]}..{ids[-1]} not within 1..2^64-1")
    return ids


class _ServerState:
    """Health of one server."""

    __slots__ = ("endpoint", "down", "downs", "failures", "next_probe")

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.down = False
        """Set by a failed request or probe; cleared only by a 200 to a request sent after the
        last failure."""
        self.downs = 0
        """Times it was marked down: a 200 to a request sent before the latest failure (an answer
        in flight when the server was killed) is older news than that failure and does not mark
        it up."""
        self.failures = 0
        """Failures in a row (requests and probes): the probe backoff doubles with each."""
        self.next_probe = 0.0
        """A down server is probed at or after this ``time.monotonic()``."""


class ServerSet:
    """The servers of one client: which one is asked first, which are down, when to probe.

    Not locked: the blocking client calls it under its own lock, the asyncio one on its loop.
    Batches go to the *preferred* server (the last that answered), then to the other servers that
    are up, in the order given; only when all of them failed in a fetch are the down ones tried
    too (last resort), so a client never stalls behind a probe schedule while a server could
    answer.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        backoff_min: float,
        backoff_max: float,
        on_down: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.servers = [_ServerState(e) for e in endpoints]
        self.preferred = 0
        """Index of the server asked first."""
        self.failovers = 0
        """Requests sent to another server because the one asked before failed."""
        self._backoff = (backoff_min, backoff_max)
        self._on_down = on_down
        self._clock = clock

    def plan(self) -> Iterator[int]:
        """The servers to ask for one batch, in order, read lazily (a server marked down while
        the fetch runs is skipped): preferred, the other up ones, then the down ones."""
        n = len(self.servers)
        start = self.preferred
        tried = [False] * n
        for last_resort in (False, True):
            for k in range(n):
                i = (start + k) % n
                if tried[i] or (not last_resort and self.servers[i].down):
                    continue
                tried[i] = True
                yield i

    def succeeded(self, i: int, seen: int) -> None:
        """Server ``i`` delivered a batch to a request sent when its ``downs`` was ``seen``: up,
        and asked first from now on (unless it was marked down since)."""
        if self.mark_up(i, seen):
            self.preferred = i

    def mark_up(self, i: int, seen: int) -> bool:
        """Server ``i`` answered 200 (a batch or a probe) to a request sent when its ``downs``
        was ``seen``: up, unless it was marked down since. Returns whether it is marked up."""
        s = self.servers[i]
        if s.downs != seen:
            return False
        if s.down:
            log.info("leafid server %s is up again", s.endpoint.url)
        s.down = False
        s.failures = 0
        return True

    def mark_down(self, i: int, fault: Optional[ServerFault] = None) -> None:
        """Server ``i`` failed: down, probed after ``backoff_min * 2^(failures-1)`` (at most
        ``backoff_max``). Logged once per transition, not per failed probe."""
        s = self.servers[i]
        if not s.down:
            log.warning("leafid server %s marked down: %s", s.endpoint.url, fault or "probe failed")
        s.down = True
        s.downs += 1
        s.failures += 1
        s.next_probe = self._clock() + backoff(*self._backoff, s.failures)
        self._on_down()

    def due_probes(self) -> List[int]:
        """The down servers whose probe is due."""
        now = self._clock()
        return [i for i, s in enumerate(self.servers) if s.down and s.next_probe <= now]

    def next_probe_in(self) -> Optional[float]:
        """Seconds until the next probe is due (0 if one is), ``None`` when no server is down."""
        now = self._clock()
        due = [s.next_probe for s in self.servers if s.down]
        return max(min(due) - now, 0.0) if due else None

    def down_urls(self) -> List[str]:
        """Base URLs of the servers marked down."""
        return [s.endpoint.url for s in self.servers if s.down]


@dataclass(frozen=True)
class Stats:
    """Counters of one client (summed over its supplies) or of one supply."""

    ids_served: int = 0
    """Ids handed to callers."""
    batches: int = 0
    """200 answers whose ids were taken into a local buffer (at least one above the floor)."""
    failovers: int = 0
    """Times a request went to another server because the one asked failed (client-wide;
    always 0 in a supply's stats)."""
    discarded_ids: int = 0
    """Ids received in 200 answers but never handed out: not above the supply's floor."""
    ids_received: int = 0
    """Ids received in valid 200 answers, discarded ones included."""
    failed_rounds: int = 0
    """Fetch rounds in which no server delivered a batch."""
    batch_size: int = 0
    """Ids the supply's next request asks for (adaptive: it grows); in a client's stats, the
    largest of its supplies."""

    def __add__(self, other: "Stats") -> "Stats":
        return Stats(
            self.ids_served + other.ids_served,
            self.batches + other.batches,
            self.failovers + other.failovers,
            self.discarded_ids + other.discarded_ids,
            self.ids_received + other.ids_received,
            self.failed_rounds + other.failed_rounds,
            max(self.batch_size, other.batch_size),
        )


class SupplyCore:
    """One id stream's state: the current batch, at most one next batch, the floor.

    Not locked: every method runs under the blocking supply's lock, or on the asyncio loop.

    Invariants: every batch holds only ids above every id of the batches accepted before it (the
    floor), and a batch is replaced only once exhausted, so ids taken in order strictly
    increase; an index of the current batch is taken once, so no id is handed out twice.
    """

    __slots__ = (
        "ids",
        "pos",
        "preload_at",
        "next",
        "floor",
        "refilling",
        "refused",
        "last_fault",
        "served_before",
        "batches",
        "received",
        "discarded",
        "failed_rounds",
        "count",
        "min_count",
        "max_count",
        "starved",
        "promoted_at",
    )

    SHRINK_AFTER = 60.0
    """A batch used up more slowly than this (seconds) halves the next request (adaptive)."""

    def __init__(self, min_count: int = 1, max_count: int = 1) -> None:
        self.ids: List[int] = []
        """The batch being served: strictly increasing, all above every earlier batch."""
        self.pos = 0
        """Index of the next id of ``ids`` to hand out."""
        self.preload_at = 0
        """The index whose taker starts the refill: 10% of the batch, as the server preloads."""
        self.next: Optional[List[int]] = None
        """The batch to serve after the current one, once fetched."""
        self.floor = 0
        """The largest id accepted into a batch (0 before the first: ids are positive)."""
        self.refilling = False
        """True while a refill runs (single flight)."""
        self.refused: Optional[RejectedError] = None
        """Set when the last refill was refused; cleared when a refill starts."""
        self.last_fault: Optional[ServerFault] = None
        """The last server failure of the refills, for UnavailableError; cleared by a batch."""
        self.served_before = 0
        """Ids handed out from the batches before the current one (served = this + pos)."""
        self.batches = 0
        self.received = 0
        self.discarded = 0
        self.failed_rounds = 0
        self.count = min_count
        """Ids the next refill asks for: ``min_count`` doubling up to ``max_count`` each time a
        caller had to wait for a batch, halving when a batch lasted over ``SHRINK_AFTER``."""
        self.min_count = min_count
        self.max_count = max_count
        self.starved = False
        """A caller found both batches spent since the last refill started (after the first)."""
        self.promoted_at = time.monotonic()
        """When the current batch started being served."""

    def take(self) -> "tuple[Optional[int], bool]":
        """The next id (``None`` when both batches are spent) and whether to start a refill
        (the id taken was the current batch's preload mark, and no next batch is there)."""
        i = self.pos
        ids = self.ids
        if i >= len(ids):
            nxt = self.next
            if nxt is None:
                return None, False
            self.served_before += len(ids)
            self.ids = ids = nxt
            self.next = None
            self.preload_at = len(nxt) // 10
            i = 0
            if self.max_count > self.min_count:
                now = time.monotonic()
                if now - self.promoted_at > self.SHRINK_AFTER:
                    self.count = max(self.count // 2, self.min_count)
                self.promoted_at = now
        self.pos = i + 1
        return ids[i], i == self.preload_at and self.next is None

    def begin_refill(self) -> bool:
        """Whether a refill should start now (none runs and no next batch); if so, marks one
        running and clears the last refusal."""
        if self.refilling or self.next is not None:
            return False
        self.refilling = True
        self.refused = None
        if self.starved:
            self.starved = False
            self.count = min(self.count * 2, self.max_count)
        return True

    def starve(self) -> None:
        """A caller found both batches spent (and must wait): the next request asks for more,
        if adaptive (not for the first batch: an empty supply is no sign of demand)."""
        if self.batches:
            self.starved = True

    def discard(self, behind: Behind) -> None:
        """Counts an answer whose tail showed it wholly at or below the floor as discarded."""
        self.received += behind.ids
        self.discarded += behind.ids

    def accept(self, ids: List[int]) -> bool:
        """Takes a validated batch as the next one, cut to its ids above the floor. False (and
        nothing kept) when none is above: that server is behind; the caller asks again."""
        self.received += len(ids)
        # Strictly increasing: the ids at or below the floor are a prefix.
        cut = bisect.bisect_right(ids, self.floor)
        if cut:
            self.discarded += cut
            ids = ids[cut:]
        if not ids:
            return False
        assert self.next is None, "single flight: one refill fills next"
        self.floor = ids[-1]
        self.next = ids
        self.last_fault = None
        self.batches += 1
        return True

    def close(self) -> None:
        """Drops the local batches (a closed client hands out nothing): the fast path finds
        the current batch spent and the slow path raises."""
        self.served_before += self.pos
        self.ids, self.pos, self.next = [], 0, None

    def stats(self) -> Stats:
        """This supply's counters (``batch_size``: what the next request asks for)."""
        return Stats(
            ids_served=self.served_before + self.pos,
            batch_size=self.count,
            batches=self.batches,
            discarded_ids=self.discarded,
            ids_received=self.received,
            failed_rounds=self.failed_rounds,
        )
