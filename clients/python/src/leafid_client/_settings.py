"""The settings of one client, checked once by the constructors of both clients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ._servers import Endpoint
from ._wire import MAX_SEGMENT_COUNT
from .errors import ConfigError

MAX_BATCH = MAX_SEGMENT_COUNT
"""Largest ``batch``/``max_batch``: the segment range route's limit (a snowflake supply never
asks for more than 100,000, its route's limit)."""


def check_token(token: object) -> Optional[str]:
    """The ``Authorization`` value (``Bearer <token>``) of the ``token`` setting, or ``None``
    without one; :class:`ConfigError` unless it is printable ASCII without spaces. The value is
    never logged nor shown in a ``repr``."""
    if token is None:
        return None
    if not isinstance(token, str) or not token or any(not ("!" <= ch <= "~") for ch in token):
        raise ConfigError("token must be a non-empty str of printable ASCII without spaces")
    return f"Bearer {token}"


def check_clock(clock: object) -> Callable[[], float]:
    """The ``clock`` setting if it is a callable returning unix seconds (one call, as a
    check), else :class:`ConfigError`."""
    if not callable(clock):
        raise ConfigError(f"clock must be a callable returning unix seconds (got {clock!r})")
    try:
        now = clock()
    except Exception as e:
        raise ConfigError(f"clock() raised {type(e).__name__}: {e}") from None
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        raise ConfigError(f"clock() must return unix seconds as a number (got {now!r})")
    return clock


def _count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_BATCH:
        raise ConfigError(f"{name} must be an int within {low}..={MAX_BATCH} (got {value!r})")
    return value


@dataclass(frozen=True)
class Settings:
    """The validated settings of one client (seconds for every duration)."""

    endpoints: Sequence[Endpoint]
    batch: int
    """Ids of a supply's first request, and the least it ever asks for."""
    max_batch: int
    """The most a supply asks for as its size follows demand."""
    target_lifetime: float
    """How long a batch should last at the callers' rate (the demand rule)."""
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
        target_lifetime: object,
        request_timeout: object,
        wait_timeout: object,
        backoff_min: object,
        backoff_max: object,
    ) -> "Settings":
        """Checks every setting, else :class:`ConfigError`."""
        if isinstance(servers, str):
            servers = [servers]
        if not isinstance(servers, (list, tuple)) or not servers:
            raise ConfigError("give at least one server URL (a list of http(s)://host:port)")
        endpoints = [Endpoint.parse(u) for u in servers]
        low = _count("batch", batch, 1)
        high = _count("max_batch", MAX_BATCH if max_batch is None else max_batch, low)
        durations = {
            "target_lifetime": target_lifetime,
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
            low,
            high,
            float(target_lifetime),  # type: ignore[arg-type]
            float(request_timeout),  # type: ignore[arg-type]
            float(wait_timeout),  # type: ignore[arg-type]
            float(backoff_min),  # type: ignore[arg-type]
            float(backoff_max),  # type: ignore[arg-type]
        )

