"""The HTTP layer of both clients against a small local server that answers real batches in
the shapes HTTP/1.1 allows: chunked, delimited by the connection's end, and kept alive then
closed by the server between two requests (not a failure of the server)."""

from __future__ import annotations

import asyncio
import itertools
import json
import socketserver
import threading
from typing import Iterator, List, Tuple

import pytest

from leafid_client import AsyncClient, Client

TAG = "t"


class _Handler(socketserver.StreamRequestHandler):
    mode = "length"
    ids = itertools.count(1)

    def handle(self) -> None:
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self.rfile.readline()
                if not line:
                    return
                head += line
            count = int(head.split(b"count=")[1].split(b"&")[0])
            ids = [next(self.ids) for _ in range(count)]
            body = json.dumps(
                {
                    "biz_tag": TAG,
                    "count": count,
                    "ranges": [{"first": str(ids[0]), "last": str(ids[-1])}],
                }
            ).encode()
            if self.mode == "chunked":
                half = len(body) // 2
                chunks = b"".join(
                    b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:])
                )
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
                )
            elif self.mode == "eof":
                self.wfile.write(b"HTTP/1.0 200 OK\r\n\r\n" + body)
                return
            else:
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
                )
                if self.mode == "close-idle":
                    # Kept alive as far as the client knows, then closed by the server.
                    return


@pytest.fixture(params=["length", "chunked", "eof", "close-idle"])
def raw_server(request: pytest.FixtureRequest) -> Iterator[Tuple[str, str]]:
    handler = type("H", (_Handler,), {"mode": request.param, "ids": itertools.count(1)})
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, name="raw-server", daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", request.param
    srv.shutdown()
    srv.server_close()
    t.join()


def test_the_blocking_client_reads_every_answer_shape(raw_server: Tuple[str, str]) -> None:
    url, _ = raw_server
    with Client([url], batch=7) as c:
        ids = [c.next_id(TAG) for _ in range(50)]
        assert c.stats().failed_rounds == 0 and c.stats().failovers == 0
    assert ids == list(range(1, 51))


def test_the_asyncio_client_reads_every_answer_shape(raw_server: Tuple[str, str]) -> None:
    url, _ = raw_server

    async def main() -> List[int]:
        async with AsyncClient([url], batch=7) as c:
            ids = [await c.next_id(TAG) for _ in range(50)]
            assert c.stats().failed_rounds == 0 and c.stats().failovers == 0
        return ids

    assert asyncio.run(main()) == list(range(1, 51))
