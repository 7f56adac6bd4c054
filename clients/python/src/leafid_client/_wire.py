"""The wire: the batch routes a supply asks, and what one HTTP answer means.

:func:`interpret` turns one answer into the runs of a batch, a :class:`RejectedError` (a refusal
every server would repeat) or a :class:`ServerFailure` (that server's failure). Only runs that
pass :func:`parse_ranges` are ever handed out. No I/O here.
"""

from __future__ import annotations

import calendar
import datetime
import json
import re
import urllib.parse
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Protocol, Tuple, TypeVar, Union

from .errors import InvalidTagError, RejectedError, ServerFault, ThrottledError

MAX_ID = (1 << 63) - 1
"""Largest id a body may hold (ids are positive i64)."""

MAX_SEGMENT_COUNT = 1_000_000
"""Most ids one segment range request may ask for (the route's limit)."""

MAX_SNOWFLAKE_COUNT = 100_000
"""Most ids one snowflake range request may ask for (the route's limit)."""

MAX_FORMATTED_COUNT = 100_000
"""Most ids one formatted (list route) request may ask for (the route's limit)."""

REFUSAL_CODES = frozenset(
    {
        "unknown_biz_tag",
        "invalid_biz_tag",
        "biz_tag_exhausted",
        "invalid_count",
        "invalid_request",
        "formatted_tag",
        "invalid_time_range",
    }
)
"""4xx codes that refuse the request itself: every server would answer the same
(``formatted_tag``: a numeric supply asked the range route of a formatted tag;
``invalid_time_range``: the bounds route's refusal of an empty range, or one outside the layout
every server shares)."""

REFUSAL_503_CODES = frozenset({"sequence_exhausted"})
"""503 codes that refuse the request itself: a formatted tag's period ran out of its width,
every server answers the same until the next period."""


def refusal_is_final(status: int, code: str) -> bool:
    """Whether an error answer holds on every server (it reaches the caller as
    :class:`RejectedError`) or is only this server's (the next one is asked): a 4xx whose code
    is in :data:`REFUSAL_CODES`, a 503 in :data:`REFUSAL_503_CODES`, or the caller token refused
    by leafid itself, 401 ``unauthorized`` and 403 ``forbidden`` (every server reads the same
    tokens) (``clients/conformance/vectors/errors.json``)."""
    if status == 401:
        return code == "unauthorized"
    if status == 403:
        return code == "forbidden"
    if 400 <= status < 500:
        return code in REFUSAL_CODES
    return status == 503 and code in REFUSAL_503_CODES

def quota_wait(status: int, code: str) -> bool:
    """Whether an error answer is leafid's 429 ``quota_exhausted``: the caller token's quota is
    spent on every server (they share it), so the client waits ``Retry-After`` and asks the same
    server again (never another, never a failover); a proxy's 429 is a failover (action
    ``wait`` in ``clients/conformance/vectors/errors.json``)."""
    return status == 429 and code == "quota_exhausted"


def throttled(
    server: str, status: int, body: bytes, retry_after: Optional[str]
) -> Optional[ThrottledError]:
    """The :class:`ThrottledError` of a 429 ``quota_exhausted`` answer, else ``None``. Its
    ``retry_after`` is the header's whole seconds, 1 when absent or unreadable (a wait is never
    zero: no busy loop)."""
    if status != 429:
        return None
    code, message = _error_body(body)
    if not quota_wait(status, code):
        return None
    try:
        seconds = max(1, int((retry_after or "").strip()))
    except ValueError:
        seconds = 1
    return ThrottledError(server, code, message, float(seconds))


NOT_FORMATTED = "not_formatted"
"""The code of the refusal a formatted supply raises when its tag is plain (a 200 list body
with numeric ids and no ``period_end``)."""

Run = Tuple[int, int]
"""Consecutive ids ``first..=last``."""


@dataclass(frozen=True)
class FormattedBatch:
    """A formatted tag's batch: its texts, all of one period; increasing as byte strings unless
    ``ordered`` is false (a permuted tag: in the order the server issued them, no order shown)."""

    ids: List[str]
    period: str
    """The period's key (``yyyyMMdd`` ...; empty when the sequence never restarts)."""
    period_end: float
    """When the period ends, in seconds since the epoch: the batch is dropped then."""
    ordered: bool = True
    """The answer's ``ordered`` (absent: true). False for a permuted tag: its texts are handed
    out in the order received, with no floor (uniqueness is the server's)."""


