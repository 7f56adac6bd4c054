"""The client's errors: what a caller of ``next_id`` (or a constructor) can get.

Every error is a :class:`LeafidError`. A caller usually handles two of them:

- :class:`RejectedError`: a server refused the request itself (an unknown or exhausted tag...).
  Every server shares the database and would answer the same, so no other server was asked.
- :class:`UnavailableError`: no ids within the wait timeout; every server failed or is down.

With a caller token, :class:`ThrottledError` too: the token's quota is spent for longer than the
wait timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = [
    "LeafidError",
    "InvalidTagError",
    "ConfigError",
    "RejectedError",
    "UnavailableError",
    "ThrottledError",
    "ClientClosedError",
    "ServerFault",
]


@dataclass(frozen=True)
class ServerFault:
    """One server's failure to deliver a batch; that server is then marked down.

    ``kind`` is ``"transport"`` (no HTTP answer: refused or reset connection, timeout),
    ``"status"`` (a 5xx, or a 4xx that is this server's own, such as ``engine_disabled``),
    ``"bad_response"`` (a 200 whose body is not a valid batch: none of its ids is used) or
    ``"behind"`` (a valid batch wholly at or below the ids already received: a lagging server,
    its ids discarded while the client catches up).
    """

    server: str
    """Base URL of the server."""
    kind: str
    """``"transport"``, ``"status"``, ``"bad_response"`` or ``"behind"``."""
    detail: str
    """What happened, for humans."""

    def __str__(self) -> str:
        return f"{self.server}: {self.kind}: {self.detail}"


class LeafidError(Exception):
    """Base class of every error this package raises."""


class InvalidTagError(LeafidError, ValueError):
    """The tag is not 1 to 128 characters of ``A-Z a-z 0-9 . _ : -``; no request was sent."""

    def __init__(self, tag: object) -> None:
        if tag is None:
            msg = "the biz tag is missing (None): give 1 to 128 of A-Z a-z 0-9 . _ : -"
        elif not isinstance(tag, str):
            msg = f"a biz tag must be a str, got {type(tag).__name__} {tag!r}"
        else:
            msg = f"invalid biz tag {tag!r}: 1 to 128 of A-Z a-z 0-9 . _ : -"
        super().__init__(msg)
        self.tag = tag


class ConfigError(LeafidError, ValueError):
    """The client's settings are unusable (no server, a URL that is not ``http://`` or
    ``https://``, a batch outside 1..=1000000, a bad timeout or backoff)."""


class RejectedError(LeafidError):
    """A server refused the request itself: a 4xx whose code is ``unknown_biz_tag``,
    ``invalid_biz_tag``, ``biz_tag_exhausted``, ``invalid_count``, ``invalid_request`` or
    ``formatted_tag`` (a numeric supply on a formatted tag), or ``invalid_time_range`` (a range
    :meth:`~leafid_client.Client.snowflake_bounds` cannot answer); a 503 ``sequence_exhausted`` (a
    formatted tag's period ran out of its width); or, on a formatted supply, a 200 list of
    numbers without ``period_end`` (``status`` 200, ``code`` ``not_formatted``: the tag is plain);
    or the caller token refused by leafid: 401 ``unauthorized`` (missing, unknown or revoked) or
    403 ``forbidden`` (not scoped to the tag). (A proxy's 401/403/429 without leafid's ``code`` is
    that server's failure: the next one is asked.)

    Not a failover: the servers share one database, so asking another would not help.
    """

    def __init__(self, server: str, status: int, code: str, message: str) -> None:
        super().__init__(f"{server} refused the request ({status} {code}): {message}")
        self.server = server
        """The server that answered."""
        self.status = status
        """The HTTP status."""
        self.code = code
        """The body's stable ``code``."""
        self.message = message
        """The body's ``message``."""

    def copy(self) -> "RejectedError":
        """A fresh instance (one refusal is raised to every caller that waited for it)."""
        return RejectedError(self.server, self.status, self.code, self.message)


class ThrottledError(LeafidError):
    """The caller token's quota is spent: leafid answered 429 ``quota_exhausted`` (the token's
    rate for now, or a formatted tag's share of its period) with a ``Retry-After`` that ends past
    the wait timeout. A shorter ``Retry-After`` is waited out by the client, which then asks the
    same server again: every server shares the quota, so the client never fails over for it."""

    def __init__(self, server: str, code: str, message: str, retry_after: float) -> None:
        super().__init__(
            f"{server} throttled the request (429 {code}, retry after {retry_after:g} s): {message}"
        )
        self.server = server
        """The server that answered."""
        self.status = 429
        """The HTTP status."""
        self.code = code
        """The body's stable ``code`` (``quota_exhausted``)."""
        self.message = message
        """The body's ``message``."""
        self.retry_after = retry_after
        """The server's ``Retry-After`` in seconds: when asking again may succeed."""

    def copy(self) -> "ThrottledError":
        """A fresh instance (raised to every caller that waited for it)."""
        return ThrottledError(self.server, self.code, self.message, self.retry_after)


class UnavailableError(LeafidError):
    """No ids within the wait timeout: every server failed or is down.

    ``last`` names the last server failure seen by the refill (``None`` if no request had
    finished yet: the wait was shorter than a request, or the only server hangs longer than the
    wait); a lagging server's shows kind ``"behind"``.
    """

    def __init__(
        self, waited: float, last: Optional[ServerFault], wait: Optional[float] = None
    ) -> None:
        limit = waited if wait is None else wait
        msg = f"no ids came within the {limit * 1000:.0f} ms wait"
        if last is None:
            msg += " (no request had finished yet)"
        elif last.kind == "behind":
            msg += f": the server answering lags behind ({last})"
        else:
            msg += f": every server failed (last: {last})"
        super().__init__(msg)
        self.waited = waited
        """Seconds the call waited."""
        self.wait = limit
        """The call's wait timeout, in seconds."""
        self.last = last
        """The last server failure, if any."""


class ClientClosedError(LeafidError):
    """The client was closed: it hands out no more ids."""
