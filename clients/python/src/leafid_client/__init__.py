"""leafid_client: ids from leafid servers, served in-process.

Per tag, a supply keeps two local batches of ids fetched from the server's range route
(``GET /api/v1/segment/{tag}/ranges?count=N``: runs of consecutive ids) and fetches the next one
in the background once 10% of the current one is used, so ``next_id`` is one ``next()`` on a
range iterator (one increment and one compare, in C) on the local path. Snowflake ids are buffered the same way
from ``GET /api/v1/snowflake/ranges``. A formatted tag's ids (text, such as daily order numbers)
come from ``GET /api/v1/segment/{tag}/ids`` with their period's end, through
``client.formatted(tag).next_id()`` (``str``), buffered the same way; a batch whose period has
ended by the client's clock (the ``clock`` setting) is dropped (:mod:`leafid_client._formatted`);
a permuted tag's texts (``"ordered": false``) come in no order, handed out as received.
``client.snowflake_bounds(from_, to)`` gives the ids a time range can hold (:class:`Bounds`).
The size of a request
follows demand: a batch should last
about ``target_lifetime`` (1 s) at the callers' rate, between ``batch`` and ``max_batch``.

Guarantees, per supply (one tag, or snowflake) of one client:

- only ids received in a valid 200 body are handed out, none twice;
- ids strictly increase in the order ``next_id`` calls return, across all callers and across
  failovers (ids of a lagging server not above the last batch are discarded and counted);
- while any server answers, a caller sees no error: a failing server is marked down and the
  next one asked in the same call; a probe of ``/health/ready`` on an exponential backoff
  brings it back.

Layout (as in the other leafid clients): ``client.py`` (:class:`Client`, blocking, threads),
``aio.py`` (:class:`AsyncClient`, asyncio), ``_servers.py`` (server URLs, health, failover
order, probe backoff), ``_supply.py`` (the range buffer, the floor, the demand rule, the
catch-up; the local path's invariants), ``_wire.py`` (routes, answer validation),
``_formatted.py`` (the formatted supply's buffer of texts, the period rule, the string floor),
``_settings.py``, ``errors.py``. Everything but the two clients' I/O is shared by both.
"""

from ._settings import MAX_BATCH
from ._supply import Stats
from ._wire import MAX_FORMATTED_COUNT, MAX_SNOWFLAKE_COUNT, Bounds, valid_tag
from .aio import AsyncClient, AsyncFormattedSupply, AsyncSegmentSupply, AsyncSnowflakeSupply
from .client import Client, FormattedSupply, SegmentSupply, SnowflakeSupply
from .errors import (
    ClientClosedError,
    ConfigError,
    InvalidTagError,
    LeafidError,
    RejectedError,
    ServerFault,
    ThrottledError,
    UnavailableError,
)

__version__ = "0.1.0"

__all__ = [
    "MAX_BATCH",
    "MAX_FORMATTED_COUNT",
    "MAX_SNOWFLAKE_COUNT",
    "AsyncClient",
    "AsyncFormattedSupply",
    "AsyncSegmentSupply",
    "AsyncSnowflakeSupply",
    "Bounds",
    "Client",
    "ClientClosedError",
    "ConfigError",
    "FormattedSupply",
    "InvalidTagError",
    "LeafidError",
    "RejectedError",
    "SegmentSupply",
    "ServerFault",
    "SnowflakeSupply",
    "Stats",
    "ThrottledError",
    "UnavailableError",
    "valid_tag",
]