class Ranges(List[Run]):
    """The runs of one range answer, in order, and whether the answer carried ``"strict":
    true`` (issue 45: the tag is strict, every id is greater than every id whose answer was
    complete before its request was sent; a client must not buffer its ids)."""

    strict: bool = False


Batch = Union[Ranges, FormattedBatch]
"""What one valid answer holds: runs of ids (segment, snowflake) or texts (formatted)."""

_TAG = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_DECIMAL = re.compile(r"[1-9][0-9]{0,18}")


def valid_tag(tag: object) -> bool:
    """The server's tag rule: 1 to 128 of ``A-Z a-z 0-9 . _ : -``."""
    return isinstance(tag, str) and _TAG.fullmatch(tag) is not None


def check_tag(tag: object) -> str:
    """``tag`` if valid, else :class:`InvalidTagError`."""
    if not valid_tag(tag):
        raise InvalidTagError(tag)
    assert isinstance(tag, str)
    return tag


@dataclass(frozen=True)
class BatchRequest:
    """One range request and what its answer must hold."""

    path: str
    """Path and query, e.g. ``/api/v1/segment/orders/ranges?count=1000&stringify_ids=true``."""
    count: int
    """Ids asked for: a body with more is invalid."""
    tag: Optional[str]
    """The tag the body must name (segment route); ``None`` for snowflake."""
    formatted: bool = False
    """The list route of a formatted tag: the body holds texts and ``period_end``."""

    @classmethod
    def segment(cls, tag: str, count: int) -> "BatchRequest":
        """The segment range route of a (valid) tag."""
        return cls(f"/api/v1/segment/{tag}/ranges?count={count}&stringify_ids=true", count, tag)

    @classmethod
    def snowflake(cls, count: int) -> "BatchRequest":
        """The snowflake range route."""
        return cls(f"/api/v1/snowflake/ranges?count={count}&stringify_ids=true", count, None)

    @classmethod
    def formatted_list(cls, tag: str, count: int) -> "BatchRequest":
        """The list route of a (valid) formatted tag: its ids as texts, with the period's end."""
        return cls(f"/api/v1/segment/{tag}/ids?count={count}", count, tag, True)

    def interpret(self, server: str, status: int, body: bytes) -> "Batch":
        """:func:`interpret` of an answer to this request."""
        return interpret(server, status, body, self)


class Bounds(NamedTuple):
    """The smallest and the largest snowflake id any worker can issue in a time range
    ``[from, to)`` under the servers' layout: ``WHERE id BETWEEN min_id AND max_id``."""

    min_id: int
    max_id: int


def rfc3339_ms(name: str, instant: object, up: bool = False) -> str:
    """An aware :class:`datetime.datetime` as RFC 3339 UTC with milliseconds and ``Z``
    (``2026-11-27T00:00:00.000Z``), a fraction of a millisecond cut, or rounded up when ``up``.
    :class:`TypeError` unless a ``datetime``; :class:`ValueError` when naive (no ``tzinfo``)."""
    if not isinstance(instant, datetime.datetime):
        raise TypeError(f"{name} must be a datetime.datetime, got {type(instant).__name__}")
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(
            f"{name} must be an aware datetime (e.g. datetime.now(timezone.utc)), got {instant!r}"
        )
    utc = instant.astimezone(datetime.timezone.utc)
    sub_ms = utc.microsecond % 1000
    if sub_ms and up:
        try:
            utc += datetime.timedelta(microseconds=1000 - sub_ms)
        except OverflowError:  # the last millisecond of year 9999: past any layout's end
            pass
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def bounds_instants(from_: object, to: object) -> "tuple[str, str]":
    """The query's ``from`` and ``to`` for ``[from_, to)``: ``from_`` rounded down to the
    millisecond, ``to`` rounded up when ``from_ < to`` (down otherwise: an empty range stays
    empty). A snowflake id carries only its tick, and every tick that overlaps the range is
    kept, as the server keeps them (``clients/conformance/vectors/bounds.json``)."""
    low = rfc3339_ms("from_", from_)
    up = isinstance(from_, datetime.datetime) and isinstance(to, datetime.datetime)
    try:
        up = up and from_ < to  # type: ignore[operator]
    except TypeError:  # naive against aware: rfc3339_ms names the naive one
        up = False
    return low, rfc3339_ms("to", to, up)


