"""leafid_client: ids from leafid servers, served in-process.

Per tag, a supply keeps two local batches of ids fetched from the server's batch route
(``GET /api/v1/segment/{tag}/ids?count=N``) and fetches the next one in the background once 10%
of the current one is used, so ``next_id`` is a local index on the fast path. Snowflake ids are
buffered the same way from ``GET /api/v1/snowflake/ids``.

Guarantees, per supply (one tag, or snowflake) of one client:

- only ids received in a valid 200 body are handed out, none twice;
- ids strictly increase in the order ``next_id`` calls return, across all callers and across
  failovers (ids of a lagging server not above the last batch are discarded and counted);
- while any server answers, a caller sees no error: a failing server is marked down and the
  next one asked in the same call; a probe of ``/health/ready`` on an exponential backoff
  brings it back.

Layout: ``client.py`` (:class:`Client`, blocking, threads), ``aio.py`` (:class:`AsyncClient`,
asyncio), ``_core.py`` (validation, server set, the double buffer and floor, shared by both),
``errors.py``.
"""

from ._core import MAX_BATCH, Stats, valid_tag
from .aio import AsyncClient, AsyncSegmentSupply, AsyncSnowflakeSupply
from .client import Client, SegmentSupply, SnowflakeSupply
from .errors import (
    ClientClosedError,
    ConfigError,
    InvalidTagError,
    LeafidError,
    RejectedError,
    ServerFault,
    UnavailableError,
)

__version__ = "0.1.0"

__all__ = [
    "MAX_BATCH",
    "AsyncClient",
    "AsyncSegmentSupply",
    "AsyncSnowflakeSupply",
    "Client",
    "ClientClosedError",
    "ConfigError",
    "InvalidTagError",
    "LeafidError",
    "RejectedError",
    "SegmentSupply",
    "ServerFault",
    "SnowflakeSupply",
    "Stats",
    "UnavailableError",
    "valid_tag",
]
