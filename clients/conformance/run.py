#!/usr/bin/env python3
"""The conformance driver of every leafid client (clients/conformance/PROTOCOL.md).

    clients/conformance/run.py [CLIENT...]      CLIENT: rust java go python node (default: every
                                                clients/<name> with a conformance-adapter)

For each client it runs the fifteen scenarios of PROTOCOL.md against real leafid servers on a
fresh MariaDB database (and a second one, for far_behind's lagging server): it starts the servers a scenario needs (on free loopback ports, read
from their JSON "listening" log line), starts the client's adapter, drives it, kills, stops and
continues servers from another thread while a `take` runs, and checks every id the client
handed out. It prints one table line per client and scenario, writes them to
target/conformance.md, and exits non-zero on any failure, naming client, scenario and rule.

Environment:
  LEAFID_BIN              the server binary (default: target/release/leafid of this checkout)
  LEAFID_TEST_MYSQL_URL   mysql://user:password@host:port of the test MariaDB (default: the one
                          scripts/mariadb.sh starts); two databases are created per run, dropped
                          after
  CONFORMANCE_LOG_DIR     where adapter and server logs go (default: target/conformance-logs)
  CONFORMANCE_SCENARIOS   comma-separated scenario names to run (default: all), e.g. far_behind

Python 3.11 standard library only.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
I64_MAX = 2**63 - 1
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
# A command answered later than this is a failure (a take's budget is added to it).
ANSWER_TIMEOUT_S = 20.0
# `close` must answer and the adapter exit within this.
CLOSE_TIMEOUT_S = 5.0
DECIMAL = re.compile(r"[1-9][0-9]*\Z")
# Every server gets this admin token (admin.token), and the driver creates tags with it: admin
# writes need it whatever admin.trust_loopback says.
ADMIN_TOKEN = f"conformance-{os.getpid()}-{time.time_ns()}"


class Failure(Exception):
    """A broken rule: the scenario fails with this message."""

    def __init__(self, rule: str, detail: str):
        super().__init__(f"{rule}: {detail}")
        self.rule = rule
        self.detail = detail


class Skipped(Exception):
    """The server under test lacks what the scenario needs (e.g. no /api/v1/tokens route): the
    scenario is reported as skipped, never as passed, and does not fail the run."""


class SetupError(Exception):
    """The driver could not set a scenario up (a server did not start...): not the client's fault,
    but the run still fails."""


# ---------------------------------------------------------------------------------------------
# MariaDB and servers


def mysql_url() -> str:
    url = os.environ.get("LEAFID_TEST_MYSQL_URL")
    if url:
        return url.rstrip("/")
    out = subprocess.run(
        ["bash", str(ROOT / "scripts/mariadb.sh"), "start"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().rstrip("/")


def mariadb(url: str, sql: str) -> None:
    """Runs `sql` with the mariadb command-line client on the server of `url` (no database)."""
    u = urllib.parse.urlparse(url)
    cmd = ["mariadb", "-h", u.hostname or "127.0.0.1", "-P", str(u.port or 3306)]
    if u.username:
        cmd += ["-u", urllib.parse.unquote(u.username)]
    if u.password:
        cmd += [f"-p{urllib.parse.unquote(u.password)}"]
    subprocess.run(cmd + ["-e", sql], check=True, capture_output=True, text=True)


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


class Server:
    """One `leafid` process on a free loopback port (port 0; the port is read from its log)."""

    def __init__(self, binary: str, db_url: str, name: str, log_dir: Path, env: dict | None = None):
        self.name = name
        full_env = dict(os.environ)
        full_env.update(
            {
                "LEAFID__SERVER__HOST": "127.0.0.1",
                "LEAFID__SERVER__PORT": "0",
                "LEAFID__SERVER__WORKERS": "1",
                "LEAFID__DATABASE__URL": db_url,
                "LEAFID__LOG__FORMAT": "json",
                "LEAFID__ADMIN__TOKEN": ADMIN_TOKEN,
                "RUST_LOG": "info",
            }
        )
        full_env.update(env or {})
        self.log_path = log_dir / f"{name}.log"
        # Its own working directory: what a server writes relative to it (the snowflake worker
        # cache file, data/ by default) is neither shared with the other servers nor left in the
        # checkout.
        workdir = log_dir / "servers" / name
        workdir.mkdir(parents=True, exist_ok=True)
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.proc = subprocess.Popen(
            [binary],
            cwd=workdir,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stopped = False
        ports: queue.Queue[int] = queue.Queue()

        def drain() -> None:
            with open(self.log_path, "w", encoding="utf-8") as log:
                for line in self.proc.stderr:
                    log.write(line)
                    self.tail.append(line.rstrip())
                    if '"listening"' in line:
                        try:
                            ports.put(int(json.loads(line)["port"]))
                        except (ValueError, KeyError):
                            pass

        threading.Thread(target=drain, daemon=True).start()
        try:
            self.port = ports.get(timeout=30)
        except queue.Empty:
            self.kill()
            raise SetupError(f"server {name} did not log its port within 30 s: " + " | ".join(self.tail))
        self.url = f"http://127.0.0.1:{self.port}"
        self.wait_ready(30.0)

    def wait_ready(self, within: float) -> None:
        """Returns once `/health/ready` answers 200. A server listens before it is ready: it
        claims its snowflake worker id (and runs its migrations) in the background, and a
        cached snowflake generator answers 503 `snowflake_not_ready` until then, which on a
        loaded machine a client's first requests would meet."""
        deadline = time.monotonic() + within
        last = ""
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health/ready", timeout=5) as r:
                    if r.status == 200:
                        return
                    last = str(r.status)
            except urllib.error.HTTPError as e:
                last = f"{e.code} {e.read()[:200]!r}"
            except OSError as e:
                last = repr(e)
            if self.proc.poll() is not None:
                raise SetupError(f"server {self.name} exited ({self.proc.returncode}): " + " | ".join(self.tail))
            if time.monotonic() >= deadline:
                self.kill()
                raise SetupError(f"server {self.name} not ready within {within:.0f} s: {last}")
            time.sleep(0.05)

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)
        self.stopped = sig == signal.SIGSTOP
        # kill returns before the stop takes hold: on a busy machine a stopped server still
        # answered requests. Wait until every thread is stopped (state T in /proc).
        deadline = time.monotonic() + 10
        while self.stopped and not all_threads_stopped(self.proc.pid):
            if time.monotonic() > deadline:
                raise SetupError(f"server {self.proc.pid} not stopped 10 s after SIGSTOP")
            time.sleep(0.001)

    def kill(self) -> None:
        if self.proc.poll() is None:
            if self.stopped:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()

    def request(
        self, method: str, path: str, body: dict | None = None, token: str | None = ADMIN_TOKEN
    ) -> tuple[int, dict]:
        """One request with the admin token (or `token`, or none), its status and JSON body (a
        body that is not JSON reads as `{}`)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        if token is not None:
            req.add_header("authorization", f"Bearer {token}")

        def parse(raw: bytes) -> dict:
            try:
                v = json.loads(raw or b"{}")
            except ValueError:
                return {}
            return v if isinstance(v, dict) else {}

        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, parse(r.read())
        except urllib.error.HTTPError as e:
            return e.code, parse(e.read())

    def create_tag(self, tag: str, step: int, max_id: int | None = None, format: dict | None = None) -> None:
        body = {"biz_tag": tag, "step": step}
        if max_id is not None:
            body["max_id"] = max_id
        if format is not None:
            body["format"] = format
        status, answer = self.request("POST", "/api/v1/tags", body)
        if status != 201:
            raise SetupError(f"creating tag {tag} on {self.name}: {status} {answer}")


class Cluster:
    """The servers of one scenario; all killed at the end."""

    def __init__(self, run: "Run", scenario: str):
        self.run = run
        self.scenario = scenario
        self.servers: list[Server] = []

    def start(self, count: int, env: dict | None = None, db_url: str | None = None) -> list[Server]:
        """`count` servers on the run's database, or on `db_url`."""
        started: list[Server | Exception] = [None] * count  # type: ignore[list-item]

        def one(i: int) -> None:
            name = f"{self.run.current_client}-{self.scenario}-{len(self.servers) + i}"
            try:
                started[i] = Server(self.run.binary, db_url or self.run.db_url, name, self.run.log_dir, env)
            except Exception as e:  # noqa: BLE001 - reported below
                started[i] = e

        threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in started:
            if isinstance(s, Exception):
                for other in started:
                    if isinstance(other, Server):
                        other.kill()
                raise s if isinstance(s, SetupError) else SetupError(str(s))
        self.servers += started  # type: ignore[arg-type]
        return started  # type: ignore[return-value]

    def close(self) -> None:
        for s in self.servers:
            s.kill()