@dataclass(frozen=True)
class BoundsRequest:
    """One request of the snowflake bounds route."""

    path: str
    """``/api/v1/snowflake/bounds?from=..&to=..&stringify_ids=true``, the values URL-encoded."""

    @classmethod
    def between(cls, from_: object, to: object) -> "BoundsRequest":
        """The request for ``[from_, to)`` (aware datetimes, see :func:`rfc3339_ms`)."""
        low, high = bounds_instants(from_, to)
        query = urllib.parse.urlencode({"from": low, "to": high, "stringify_ids": "true"})
        return cls(f"/api/v1/snowflake/bounds?{query}")

    def interpret(self, server: str, status: int, body: bytes) -> Bounds:
        """The bounds of a 200 answer, or :class:`RejectedError` (``invalid_time_range``,
        ``invalid_request``: every server would answer the same), or :class:`ServerFailure`
        (any other 4xx such as ``engine_disabled``, a 5xx, a bad 200 body)."""
        if 400 <= status < 500:
            code, message = _error_body(body)
            if refusal_is_final(status, code):
                raise RejectedError(server, status, code, message)
            raise ServerFailure(
                ServerFault(server, "status", f"HTTP {status} {code or '(no code)'}")
            )
        if status != 200:
            raise ServerFailure(ServerFault(server, "status", f"HTTP {status}"))
        try:
            return parse_bounds(body)
        except ValueError as e:
            raise ServerFailure(ServerFault(server, "bad_response", str(e))) from None


def parse_bounds(body: bytes) -> Bounds:
    """The ids of a 200 bounds body ``{"min_id": "..", "max_id": "..", "layout", "from", "to",
    "first_tick", "last_tick"}``: both decimal strings in ``1..=2^63-1``
    with ``min_id <= max_id``; ``min_id`` may also be 0 (a range in the layout's first tick:
    a bound, never an id handed out). Else ``ValueError``."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValueError(f"not JSON: {body[:80]!r}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"not a bounds object: {body[:80]!r}")
    lo = doc.get("min_id")
    low = 0 if lo == "0" else _id(lo)
    high = _id(doc.get("max_id"))
    if low > high:
        raise ValueError(f"min_id {low} above max_id {high}")
    return Bounds(low, high)


T_co = TypeVar("T_co", covariant=True)


class Request(Protocol[T_co]):
    """What the clients' failover loop sends (:class:`BatchRequest`, :class:`BoundsRequest`):
    a path, and what an answer to it means."""

    @property
    def path(self) -> str: ...

    def interpret(self, server: str, status: int, body: bytes) -> T_co:
        """The answer's value, or :class:`RejectedError`, or :class:`ServerFailure`."""
        ...


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


def interpret(server: str, status: int, body: bytes, req: BatchRequest) -> Batch:
    """The batch of one answer (runs, or texts for a formatted request), or
    :class:`RejectedError` (a refusal that holds on every server), or :class:`ServerFailure`
    (this server's failure: any other 4xx, a 5xx, a bad 200 body)."""
    if 400 <= status < 500 or status == 503:
        code, message = _error_body(body)
        if refusal_is_final(status, code):
            raise RejectedError(server, status, code, message)
        raise ServerFailure(ServerFault(server, "status", f"HTTP {status} {code or '(no code)'}"))
    if status != 200:
        raise ServerFailure(ServerFault(server, "status", f"HTTP {status}"))
    try:
        if req.formatted:
            return parse_formatted(server, body, req)
        return parse_ranges(body, req)
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


def _id(value: object) -> int:
    """A run end: a decimal string in 1..=2^63-1 (a JSON number is not what was asked)."""
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        n = int(value)
    else:
        raise ValueError(f"id {value!r} is not a decimal string")
    if not 0 < n <= MAX_ID:
        raise ValueError(f"id {n} not within 1..=2^63-1")
    return n


