"""Fixtures: real leafid servers (see leafid_server.py), and a check that no client thread
outlives its test."""

from __future__ import annotations

import http.server
import itertools
import os
import threading
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest

from leafid_server import LeafidServer, leafid_bin

_tags = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    if not os.access(leafid_bin(), os.X_OK):
        raise pytest.UsageError(
            f"no leafid binary at {leafid_bin()}: cargo build --bin leafid, or set LEAFID_BIN"
        )


@pytest.fixture
def new_tag() -> Callable[[], str]:
    """A fresh tag name (create it on a server before use)."""
    return lambda: f"py-test-{os.getpid()}-{next(_tags)}"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., LeafidServer]]:
    """``start(port=0, env=None, db=None)``: a started server on this test's database (or
    ``db``); every one is killed at the end of the test."""
    started: List[LeafidServer] = []

    def start(port: int = 0, env: "dict | None" = None, db: "Path | None" = None) -> LeafidServer:
        s = LeafidServer(db or tmp_path / "leafid.db", port, env)
        started.append(s)
        return s.start()

    yield start
    for s in started:
        s.close()


@pytest.fixture(scope="module")
def shared_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[List[LeafidServer]]:
    """Two servers on one database, for the tests that neither kill nor stop them."""
    db = tmp_path_factory.mktemp("pair") / "leafid.db"
    pair = [LeafidServer(db).start()]
    pair.append(LeafidServer(db).start())
    yield pair
    for s in pair:
        s.close()


@pytest.fixture(autouse=True)
def no_leftover_threads() -> Iterator[None]:
    """Every test closes its clients: no ``leafid-*`` thread may survive it."""
    yield
    left = [t.name for t in threading.enumerate() if t.name.startswith("leafid-")]
    assert not left, f"threads still running after the test: {left}"


class BadServer(http.server.BaseHTTPRequestHandler):
    body = b""

    paths: List[str] = []

    def do_GET(self) -> None:
        self.paths.append(self.path)
        if not self.path.startswith("/api/"):
            # Not ready: so a probe does not bring it back during the test.
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def bad_server() -> Iterator[Tuple[str, "type[BadServer]"]]:
    """A local HTTP server that answers every GET under ``/api/`` with 200 and
    ``handler.body``, and any other (``/health/ready``) with 503."""
    handler = type("Bad", (BadServer,), {"body": b"", "paths": []})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, name="bad-server", daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()
    t.join()
