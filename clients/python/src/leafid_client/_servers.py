"""Which server a request goes to: the parsed server URLs (:class:`Endpoint`), their health
and failover order (:class:`ServerSet`), and the probe backoff. No I/O here: the clients send the
requests and probes and report the outcome.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Sequence

from .errors import ConfigError, ServerFault

log = logging.getLogger("leafid_client")


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
    secure: bool = False
    """``https://``: TLS with the default SSL context (system CAs, host name checked)."""

    @property
    def host_header(self) -> str:
        """The ``Host`` header value."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.secure else 80) else f"{host}:{self.port}"

    @classmethod
    def parse(cls, url: object) -> "Endpoint":
        """An ``http://`` or ``https://host[:port][/prefix]`` URL, else :class:`ConfigError`."""
        if not isinstance(url, str):
            raise ConfigError(f"a server URL must be a str, got {url!r}")
        base = url.rstrip("/")
        try:
            parts = urllib.parse.urlsplit(base)
            port = parts.port
        except ValueError as e:
            raise ConfigError(f"not an http(s):// URL: {url!r} ({e})") from None
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            raise ConfigError(f"not an http(s)://host[:port] URL: {url!r}")
        secure = parts.scheme == "https"
        if port is None:
            port = 443 if secure else 80
        return cls(base, parts.hostname, port, parts.path, secure)


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