def parse_ranges(body: bytes, req: BatchRequest) -> Ranges:
    """The runs of a 200 body, if it is a range batch: JSON ``{"count": n, "ranges":
    [{"first": a, "last": b}, ...]}`` (plus ``"biz_tag"`` equal to the tag asked, on the segment
    route) where every run has ``0 < first <= last <= 2^63-1``, the runs increase without
    overlapping, and their sizes add up to ``count``, within ``1..=`` the count asked. Else
    ``ValueError``: none of its ids is used."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValueError(f"not JSON: {body[:80]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ranges"), list):
        raise ValueError(f"no ranges list: {body[:80]!r}")
    if req.tag is not None and (
        not isinstance(doc.get("biz_tag"), str) or doc.get("biz_tag") != req.tag
    ):
        raise ValueError(f"asked for tag {req.tag!r}, got {doc.get('biz_tag')!r}")
    count = doc.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= req.count:
        raise ValueError(f"count {count!r} for a request of {req.count}")
    runs = Ranges()
    # Only a JSON true marks the tag strict (absent on every other tag); anything else is read
    # as not strict, which at worst keeps the buffering the client did before strict tags.
    runs.strict = doc.get("strict") is True
    total = 0
    previous = 0
    for item in doc["ranges"]:
        if not isinstance(item, dict):
            raise ValueError(f"run {item!r} is not an object")
        first, last = _id(item.get("first")), _id(item.get("last"))
        if first > last:
            raise ValueError(f"run {first}..{last} is empty")
        if first <= previous:
            raise ValueError(f"run {first}..{last} does not lie above the one before ({previous})")
        runs.append((first, last))
        total += last - first + 1
        previous = last
    if total != count:
        raise ValueError(f"runs of {total} ids for a count of {count}")
    return runs


_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))"
)


def rfc3339_unix_ms(text: object) -> int:
    """An RFC 3339 instant as whole milliseconds since the epoch (the fraction cut), else
    ``ValueError``: the subset the server writes (upper-case ``T`` and ``Z``, no leap second,
    offsets within +-23:59; ``clients/conformance/vectors/rfc3339.json``). Years up to 9999 (a
    tag that never resets ends at the server's largest instant)."""
    m = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"period_end {text!r} is not an RFC 3339 instant")
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1] and h <= 23 and mi <= 59
            and sec <= 59):
        raise ValueError(f"period_end {text!r} is not a valid instant")
    ms = calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0)) * 1000
    ms += int(((m.group(7) or ".")[1:] + "000")[:3])
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValueError(f"period_end {text!r} has an offset out of range")
        offset = (oh * 3600 + om * 60) * 1000
        ms -= offset if m.group(9) == "+" else -offset
    return ms


def parse_rfc3339(text: object) -> float:
    """:func:`rfc3339_unix_ms` in seconds since the epoch."""
    return rfc3339_unix_ms(text) / 1000


def parse_formatted(server: str, body: bytes, req: BatchRequest) -> FormattedBatch:
    """The texts of a formatted tag's 200 list body ``{"biz_tag", "ids": ["..."], "period",
    "period_end", "ordered"}``: ``ids`` a non-empty list of non-empty strings, no longer than
    asked, increasing as byte strings (unless ``ordered`` is false: then only none twice),
    ``biz_tag`` the tag asked, ``period_end`` an RFC 3339 instant, ``ordered`` a boolean or
    absent (true).
    A body with numeric ids and no ``period_end`` is a plain tag's: :class:`RejectedError`
    ``not_formatted`` (every server would answer the same). Anything else: ``ValueError``."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValueError(f"not JSON: {body[:80]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ids"), list) or not doc["ids"]:
        raise ValueError(f"no ids list: {body[:80]!r}")
    ids = doc["ids"]
    # The tag first: numbers of another tag are that server's failure, not a plain tag.
    if doc.get("biz_tag") != req.tag:
        raise ValueError(f"asked for tag {req.tag!r}, got {doc.get('biz_tag')!r}")
    if "period_end" not in doc and all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise RejectedError(
            server, 200, NOT_FORMATTED, f"tag {req.tag!r} is plain: its ids are numbers"
        )
    if len(ids) > req.count:
        raise ValueError(f"{len(ids)} ids for a request of {req.count}")
    ordered = doc.get("ordered", True)
    if not isinstance(ordered, bool):
        raise ValueError(f"ordered {ordered!r} is not a boolean")
    if ordered:
        previous = ""
        for i in ids:
            if not isinstance(i, str) or not i:
                raise ValueError(f"id {i!r} is not a non-empty string")
            # Code-point order of str is the byte order of their UTF-8 encodings.
            if i <= previous:
                raise ValueError(f"id {i!r} does not lie above the one before ({previous!r})")
            previous = i
    else:
        # A permuted tag: no order to check (it is hidden on purpose). Uniqueness is the
        # server's; a text twice within one answer is still caught here, at no cost that
        # counts beside the JSON parse.
        for i in ids:
            if not isinstance(i, str) or not i:
                raise ValueError(f"id {i!r} is not a non-empty string")
        if len(set(ids)) != len(ids):
            raise ValueError("a text twice in one answer")
    period = doc.get("period", "")
    return FormattedBatch(
        ids,
        period if isinstance(period, str) else "",
        parse_rfc3339(doc.get("period_end")),
        ordered,
    )
