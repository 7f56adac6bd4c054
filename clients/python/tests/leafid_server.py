"""Real leafid servers for the tests: the binary at ``LEAFID_BIN`` (default
``target/debug/leafid`` of the repository), on SQLite files in a temporary directory."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Dict, Optional

REPO = Path(__file__).resolve().parents[3]

ADMIN_TOKEN = f"py-test-{os.getpid()}"
"""Every test server gets this admin token (admin.token); tags are created with it."""


def leafid_bin() -> str:
    """The server binary: ``LEAFID_BIN``, else the repository's debug build."""
    return os.environ.get("LEAFID_BIN", str(REPO / "target" / "debug" / "leafid"))


def free_low_port() -> int:
    """A free TCP port on 127.0.0.1 below 32768 (the kernel picks client ports above), for a
    server restarted on the same port or for a port nothing listens on."""
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32768")


def all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is in state T (stopped) in /proc; one that exits meanwhile
    counts as stopped."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        if not stat[stat.rindex(")") + 1 :].lstrip().startswith("T"):
            return False
    return bool(tasks)


class LeafidServer:
    """One leafid process. ``db`` is shared by servers meant to share a database."""

    def __init__(self, db: Path, port: int = 0, env: Optional[Dict[str, str]] = None) -> None:
        self.db = db
        self.port = port
        self.extra_env = dict(env or {})
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = db.parent / f"server-{id(self)}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "LeafidServer":
        env = dict(os.environ)
        env.update(
            LEAFID__SERVER__PORT=str(self.port),
            LEAFID__LOG__FORMAT="json",
            LEAFID__DATABASE__URL=f"sqlite://{self.db}",
            LEAFID__SERVER__WORKERS="1",
            LEAFID__ADMIN__TOKEN=ADMIN_TOKEN,
            # One worker-lease cache file per server (the server locks it).
            LEAFID__SNOWFLAKE__WORKER__CACHE_FILE=str(self.db.parent / f"worker-{id(self)}.json"),
        )
        env.update(self.extra_env)
        log = open(self.log_path, "ab")
        start = log.tell()
        # Run in the test's directory: files the server keeps relative to its working directory
        # (the snowflake worker cache under data/) stay out of the repository.
        self.proc = subprocess.Popen(
            [leafid_bin()],
            env=env,
            cwd=self.db.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"leafid exited: {self.log_path.read_text()[-2000:]}")
            with open(self.log_path, "rb") as f:
                f.seek(start)
                for line in f:
                    try:
                        doc = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(doc, dict) and doc.get("message") == "listening":
                        self.port = int(doc["port"])
                        self._wait_ready(deadline)
                        return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"leafid did not listen in {timeout} s")

    def _wait_ready(self, deadline: float) -> None:
        """Waits for ``/health/ready`` to answer 200. A server listens before it is ready (it
        claims its snowflake worker id and runs its migrations in the background): until then
        its snowflake ids answer 503 ``snowflake_not_ready``, and on a loaded machine a test's
        first requests met that, which marked a healthy server down."""
        last = ""
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health/ready", timeout=5) as resp:
                    if resp.status == 200:
                        return
                    last = str(resp.status)
            except OSError as e:  # HTTPError (a 503) included
                last = repr(e)
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"leafid exited: {self.log_path.read_text()[-2000:]}")
            if time.monotonic() >= deadline:
                self.kill()
                raise RuntimeError(f"leafid was not ready in time: {last}")
            time.sleep(0.02)

    def kill(self) -> None:
        """``kill -9`` and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """``SIGSTOP``: the process holds its port and answers nothing."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        # kill returns before the stop takes hold: on a busy machine a stopped server still
        # answered requests. Wait until every thread is stopped (state T in /proc).
        deadline = time.monotonic() + 10
        while not all_threads_stopped(self.proc.pid):
            assert time.monotonic() < deadline, f"server {self.proc.pid} not stopped after SIGSTOP"
            time.sleep(0.001)

    def cont(self) -> None:
        """``SIGCONT``."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> "LeafidServer":
        """Kill -9, then start again on the same port and database."""
        self.kill()
        return self.start()

    def create_tag(
        self,
        tag: str,
        step: int = 1000,
        max_id: Optional[int] = None,
        format: Optional[Dict[str, object]] = None,
    ) -> None:
        """Creates a tag; with ``format``, a formatted tag (docs/shapes.md)."""
        body: Dict[str, object] = {"biz_tag": tag, "step": step}
        if max_id is not None:
            body["max_id"] = max_id
        if format is not None:
            body["format"] = format
        req = urllib.request.Request(
            f"{self.url}/api/v1/tags",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {ADMIN_TOKEN}"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 201, resp.status

    def __enter__(self) -> "LeafidServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.cont()
            self.kill()