# ---------------------------------------------------------------------------------------------
# The adapter


class Adapter:
    """One adapter process: commands on its stdin, answers read from its stdout by a thread."""

    def __init__(self, client: str, scenario: str, log_dir: Path):
        self.client = client
        exe = ROOT / "clients" / client / "conformance-adapter"
        self.stderr = open(log_dir / f"{client}-{scenario}.adapter.log", "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [str(exe)],
            cwd=exe.parent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            for line in self.proc.stdout:
                self.lines.put(line)
            self.lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def send(self, cmd: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise Failure("adapter", f"{cmd['op']}: the adapter is gone ({e}); see its log")

    def answer(self, cmd: dict, timeout: float) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise Failure("adapter", f"no answer to {cmd['op']} within {timeout:.0f} s")
        if line is None:
            try:
                code = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = "still running, stdout closed"
            raise Failure("adapter", f"the adapter exited ({code}) before answering {cmd['op']}; see its log")
        try:
            answer = json.loads(line)
        except ValueError:
            raise Failure("protocol", f"answer to {cmd['op']} is not JSON: {line[:200]!r}")
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            raise Failure("protocol", f"answer to {cmd['op']} has no boolean ok: {line[:200]!r}")
        return answer

    def call(self, cmd: dict, timeout: float = ANSWER_TIMEOUT_S) -> dict:
        self.send(cmd)
        answer = self.answer(cmd, timeout)
        if not answer["ok"]:
            raise Failure("adapter", f"{cmd['op']} answered ok:false: {answer.get('error')}")
        return answer

    def close(self) -> None:
        """`close`: must answer ok and exit 0 within CLOSE_TIMEOUT_S."""
        started = time.monotonic()
        cmd = {"op": "close"}
        self.send(cmd)
        answer = self.answer(cmd, CLOSE_TIMEOUT_S)
        if not answer["ok"]:
            raise Failure("close", f"answered ok:false: {answer.get('error')}")
        left = CLOSE_TIMEOUT_S - (time.monotonic() - started)
        try:
            code = self.proc.wait(timeout=max(left, 0.01))
        except subprocess.TimeoutExpired:
            raise Failure("close", f"the adapter did not exit within {CLOSE_TIMEOUT_S:.0f} s of close")
        if code != 0:
            raise Failure("close", f"the adapter exited with status {code}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


# ---------------------------------------------------------------------------------------------
# Checks


@dataclass
class Stream:
    """Everything one client handed out for one tag (or snowflake) in one scenario."""

    seen: set[int] = field(default_factory=set)
    # (min, max) of each take, in order.
    takes: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Outcome:
    ids: int = 0
    failovers: int = 0
    discarded: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)
    # What a scenario measured beyond the counts (far_behind: its catch-up time), for the table.
    note: str = ""


class Scenario:
    """One scenario run for one client: the adapter, the servers, the checks."""

    def __init__(self, run: "Run", name: str):
        self.run = run
        self.name = name
        self.cluster = Cluster(run, name)
        self.adapter: Adapter | None = None
        self.streams: dict[str, Stream] = collections.defaultdict(Stream)
        self.outcome = Outcome()
        # The longest single next_id call of the last take (its max_call_ms), in seconds.
        self.last_max_call_s = 0.0
        self.started = time.monotonic()
        self.log_file = open(run.log_dir / f"{run.current_client}-{name}.driver.log", "w", encoding="utf-8")

    def log(self, msg: str) -> None:
        """A timestamped line in the scenario's driver log (what was sent, done, answered)."""
        self.log_file.write(f"{time.monotonic() - self.started:7.3f} {msg}\n")
        self.log_file.flush()

    def tag(self, base: str) -> str:
        # Unique per client and scenario within the run's database.
        return f"{self.run.current_client}.{self.name}.{base}"

    def open(self, servers: list[str], adapter: str = "", **settings) -> None:
        """A new adapter (its log named after the scenario, plus `adapter` when a scenario opens
        several in turn) and its `open`."""
        self.adapter = Adapter(self.run.current_client, self.name + adapter, self.run.log_dir)
        cmd = {
            "op": "open",
            "servers": servers,
            "batch": settings.get("batch", 100),
            "request_timeout_ms": settings.get("request_timeout_ms", 500),
            "wait_timeout_ms": settings.get("wait_timeout_ms", 4000),
            "backoff_min_ms": settings.get("backoff_min_ms", 50),
            "backoff_max_ms": settings.get("backoff_max_ms", 1000),
        }
        # The batch rule's settings (PROTOCOL.md): sent only when a scenario sets them, so every
        # other scenario runs on the client's defaults.
        for key in ("max_batch", "target_lifetime_ms", "clock_offset_ms", "token"):
            if key in settings:
                cmd[key] = settings[key]
        self.adapter.call(cmd, timeout=30)

    def take(
        self,
        engine: str,
        tag: str | None = None,
        callers: int = 2,
        per_caller: int = 200,
        pause_ms: int = 0,
        actions: list[tuple[float, callable]] = (),
        expect_errors: dict[tuple[str, str], int | None] | None = None,
        text: re.Pattern | None = None,
        ordered: bool = True,
    ) -> list[list[int]]:
        """One `take`; `actions` run from another thread at their delays (seconds after the
        command was sent). Checks ids and errors; returns the callers' id lists. `ordered=False`
        (a permuted tag): no order is checked, only the texts, uniqueness and the counts."""
        cmd = {"op": "take", "engine": engine, "callers": callers, "per_caller": per_caller, "pause_ms": pause_ms}
        if tag is not None:
            cmd["tag"] = tag
        label = f"take {engine}" + (f" {tag}" if tag else "")
        self.log(f"send {json.dumps(cmd)}")
        self.adapter.send(cmd)
        sent = time.monotonic()
        acted: list[BaseException] = []

        def act() -> None:
            for delay, fn in actions:
                time.sleep(max(0.0, sent + delay - time.monotonic()))
                try:
                    fn()
                    self.log(f"  action {getattr(fn, '__qualname__', fn)} done")
                except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
                    acted.append(e)

        actor = threading.Thread(target=act, daemon=True)
        actor.start()
        budget = ANSWER_TIMEOUT_S + per_caller * pause_ms / 1000.0
        try:
            answer = self.adapter.answer(cmd, budget)
        finally:
            actor.join()
        self.log(f"  answered after {time.monotonic() - sent:.3f} s: ok={answer.get('ok')} "
                 f"ids={[len(x) for x in answer.get('ids') or []]} errors={answer.get('errors')}")
        if acted:
            raise SetupError(f"{label}: a server action failed: {acted[0]!r}")
        if not answer["ok"]:
            raise Failure("adapter", f"{label} answered ok:false: {answer.get('error')}")
        lists = answer.get("ids")
        errors = answer.get("errors")
        if not isinstance(lists, list) or len(lists) != callers or not isinstance(errors, list):
            raise Failure("protocol", f"{label}: want {callers} id lists and an errors list, got {str(answer)[:200]}")

        # Errors: grouped by (kind, code); `internal` always fails; anything not expected fails.
        got: collections.Counter = collections.Counter()
        for e in errors:
            if not isinstance(e, dict) or not isinstance(e.get("count"), int):
                raise Failure("protocol", f"{label}: bad error entry {e!r}")
            got[(str(e.get("kind")), str(e.get("code", "")))] += e["count"]
        self.outcome.errors.update(got)
        expect = expect_errors or {}
        for key, n in got.items():
            if key[0] == "internal":
                raise Failure("no internal error", f"{label}: {n} x internal {key[1]!r}")
            if key not in expect:
                rule = "expected typed errors" if expect else "no error while a server is healthy"
                raise Failure(rule, f"{label}: {n} x {key[0]}/{key[1] or '-'} reached the callers")
        for key, n in expect.items():
            if n is not None and got.get(key, 0) != n:
                raise Failure("expected typed errors", f"{label}: want {n} x {key[0]}/{key[1]}, got {got.get(key, 0)}")

        # Ids: decimal strings of i64 > 0; per caller strictly increasing; no duplicate per stream;
        # a later take's ids all above an earlier take's.
        # Formatted ids are texts of one format: checked against `text`, compared as strings
        # (their byte order is their issue order, docs/shapes.md).
        stream = self.streams[{"segment": tag, "formatted": f"<formatted>{tag}"}.get(engine, "<snowflake>")]
        parsed: list[list[int]] = []
        calls = 0
        for i, ids in enumerate(lists):
            if not isinstance(ids, list):
                raise Failure("protocol", f"{label}: caller {i}'s ids are not a list")
            mine = []
            for s in ids:
                if engine == "formatted":
                    if not isinstance(s, str) or text is None or not text.fullmatch(s):
                        raise Failure("texts of the tag's format", f"{label}: caller {i} got {s!r}")
                    mine.append(s)
                    continue
                if not isinstance(s, str) or not DECIMAL.match(s) or int(s) > I64_MAX:
                    raise Failure("ids are decimal i64 > 0", f"{label}: caller {i} got {s!r}")
                mine.append(int(s))
            for a, b in zip(mine, mine[1:]) if ordered else ():
                if b <= a:
                    raise Failure("per caller strictly increasing", f"{label}: caller {i} got {a} then {b}")
            parsed.append(mine)
            calls += len(mine)
        calls += sum(got.values())
        if calls != callers * per_caller:
            raise Failure("one answer per call", f"{label}: {callers} x {per_caller} calls, {calls} ids and errors")
        flat = [x for mine in parsed for x in mine]
        dupes = len(flat) - len(set(flat))
        repeated = set(flat) & stream.seen
        if dupes or repeated:
            example = next(iter(repeated)) if repeated else collections.Counter(flat).most_common(1)[0][0]
            raise Failure("no duplicate id", f"{label}: {dupes + len(repeated)} repeats, e.g. {example}")
        if flat and ordered:
            lo, hi = min(flat), max(flat)
            for n, (plo, phi) in enumerate(stream.takes):
                if lo <= phi:
                    raise Failure(
                        "ids increase across takes",
                        f"{label}: smallest id {lo} not above the largest {phi} of take {n + 1} of this stream",
                    )
            stream.takes.append((lo, hi))
        stream.seen.update(flat)
        self.outcome.ids += len(flat)
        slowest = answer.get("max_call_ms")
        if not isinstance(slowest, (int, float)) or isinstance(slowest, bool) or slowest < 0:
            raise Failure("protocol", f"{label}: max_call_ms is not a duration: {slowest!r}")
        self.last_max_call_s = slowest / 1000.0
        self.log(f"  longest call {slowest:.1f} ms")
        return parsed

    def stats(self) -> dict:
        s = self.adapter.call({"op": "stats"})
        self.log(f"stats {s}")
        for k in ("ids_served", "batches", "failovers", "discarded_ids"):
            if not isinstance(s.get(k), int) or s[k] < 0:
                raise Failure("protocol", f"stats: {k} is not a count: {s!r}")
        self.outcome.failovers = s["failovers"]
        self.outcome.discarded = s["discarded_ids"]
        if s["ids_served"] != self.outcome.ids:
            raise Failure("stats", f"ids_served {s['ids_served']}, but callers received {self.outcome.ids} ids")
        return s

    def finish(self) -> None:
        self.stats()
        self.adapter.close()

    def cleanup(self) -> None:
        if self.adapter:
            self.adapter.kill()
        self.cluster.close()
        self.log("cleaned up")
        self.log_file.close()


# ---------------------------------------------------------------------------------------------
# The fifteen scenarios


def kill9(sc: Scenario) -> None:
    """Three servers; the preferred one killed (-9) during a segment take, the next preferred
    during a snowflake take; then both engines again on the last one."""
    a, b, c = sc.cluster.start(3)
    tag = sc.tag("orders")
    a.create_tag(tag, step=1000)
    sc.open([a.url, b.url, c.url], batch=100, request_timeout_ms=500)
    sc.take("segment", tag, callers=4, per_caller=600, pause_ms=1, actions=[(0.3, a.kill)])
    sc.take("snowflake", callers=4, per_caller=600, pause_ms=1, actions=[(0.3, b.kill)])
    sc.take("segment", tag, callers=2, per_caller=300)
    sc.take("snowflake", callers=2, per_caller=300)
    s = sc.stats()
    if s["failovers"] < 2:
        raise Failure("failover counted", f"two servers killed under load, failovers = {s['failovers']}")
    sc.adapter.close()


def sigstop(sc: Scenario) -> None:
    """Two servers; the one in use stopped (SIGSTOP) for 1.2 s, far past the 300 ms request
    timeout, then continued; then the other one the same way; the callers go on throughout, and
    after both are back."""
    a, b = sc.cluster.start(2)
    tag = sc.tag("pay")
    a.create_tag(tag, step=500)
    sc.open([a.url, b.url], batch=50, request_timeout_ms=300, backoff_min_ms=50, backoff_max_ms=400)
    sc.take(
        "segment", tag, callers=3, per_caller=400, pause_ms=3,
        actions=[(0.3, lambda: a.signal(signal.SIGSTOP)), (1.5, lambda: a.signal(signal.SIGCONT))],
    )
    # Now b is the one in use (a failed while stopped): stop b; a, continued and probed back up,
    # serves.
    sc.take(
        "snowflake", callers=2, per_caller=300, pause_ms=3,
        actions=[(0.2, lambda: b.signal(signal.SIGSTOP)), (1.4, lambda: b.signal(signal.SIGCONT))],
    )
    time.sleep(0.5)  # b's probes bring it back
    sc.take("segment", tag, callers=2, per_caller=300)
    sc.take("snowflake", callers=2, per_caller=300)
    s = sc.stats()
    if s["failovers"] < 2:
        raise Failure("failover counted", f"the server in use stopped twice under load, failovers = {s['failovers']}")
    sc.adapter.close()


def engine_disabled(sc: Scenario) -> None:
    """The preferred server runs without the snowflake engine (404 engine_disabled): that is its
    own failure, not a refusal of the request; the next server serves, the caller sees nothing."""
    (off,) = sc.cluster.start(1, {"LEAFID__SNOWFLAKE__ENABLED": "false"})
    (on,) = sc.cluster.start(1)
    status, body = off.request("GET", "/api/v1/snowflake/ids?count=1&stringify_ids=true")
    if status != 404 or body.get("code") != "engine_disabled":
        raise SetupError(f"the engine-disabled server answered {status} {body}")
    tag = sc.tag("mixed")
    off.create_tag(tag, step=100)
    sc.open([off.url, on.url], batch=50)
    sc.take("snowflake", callers=2, per_caller=300)
    sc.take("segment", tag, callers=2, per_caller=200)
    sc.take("snowflake", callers=2, per_caller=300)
    s = sc.stats()
    if s["failovers"] < 1:
        raise Failure("failover counted", f"engine_disabled on the preferred server, failovers = {s['failovers']}")
    sc.adapter.close()


def lagging(sc: Scenario) -> None:
    """Snowflake ids from a server whose wall clock runs 2 s behind (libfaketime; both servers on
    the direct generator, so ids follow each one's clock): once it is the only server left, its
    first ids lie below what the client handed out. The client must discard them, not hand them
    out, and still answer every caller within the wait timeout."""
    if not os.path.exists(LIBFAKETIME):
        raise SetupError(f"{LIBFAKETIME} is missing (Debian package faketime)")
    direct = {"LEAFID__SNOWFLAKE__GENERATOR": "direct"}
    (ahead,) = sc.cluster.start(1, direct)
    (behind,) = sc.cluster.start(
        1, {**direct, "LD_PRELOAD": LIBFAKETIME, "FAKETIME": "-2", "DONT_FAKE_MONOTONIC": "1"}
    )
    # A fixed size (max_batch = batch): a supply that grew would hold enough ids for the
    # second take and never ask the server behind.
    sc.open([ahead.url, behind.url], batch=100, max_batch=100, wait_timeout_ms=6000)
    first = sc.take("snowflake", callers=2, per_caller=300)
    top = max(x for ids in first for x in ids)
    ahead.kill()
    status, body = behind.request("GET", "/api/v1/snowflake/ids?count=1&stringify_ids=true")
    if status != 200 or int(body["ids"][0]) >= top:
        raise SetupError(f"the lagging server is not behind: {status} {body} vs {top}")
    sc.take("snowflake", callers=2, per_caller=300)
    s = sc.stats()
    if s["discarded_ids"] < 1:
        raise Failure("lagging ids discarded", f"the lagging server's first ids were below {top}, discarded_ids = 0")
    sc.adapter.close()


# far_behind: the tag's row in B's database lies this far below the row in A's; the catch-up (the
# longest single next_id call of the take during which A is killed) must end within the bound.
FAR_GAP = 5_000_000
FAR_A_FIRST = 6_000_001
FAR_B_FIRST = FAR_A_FIRST - FAR_GAP
FAR_CATCH_UP_BOUND_S = 4.0
FAR_WAIT_TIMEOUT_MS = 5000


def far_behind(sc: Scenario) -> None:
    """Two servers on two databases, the tag's row on B's five million ids below A's (a separate
    or a restored database). The callers take ids from A; A is killed (-9) while they run; B,
    healthy, answers every request with ids all below what the client already handed out until
    the client has asked past them. No error may reach a caller, the ids B held below the floor
    are discarded (counted), and no call waits longer than FAR_CATCH_UP_BOUND_S."""
    (a,) = sc.cluster.start(1)
    (b,) = sc.cluster.start(1, db_url=sc.run.other_db_url)
    tag = sc.tag("far")
    a.create_tag(tag, step=1000, max_id=FAR_A_FIRST)
    b.create_tag(tag, step=1000, max_id=FAR_B_FIRST)
    rows = []
    for server in (a, b):
        status, row = server.request("GET", f"/api/v1/tags/{tag}")
        if status != 200:
            raise SetupError(f"reading {tag} on {server.name}: {status} {row}")
        rows.append(int(row["max_id"]))
    if rows[0] - rows[1] != FAR_GAP:
        raise SetupError(f"the rows are not {FAR_GAP} apart: max_id {rows[0]} on A, {rows[1]} on B")
    sc.open([a.url, b.url], batch=100, request_timeout_ms=1000, wait_timeout_ms=FAR_WAIT_TIMEOUT_MS)
    # Warm: ids from A's row.
    first = sc.take("segment", tag, callers=2, per_caller=200)
    if min(min(ids) for ids in first) < FAR_A_FIRST:
        raise SetupError(f"the first ids did not come from A's row (from {FAR_A_FIRST}): {first[0][:3]}")
    # A killed while 4 callers take, 1 ms apart: once the local ids are spent they wait for B.
    sc.take("segment", tag, callers=4, per_caller=1000, pause_ms=1, actions=[(0.4, a.kill)])
    caught_up = sc.last_max_call_s
    sc.outcome.note = f"longest call {caught_up:.2f} s"
    # And on: B alone.
    sc.take("segment", tag, callers=2, per_caller=300)
    s = sc.stats()
    if s["failovers"] < 1:
        raise Failure("failover counted", f"the server in use killed under load, failovers = {s['failovers']}")
    # Every id B held from FAR_B_FIRST up to the floor lies behind: discarded. A request that
    # timed out loses its ids (B handed them out, the client never received them), so at least
    # half of the gap, not all of it.
    if s["discarded_ids"] < FAR_GAP // 2:
        raise Failure("lagging ids discarded",
                      f"B was {FAR_GAP} ids behind, discarded_ids = {s['discarded_ids']}")
    if caught_up > FAR_CATCH_UP_BOUND_S:
        raise Failure("catch-up bound",
                      f"a call waited {caught_up:.2f} s for the catch-up, over {FAR_CATCH_UP_BOUND_S} s")
    sc.adapter.close()


def unknown_tag(sc: Scenario) -> None:
    """A tag no server knows: every call a rejected/unknown_biz_tag error, and no failover (every
    server shares the database). A tag outside the rule: invalid_tag, no request. A known tag on
    the same client still works."""
    a, b = sc.cluster.start(2)
    tag = sc.tag("known")
    a.create_tag(tag, step=100)
    sc.open([a.url, b.url], batch=20)
    sc.take("segment", sc.tag("nobody-made-this"), callers=2, per_caller=3,
            expect_errors={("rejected", "unknown_biz_tag"): 6})
    sc.take("segment", "no such/tag", callers=1, per_caller=2, expect_errors={("invalid_tag", ""): 2})
    sc.take("segment", tag, callers=2, per_caller=100)
    s = sc.stats()
    if s["failovers"] != 0:
        raise Failure("a refusal is no failover", f"failovers = {s['failovers']} after unknown_biz_tag")
    sc.adapter.close()


# The near-max tag: max_id = i64::MAX - 100, so ids i64::MAX - 100 ..= i64::MAX - 1 (100 ids; the
# server caps the last segment), then 409 biz_tag_exhausted. The batch starts at 5 and grows with
# demand; the last request gets what is left (a short answer), so the ids handed out are exactly
# that range.
NEAR_MAX_FIRST = I64_MAX - 100
NEAR_MAX_LAST = I64_MAX - 1


def near_max(sc: Scenario) -> None:
    """Ids just below 2^63 (exact as decimal strings, beyond every double), then exhaustion as a
    typed rejected/biz_tag_exhausted error reaching the callers."""
    a, b = sc.cluster.start(2)
    tag = sc.tag("edge")
    a.create_tag(tag, step=10, max_id=NEAR_MAX_FIRST)
    sc.open([a.url, b.url], batch=5)
    first = sc.take("segment", tag, callers=1, per_caller=3)
    if first[0] != [NEAR_MAX_FIRST, NEAR_MAX_FIRST + 1, NEAR_MAX_FIRST + 2]:
        raise Failure("exact ids near 2^63", f"want {NEAR_MAX_FIRST}.., got {first[0]}")
    rest = sc.take("segment", tag, callers=2, per_caller=60,
                   expect_errors={("rejected", "biz_tag_exhausted"): None})
    got = sorted(x for ids in rest for x in ids)
    want = list(range(NEAR_MAX_FIRST + 3, NEAR_MAX_LAST + 1))
    if got != want:
        missing = sorted(set(want) - set(got))[:3]
        extra = sorted(set(got) - set(want))[:3]
        raise Failure("exact ids near 2^63", f"{len(got)} ids, want {len(want)}; missing {missing}, extra {extra}")
    if sc.outcome.errors[("rejected", "biz_tag_exhausted")] != 120 - len(want):
        raise Failure("expected typed errors", "every call past the last id must be rejected/biz_tag_exhausted")
    sc.take("segment", tag, callers=1, per_caller=2, expect_errors={("rejected", "biz_tag_exhausted"): 2})
    s = sc.stats()
    if s["failovers"] != 0:
        raise Failure("a refusal is no failover", f"failovers = {s['failovers']} after biz_tag_exhausted")
    sc.adapter.close()


def demand(sc: Scenario) -> None:
    """The batch follows demand (PROTOCOL.md, "The batch a client asks for"): a supply that starts
    at 10 ids per request and has one caller taking 200000 ids without pause must grow, so it
    makes far fewer requests than the 20000 a fixed size of 10 needs, and never asks for more
    than max_batch."""
    (a,) = sc.cluster.start(1)
    tag = sc.tag("demand")
    a.create_tag(tag, step=1000)
    sc.open([a.url], batch=10, max_batch=100000, target_lifetime_ms=1000, wait_timeout_ms=10000)
    sc.take("segment", tag, callers=1, per_caller=200000)
    s = sc.stats()
    size = s.get("batch_size")
    if not isinstance(size, int):
        raise Failure("protocol", f"stats: batch_size is not a count: {s!r}")
    if not 1000 <= size <= 100000:
        raise Failure("the batch follows demand", f"batch_size {size} after 200000 ids at full speed, want 1000..=100000")
    if s["batches"] > 2000:
        raise Failure("the batch follows demand", f"{s['batches']} requests for 200000 ids, want at most 2000")
    sc.log(f"demand: batch_size {size}, {s['batches']} requests")
    sc.adapter.close()


# scenario 9: the daily order numbers of PROTOCOL.md's last section.
ORDER_FORMAT = {"prefix": "ORD-", "date": "yyyyMMdd", "width": 8, "reset": "daily", "time_zone": "UTC"}
ORDER_TEXT = re.compile(r"ORD-[0-9]{8}[0-9]{8}")


def formatted(sc: Scenario) -> None:
    """A formatted (daily order-number) tag through the formatted supply: texts of the format,
    unique, increasing per caller and across takes, while the server in use is killed (-9); a
    plain tag on the formatted supply is rejected/not_formatted, with no failover for it."""
    a, b = sc.cluster.start(2)
    tag = sc.tag("orders")
    a.create_tag(tag, step=200, format=ORDER_FORMAT)
    plain = sc.tag("plain")
    a.create_tag(plain, step=100)
    sc.open([a.url, b.url], batch=50, request_timeout_ms=500)
    sc.take("formatted", tag, callers=4, per_caller=500, pause_ms=1, actions=[(0.3, a.kill)], text=ORDER_TEXT)
    sc.take("formatted", tag, callers=2, per_caller=200, text=ORDER_TEXT)
    s = sc.stats()
    if s["failovers"] < 1:
        raise Failure("failover counted", f"the server in use killed, failovers = {s['failovers']}")
    sc.take("formatted", plain, callers=1, per_caller=3, text=ORDER_TEXT,
            expect_errors={("rejected", "not_formatted"): 3})
    sc.adapter.close()


# rollover: the server's clock (libfaketime) and the client's period clock (`clock_offset_ms`) are
# set this far before the next UTC midnight when the server starts.
ROLLOVER_LEAD_S = 8


def rollover(sc: Scenario) -> None:
    """A daily order-number tag across midnight. The server runs under libfaketime with its clock
    N s ahead, N chosen so that it reads ROLLOVER_LEAD_S before the next UTC midnight; the client
    is opened with the same offset on its wall clock (`clock_offset_ms`: Go reads its clock
    without libc, so every client takes the offset through its own clock hook). Texts taken
    before midnight are of day D; after it, of day D+1, the first at sequence 1 (the start
    value); what the client held of day D is discarded (counted), never handed out."""
    if not os.path.exists(LIBFAKETIME):
        raise SetupError(f"{LIBFAKETIME} is missing (Debian package faketime)")
    now = time.time()
    midnight = (int(now) // 86400 + 1) * 86400
    if midnight - now <= ROLLOVER_LEAD_S + 2:
        # Run just before a real midnight: aim at the next one (the offset stays positive).
        midnight += 86400
    offset = int(midnight - now - ROLLOVER_LEAD_S)
    (a,) = sc.cluster.start(1, {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": f"+{offset}", "DONT_FAKE_MONOTONIC": "1"})
    tag = sc.tag("daily")
    a.create_tag(tag, step=100, format=ORDER_FORMAT)
    day = time.strftime("%Y%m%d", time.gmtime(midnight - 86400))
    next_day = time.strftime("%Y%m%d", time.gmtime(midnight))
    sc.open([a.url], batch=50, max_batch=50, clock_offset_ms=offset * 1000)
    if time.time() + offset > midnight - 2:
        raise SetupError(f"the machine is too slow: the server started less than 2 s before its midnight")
    before = sc.take("formatted", tag, callers=1, per_caller=20, text=ORDER_TEXT)[0]
    if any(t[4:12] != day for t in before):
        raise SetupError(f"texts before midnight not all of {day}: {before[:3]}... (too slow a machine?)")
    # One second past the server's (and the client's) midnight.
    time.sleep(max(0.0, midnight - offset + 1.0 - time.time()))
    after = sc.take("formatted", tag, callers=1, per_caller=20, text=ORDER_TEXT)[0]
    stale = [t for t in after if t[4:12] != next_day]
    if stale:
        raise Failure("never yesterday's number today", f"after midnight the client handed out {stale[:3]}")
    if after and after[0][12:] != "00000001":
        raise Failure("each period restarts at its start value", f"the first text of {next_day} is {after[0]}")
    s = sc.stats()
    if s["discarded_ids"] < 1:
        raise Failure("ids of an ended period discarded", f"the client held ids of {day} at midnight, discarded_ids = 0")
    sc.outcome.note = f"discarded {s['discarded_ids']} of {day}"
    sc.adapter.close()


PERMUTED_FORMAT = {"prefix": "T-", "radix": "crockford32", "width": 6, "permute": {"key_id": "conformance"}}
PERMUTED_TEXT = re.compile(r"T-[0-9A-HJKMNP-TV-Z]{6}")


def permuted(sc: Scenario) -> None:
    """A permuted tag (FF1 over 6 Crockford base-32 digits, docs/shapes.md): its answers say
    `"ordered": false` and the supply hands the texts out as received, with no floor. Unique
    while the server in use is killed (-9), no error reaches a caller, and a caller's texts do
    not come in sorted order (the server permutes them)."""
    key = sc.run.log_dir / "conformance.key"
    if not key.exists():
        # Created with mode 600: never readable by others, not even for a moment.
        fd = os.open(key, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
    env = {"LEAFID__SHAPES__KEYS__CONFORMANCE": str(key)}
    a, b = sc.cluster.start(2, env)
    tag = sc.tag("codes")
    a.create_tag(tag, step=200, format=PERMUTED_FORMAT)
    sc.open([a.url, b.url], batch=50, request_timeout_ms=500)
    first = sc.take("formatted", tag, callers=4, per_caller=500, pause_ms=1, actions=[(0.3, a.kill)],
                    text=PERMUTED_TEXT, ordered=False)
    sc.take("formatted", tag, callers=2, per_caller=200, text=PERMUTED_TEXT, ordered=False)
    s = sc.stats()
    if s["failovers"] < 1:
        raise Failure("failover counted", f"the server in use killed, failovers = {s['failovers']}")
    longest = max(first, key=len)
    if len(longest) >= 50 and longest == sorted(longest):
        raise Failure("permuted texts show no order", f"a caller's {len(longest)} texts came sorted")
    sc.adapter.close()


def iso_ms(t: float) -> str:
    """Unix seconds as RFC 3339 UTC with milliseconds."""
    ms = int(t * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def bounds(sc: Scenario) -> None:
    """The snowflake bounds helper: the client's answer for a time range equals the server's
    route, every id taken within that range lies within it, and an empty range is
    rejected/invalid_time_range with no failover."""
    (a,) = sc.cluster.start(1)
    sc.open([a.url], batch=100)
    # A cached generator hands out ids whose times may lie a little before or after the call;
    # the window is wide so that only a wrong answer fails.
    start = time.time() - 60
    taken = sc.take("snowflake", callers=2, per_caller=300)
    end = time.time() + 60
    frm, to = iso_ms(start), iso_ms(end)
    cmd = {"op": "bounds", "from": frm, "to": to}
    sc.log(f"send {json.dumps(cmd)}")
    got = sc.adapter.call(cmd)
    sc.log(f"  answered {got}")
    query = urllib.parse.urlencode({"from": frm, "to": to, "stringify_ids": "true"})
    status, want = a.request("GET", f"/api/v1/snowflake/bounds?{query}")
    if status != 200:
        raise SetupError(f"the bounds route answered {status} {want}")
    if (got.get("min_id"), got.get("max_id")) != (want["min_id"], want["max_id"]):
        raise Failure("bounds as the server says", f"client {got}, server {want}")
    lo, hi = int(want["min_id"]), int(want["max_id"])
    outside = [x for ids in taken for x in ids if not lo <= x <= hi]
    if outside:
        raise Failure("ids within their bounds", f"{len(outside)} ids outside [{lo}, {hi}], e.g. {outside[0]}")
    cmd = {"op": "bounds", "from": to, "to": to}
    sc.adapter.send(cmd)
    answer = sc.adapter.answer(cmd, ANSWER_TIMEOUT_S)
    err = answer.get("error") or {}
    if answer.get("ok") or (err.get("kind"), err.get("code")) != ("rejected", "invalid_time_range"):
        raise Failure("expected typed errors", f"an empty range answered {answer}")
    s = sc.stats()
    if s["failovers"] != 0:
        raise Failure("a refusal is not a failover", f"failovers = {s['failovers']}")
    sc.adapter.close()


def regions(sc: Scenario) -> None:
    """Two regions as two lanes (docs/deploy.md, section 12): server A on database RA as lane slot
    0, server B on database RB as slot 1, each knowing the other's database. A tag created on A
    reaches B's database at once (mirrored). The client lists both regions' servers; region A's
    server is killed (-9) while callers take: B serves from its own lane, no caller sees an
    error, no id twice, each caller's ids increase."""
    ra, rb = f"{sc.run.db_name}_ra_{sc.run.current_client}", f"{sc.run.db_name}_rb_{sc.run.current_client}"
    ra_url, rb_url = f"{sc.run.server_url}/{ra}", f"{sc.run.server_url}/{rb}"
    for name in (ra, rb):
        mariadb(sc.run.server_url, f"CREATE DATABASE {name}")
    try:
        # A first, alone: it creates the tables of both databases (its own and its other lane).
        (a,) = sc.cluster.start(1, {"LEAFID__LANES__SLOT": "0", "LEAFID__LANES__OTHERS__1": rb_url}, db_url=ra_url)
        (b,) = sc.cluster.start(1, {"LEAFID__LANES__SLOT": "1", "LEAFID__LANES__OTHERS__0": ra_url}, db_url=rb_url)
        tag = sc.tag("orders")
        a.create_tag(tag, step=200)
        status, row = b.request("GET", f"/api/v1/tags/{tag}")
        if status != 200:
            raise SetupError(f"the tag did not reach region B's database: {status} {row}")
        sc.open([a.url, b.url], batch=50, request_timeout_ms=500)
        sc.take("segment", tag, callers=4, per_caller=500, pause_ms=1, actions=[(0.3, a.kill)])
        sc.take("segment", tag, callers=2, per_caller=300)
        s = sc.stats()
        if s["failovers"] < 1:
            raise Failure("failover counted", f"region A's server killed, failovers = {s['failovers']}")
        sc.adapter.close()
    finally:
        sc.cluster.close()
        for name in (ra, rb):
            try:
                mariadb(sc.run.server_url, f"DROP DATABASE IF EXISTS {name}")
            except subprocess.CalledProcessError:
                pass


# The tokens scenario's quota (PROTOCOL.md): the scoped token's rate and burst, and the ids taken.
TOKENS_RATE = 200
TOKENS_BURST = 200
TOKENS_IDS = 600


def tokens(sc: Scenario) -> None:
    """Caller tokens and quotas (issue 44) on a database of its own (a token in the run's
    database would close every other scenario's servers to anonymous callers): the driver
    creates, with its admin token, a token scoped to the scenario's tag with a rate of
    TOKENS_RATE ids/s and a burst of TOKENS_BURST, and one scoped to `pay*`. (a) A client
    without a token: every call rejected/unauthorized, no id, no failover. (b) The `pay*`
    client: rejected/forbidden, no failover. (c) The scoped client takes TOKENS_IDS ids with 2
    callers: no error, no failover, and (when the server enforces quotas) the take lasts at
    least about (ids - burst) / rate: the server answers shorter batches, then 429
    quota_exhausted with Retry-After, which the client waits out on the same server. Skipped
    (not passed) on a server without /api/v1/tokens."""
    run = sc.run
    db_name = f"{run.db_name}_tok_{run.current_client}"
    mariadb(run.server_url, f"CREATE DATABASE {db_name}")
    try:
        db_url = f"{run.server_url}/{db_name}"
        # A alone first: it creates the tables. B starts after the tokens exist, so it reads
        # them at start (a token created on another server is admitted within
        # callers.refresh_secs, docs/api.md).
        (a,) = sc.cluster.start(1, db_url=db_url)
        tag = sc.tag("orders")
        a.create_tag(tag, step=1000)
        status, body = a.request("POST", "/api/v1/tokens", {
            "name": "conformance-scoped", "tags": [tag], "rate_per_sec": TOKENS_RATE, "burst": TOKENS_BURST,
        })
        if status in (404, 405):
            raise Skipped(f"the server has no /api/v1/tokens ({status})")
        if status != 201 or not isinstance(body.get("token"), str):
            raise SetupError(f"creating the scoped token: {status} {body}")
        scoped = body["token"]
        status, body = a.request("POST", "/api/v1/tokens", {"name": "conformance-pay", "tags": ["pay*"]})
        if status != 201 or not isinstance(body.get("token"), str):
            raise SetupError(f"creating the pay* token: {status} {body}")
        pay = body["token"]
        (b,) = sc.cluster.start(1, db_url=db_url)
        servers = [a.url, b.url]

        # (a) No token: leafid's 401 unauthorized, final: no id, no failover.
        sc.open(servers, adapter="-anonymous", batch=50)
        sc.take("segment", tag, callers=2, per_caller=3, expect_errors={("rejected", "unauthorized"): 6})
        s = sc.stats()
        if s["failovers"] != 0:
            raise Failure("a refused token is no failover", f"anonymous: failovers = {s['failovers']}")
        sc.adapter.close()

        # (b) A token scoped to pay*: 403 forbidden on this tag, final.
        sc.open(servers, adapter="-pay", batch=50, token=pay)
        sc.take("segment", tag, callers=2, per_caller=3, expect_errors={("rejected", "forbidden"): 6})
        s = sc.stats()
        if s["failovers"] != 0:
            raise Failure("a refused token is no failover", f"pay*: failovers = {s['failovers']}")
        sc.adapter.close()

        # Whether this server enforces quotas: a request for more than the burst gets a shorter
        # answer when it does (its ids are a gap, never handed out; the bucket it empties only
        # makes the take below slower, so the bound stays a lower bound).
        status, probe = a.request("GET", f"/api/v1/segment/{tag}/ranges?count={TOKENS_BURST * 5}&stringify_ids=true",
                                  token=scoped)
        if status not in (200, 429):
            raise SetupError(f"the scoped token's probe: {status} {probe}")
        enforced = status == 429 or int(probe.get("count", 0)) <= TOKENS_BURST
        sc.log(f"quota probe: {status} count={probe.get('count')} enforced={enforced}")

        # (c) The scoped token: every id, no error, no failover; slowed to the rate.
        sc.open(servers, adapter="-scoped", batch=50, wait_timeout_ms=5000, token=scoped)
        t0 = time.monotonic()
        sc.take("segment", tag, callers=2, per_caller=TOKENS_IDS // 2)
        took = time.monotonic() - t0
        s = sc.stats()
        if s["failovers"] != 0:
            raise Failure("a quota is no failover", f"scoped: failovers = {s['failovers']}")
        # The bucket holds at most the burst at the start; every other id waits for the rate.
        # 0.2 s of slack for timers and the answer's way back.
        floor = (TOKENS_IDS - TOKENS_BURST) / TOKENS_RATE - 0.2
        if enforced and took < floor:
            raise Failure("the quota slows the take", f"{TOKENS_IDS} ids in {took:.2f} s, under {floor:.2f} s")
        sc.outcome.note = (f"{TOKENS_IDS} ids in {took:.1f} s at {TOKENS_RATE}/s" if enforced else
                           "quota not enforced by this server: its timing not checked")
        sc.adapter.close()
    finally:
        sc.cluster.close()
        try:
            mariadb(run.server_url, f"DROP DATABASE IF EXISTS {db_name}")
        except subprocess.CalledProcessError:
            pass


# The strict scenario (issue 45): rounds of one call per client process, alternating, then two
# callers per process.
STRICT_ROUNDS = 10
STRICT_PER_CALLER = 150
STRICT_WAIT_MS = 8000


def strict(sc: Scenario) -> None:
    """A strict tag (issue 45: every id greater than every id whose answer was complete before
    the request was sent, across servers) taken through two client processes of one client, the
    first preferring server A, the second server B (two servers on one database: one owns the
    tag, the other forwards to it). Each round, process 1 takes one id, then process 2 takes
    one: each take begins after the one before it returned, so its id must lie above every id
    taken before (the driver's "ids increase across takes"). A client that buffered would fail
    here: process 1's second id would come from the batch it fetched before process 2's. Then
    each process takes 2 x STRICT_PER_CALLER ids with two callers: per caller increasing, none
    twice, above every earlier take. Then the tag's owner (the server whose tag view says
    `strict_owner.here`) is killed (-9) while the process preferring it takes 2 x 100: no error
    (the other server takes the tag over once the lease ran out, within the wait timeout), at
    least one failover, every id above all before; then three more alternating rounds. Each
    process's stats show no buffering: at least one answer per id served (`batches >=
    ids_served`), and the ids of the answer that revealed the tag strict discarded
    (`discarded_ids >= 1`). Skipped (not passed) when the server refuses `order` in
    the create body (400 naming an unknown field): a server before strict tags."""
    a, b = sc.cluster.start(2)
    tag = sc.tag("msgs")
    status, body = a.request("POST", "/api/v1/tags", {"biz_tag": tag, "step": 1000, "order": "strict"})
    if status == 400 and "unknown field" in json.dumps(body):
        raise Skipped(f"the server refuses a strict tag: {status} {body.get('message', body)}")
    if status != 201:
        raise SetupError(f"creating strict tag {tag}: {status} {body}")
    status, row = b.request("GET", f"/api/v1/tags/{tag}")
    if status != 200 or row.get("order") != "strict":
        raise SetupError(f"the tag does not read as strict on the other server: {status} {row}")

    # A wait that covers the move of the tag to the other server after its owner is killed
    # (the lease plus its margin and a renewal period, 2.7 s by default).
    sc.open([a.url, b.url], adapter="-1", batch=100, wait_timeout_ms=STRICT_WAIT_MS)
    first = sc.adapter
    second = None
    try:
        sc.open([b.url, a.url], adapter="-2", batch=100, wait_timeout_ms=STRICT_WAIT_MS)
        second = sc.adapter
        served = {id(first): 0, id(second): 0}

        def alternate(rounds: int) -> None:
            for _ in range(rounds):
                for adapter in (first, second):
                    sc.adapter = adapter
                    got = sc.take("segment", tag, callers=1, per_caller=1)
                    served[id(adapter)] += sum(len(x) for x in got)

        alternate(STRICT_ROUNDS)
        for adapter in (first, second):
            sc.adapter = adapter
            got = sc.take("segment", tag, callers=2, per_caller=STRICT_PER_CALLER)
            served[id(adapter)] += sum(len(x) for x in got)

        # The owner killed (-9) while the process that prefers it takes: the other server takes
        # the tag over once the lease has run out; no caller sees an error, every id stays above
        # all before; then both processes in turn again.
        owner = None
        for server in (a, b):
            status, row = server.request("GET", f"/api/v1/tags/{tag}")
            if status == 200 and (row.get("strict_owner") or {}).get("here") is True:
                owner = server
        if owner is None:
            raise SetupError(f"neither server says it owns the strict tag: {row}")
        killed = first if owner is a else second
        sc.adapter = killed
        got = sc.take("segment", tag, callers=2, per_caller=100, pause_ms=2, actions=[(0.2, owner.kill)])
        served[id(killed)] += sum(len(x) for x in got)
        alternate(3)
        for n, adapter in enumerate((first, second), 1):
            s = adapter.call({"op": "stats"})
            sc.log(f"stats of process {n}: {s}")
            for k in ("ids_served", "batches", "failovers", "discarded_ids"):
                if not isinstance(s.get(k), int) or s[k] < 0:
                    raise Failure("protocol", f"stats: {k} is not a count: {s!r}")
            sc.outcome.failovers += s["failovers"]
            sc.outcome.discarded += s["discarded_ids"]
            if s["ids_served"] != served[id(adapter)]:
                raise Failure("stats", f"process {n}: ids_served {s['ids_served']}, but its callers received "
                              f"{served[id(adapter)]} ids")
            if s["batches"] < s["ids_served"]:
                raise Failure("no local buffer for a strict tag",
                              f"process {n}: {s['ids_served']} ids served from {s['batches']} answers")
            if s["discarded_ids"] < 1:
                raise Failure("no local buffer for a strict tag",
                              f"process {n}: the ids of the answer that revealed the tag strict were not discarded")
        s = killed.call({"op": "stats"})
        if s["failovers"] < 1:
            raise Failure("failover counted", f"the strict tag's owner killed under load, failovers = {s['failovers']}")
        sc.outcome.note = f"{STRICT_ROUNDS} + 3 alternating rounds over 2 processes, the owner killed"
        for adapter in (first, second):
            sc.adapter = adapter
            adapter.close()
    finally:
        # cleanup() kills sc.adapter; the other process too.
        for adapter in (first, second):
            if adapter is not None and adapter is not sc.adapter:
                adapter.kill()


SCENARIOS = [
    ("kill9", kill9),
    ("sigstop", sigstop),
    ("engine_disabled", engine_disabled),
    ("lagging", lagging),
    ("far_behind", far_behind),
    ("unknown_tag", unknown_tag),
    ("near_max", near_max),
    ("demand", demand),
    ("formatted", formatted),
    ("rollover", rollover),
    ("permuted", permuted),
    ("bounds", bounds),
    ("regions", regions),
    ("tokens", tokens),
    ("strict", strict),
]


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class Row:
    client: str
    scenario: str
    outcome: Outcome
    seconds: float
    error: str | None
    skipped: str | None = None


class Run:
    def __init__(self, clients: list[str]):
        self.clients = clients
        self.binary = os.path.abspath(os.environ.get("LEAFID_BIN", str(ROOT / "target/release/leafid")))
        self.log_dir = Path(os.environ.get("CONFORMANCE_LOG_DIR", ROOT / "target/conformance-logs")).resolve()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.server_url = mysql_url()
        self.db_name = f"leafid_conformance_{os.getpid()}_{int(time.time())}"
        self.db_url = f"{self.server_url}/{self.db_name}"
        # A second database, for the servers of `far_behind` that must not share the first's
        # rows (a server whose row lags: a separate or a restored database).
        self.other_db_name = self.db_name + "_b"
        self.other_db_url = f"{self.server_url}/{self.other_db_name}"
        self.current_client = ""
        self.rows: list[Row] = []
        wanted = [w for w in os.environ.get("CONFORMANCE_SCENARIOS", "").split(",") if w]
        unknown = set(wanted) - {name for name, _ in SCENARIOS}
        if unknown:
            raise SystemExit(f"conformance: no scenario {sorted(unknown)}; known: {[n for n, _ in SCENARIOS]}")
        self.scenarios = [(n, fn) for n, fn in SCENARIOS if not wanted or n in wanted]

    def go(self) -> int:
        if not os.access(self.binary, os.X_OK):
            print(f"conformance: the server binary {self.binary} is missing (cargo build --release --bin leafid, "
                  "or set LEAFID_BIN)", file=sys.stderr)
            return 2
        mariadb(self.server_url, f"CREATE DATABASE {self.db_name}")
        mariadb(self.server_url, f"CREATE DATABASE {self.other_db_name}")
        try:
            # One server first, alone, per database: it creates the tables; the scenarios then
            # start theirs in parallel.
            Server(self.binary, self.db_url, "migrate", self.log_dir).kill()
            Server(self.binary, self.other_db_url, "migrate-b", self.log_dir).kill()
            for client in self.clients:
                self.current_client = client
                started = time.monotonic()
                for name, fn in self.scenarios:
                    self.one(client, name, fn)
                print(f"conformance: {client}: {time.monotonic() - started:.1f} s", file=sys.stderr)
        finally:
            try:
                mariadb(self.server_url, f"DROP DATABASE IF EXISTS {self.db_name}")
                mariadb(self.server_url, f"DROP DATABASE IF EXISTS {self.other_db_name}")
            except subprocess.CalledProcessError:
                pass
        return self.report()

    def one(self, client: str, name: str, fn) -> None:
        sc = Scenario(self, name)
        started = time.monotonic()
        error = None
        skipped = None
        exe = ROOT / "clients" / client / "conformance-adapter"
        try:
            if not os.access(exe, os.X_OK):
                raise Failure("adapter", f"{exe} is missing or not executable")
            fn(sc)
        except Skipped as e:
            skipped = str(e)
        except Failure as e:
            error = f"{e.rule}: {e.detail}"
        except SetupError as e:
            error = f"setup: {e}"
        except Exception as e:  # noqa: BLE001 - a driver bug still fails the run, named
            error = f"driver error: {e!r}"
        finally:
            sc.cleanup()
        row = Row(client, name, sc.outcome, time.monotonic() - started, error, skipped)
        self.rows.append(row)
        print(self.line(row), flush=True)

    @staticmethod
    def errors_text(outcome: Outcome) -> str:
        if not outcome.errors:
            return "0"
        return ", ".join(f"{n} {k}/{c}" if c else f"{n} {k}" for (k, c), n in sorted(outcome.errors.items()))

    def line(self, row: Row) -> str:
        o = row.outcome
        verdict = "ok" if row.error is None else f"FAIL {row.error}"
        if row.skipped is not None:
            verdict = f"skipped: {row.skipped}"
        if o.note:
            verdict += f" ({o.note})"
        return (f"| {row.client} | {row.scenario} | {o.ids} | {o.failovers} | {o.discarded} | "
                f"{self.errors_text(o)} | {row.seconds:.1f} s | {verdict} |")

    def report(self) -> int:
        header = ("| client | scenario | ids seen | failovers | discarded ids | errors | time | result |\n"
                  "| --- | --- | ---: | ---: | ---: | --- | ---: | --- |")
        out = ROOT / "target" / "conformance.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            f.write("# Client conformance (clients/conformance/run.py)\n\n")
            f.write(f"Server: `{self.binary}`. {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}.\n\n")
            f.write(header + "\n")
            for row in self.rows:
                f.write(self.line(row) + "\n")
        print(header)
        for row in self.rows:
            print(self.line(row))
        failed = [r for r in self.rows if r.error is not None]
        skipped = [r for r in self.rows if r.skipped is not None]
        for r in failed:
            print(f"conformance: FAIL {r.client} / {r.scenario}: {r.error}", file=sys.stderr)
        for r in skipped:
            print(f"conformance: SKIPPED {r.client} / {r.scenario}: {r.skipped}", file=sys.stderr)
        passed = len(self.rows) - len(failed) - len(skipped)
        print(f"conformance: {passed}/{len(self.rows)} passed, {len(skipped)} skipped; table in {out}; "
              f"logs in {self.log_dir}", file=sys.stderr)
        return 1 if failed else 0


def main(argv: list[str]) -> int:
    clients = argv[1:]
    if not clients:
        clients = sorted(p.parent.name for p in (ROOT / "clients").glob("*/conformance-adapter"))
    if not clients:
        print("conformance: no client given and no clients/*/conformance-adapter found", file=sys.stderr)
        return 2
    return Run(clients).go()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
