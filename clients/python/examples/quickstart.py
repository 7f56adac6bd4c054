"""Quick start: ids of a tag and snowflake ids, blocking and asyncio.

    python3 examples/quickstart.py http://127.0.0.1:8080 [http://127.0.0.1:8081 ...]

Uses the tag ``leaf-segment-test`` (seeded by a fresh leafid database).
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import leafid_client  # noqa: E402
from leafid_client import AsyncClient, Client, RejectedError, UnavailableError  # noqa: E402

TAG = "leaf-segment-test"


def blocking(servers: "list[str]") -> None:
    with Client(servers, batch=1000, wait_timeout=2.0) as client:
        orders = client.segment(TAG)
        print("segment ids:", [orders.next_id() for _ in range(5)])
        print("snowflake id:", client.snowflake().next_id(timeout=1.0))
        try:
            client.next_id("no-such-tag")
        except RejectedError as e:
            print("refused:", e.code)
        except UnavailableError as e:
            print("no server answered:", e.last)
        print("stats:", client.stats())


async def with_asyncio(servers: "list[str]") -> None:
    async with AsyncClient(servers, batch=1000) as client:
        orders = client.segment(TAG)
        ids = await asyncio.gather(*(orders.next_id() for _ in range(5)))
        print("asyncio segment ids:", sorted(ids))
        print("asyncio snowflake id:", await asyncio.wait_for(client.next_snowflake_id(), 1.0))


if __name__ == "__main__":
    urls = sys.argv[1:] or ["http://127.0.0.1:8080"]
    print("leafid_client", leafid_client.__version__)
    blocking(urls)
    asyncio.run(with_asyncio(urls))
