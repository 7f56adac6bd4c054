#!/usr/bin/env python3
"""leafid's gRPC door from Python's grpcio (issue 46), run by scripts/grpc-clients-test.sh.

Generates the stubs from proto/leafid/v1/leafid.proto with grpc_tools.protoc into a temporary
folder (the proto compiled unchanged), starts the server binary ($LEAFID_BIN) on a temporary
SQLite file with the gRPC door on a free port, and calls every RPC, the stream included,
checking the ids by the conformance suite's rules: unique, increasing per caller, and exact
64-bit values (a tag that starts above 2^53, where a double would round). Then grpcio's health
checker and a reflection listing (grpcio-reflection). Ends with "N passed, N failed".
"""

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

import grpc
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
ADMIN = "grpc-python-admin"
# 2^53 + 1: the first integer a double cannot hold.
ABOVE_2_53 = 9007199254740993

TMP = Path(tempfile.mkdtemp(prefix="leafid-grpc-py-"))
STUBS = TMP / "stubs"
STUBS.mkdir()

# google.rpc.Status and ErrorInfo, as their published protos define them (the fields read here),
# to read the error details from the `grpc-status-details-bin` trailer without another package.
(STUBS / "rpc_status.proto").write_text(
    """syntax = "proto3";
package google.rpc;
import "google/protobuf/any.proto";
message Status { int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3; }
message ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
"""
)


def compile_stubs() -> None:
    include = str(Path(protoc.__file__).parent / "_proto")
    for args in (
        [f"-I{ROOT / 'proto'}", f"--python_out={STUBS}", f"--grpc_python_out={STUBS}", "leafid/v1/leafid.proto"],
        [f"-I{STUBS}", f"-I{include}", f"--python_out={STUBS}", "rpc_status.proto"],
    ):
        rc = protoc.main(["grpc_tools.protoc", *args])
        if rc != 0:
            sys.exit(f"grpc_tools.protoc failed ({rc}): {args}")
    sys.path.insert(0, str(STUBS))


compile_stubs()
from leafid.v1 import leafid_pb2 as pb  # noqa: E402
from leafid.v1 import leafid_pb2_grpc as rpc  # noqa: E402
import rpc_status_pb2  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (  # noqa: E402
    ProtoReflectionDescriptorDatabase,
)


class Server:
    """The server binary with the gRPC door on, its ports read from its JSON log lines."""

    def __init__(self) -> None:
        binary = os.environ.get("LEAFID_BIN") or str(ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "debug" / "leafid")
        env = dict(os.environ)
        env.update(
            {
                "LEAFID__SERVER__PORT": "0",
                "LEAFID__SERVER__WORKERS": "1",
                "LEAFID__DATABASE__URL": f"sqlite://{TMP / 'leafid.db'}",
                "LEAFID__LOG__FORMAT": "json",
                "LEAFID__ADMIN__TOKEN": ADMIN,
                "LEAFID__GRPC__ENABLED": "true",
                "LEAFID__GRPC__PORT": "0",
                "RUST_LOG": "info",
            }
        )
        work = TMP / "work"
        work.mkdir()
        self.proc = subprocess.Popen(
            [binary], cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )
        ports: "queue.Queue[tuple[str, int]]" = queue.Queue()
        self.tail: list[str] = []

        def drain() -> None:
            for line in self.proc.stderr:
                self.tail = (self.tail + [line.rstrip()])[-30:]
                try:
                    v = json.loads(line)
                except ValueError:
                    continue
                msg = v.get("message") or v.get("fields", {}).get("message")
                port = v.get("port") or v.get("fields", {}).get("port")
                if msg in ("listening", "grpc listening") and port:
                    ports.put((msg, int(port)))

        threading.Thread(target=drain, daemon=True).start()
        got = {}
        deadline = time.monotonic() + 60
        while len(got) < 2:
            try:
                msg, port = ports.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                sys.exit("the server did not log both ports: " + " | ".join(self.tail))
            got[msg] = port
        self.http = f"http://127.0.0.1:{got['listening']}"
        self.grpc = f"127.0.0.1:{got['grpc listening']}"
        while True:
            try:
                with urllib.request.urlopen(self.http + "/health/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("the server was not ready: " + " | ".join(self.tail))
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def admin():
    return (("authorization", f"Bearer {ADMIN}"),)


def reason(err: grpc.RpcError) -> str:
    """The ErrorInfo reason of a failed call (the HTTP error body's `code`)."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = rpc_status_pb2.Status.FromString(value)
            for any_ in status.details:
                if any_.type_url.endswith("google.rpc.ErrorInfo"):
                    info = rpc_status_pb2.ErrorInfo.FromString(any_.value)
                    assert info.domain == "leafid.io", info
                    return info.reason
    raise AssertionError(f"no ErrorInfo in {err}")


def check_ids(ids: list[int]) -> None:
    assert all(i > 0 for i in ids), ids[:5]
    assert len(set(ids)) == len(ids), "duplicate ids"
    assert all(a < b for a, b in zip(ids, ids[1:])), "ids do not increase"


def run_ids(ranges) -> list[int]:
    out = []
    for r in ranges:
        assert r.first <= r.last, r
        out.extend(range(r.first, r.last + 1))
    return out


def main() -> int:
    server = Server()
    channel = grpc.insecure_channel(server.grpc)
    seg, snow, tags = rpc.SegmentStub(channel), rpc.SnowflakeStub(channel), rpc.TagsStub(channel)
    passed, failed = 0, 0

    def test_tags_create_list_get():
        tags.CreateTag(pb.CreateTagRequest(biz_tag="py.a", step=10), metadata=admin())
        tags.CreateTag(pb.CreateTagRequest(biz_tag="py.big", step=100, max_id=ABOVE_2_53), metadata=admin())
        names = [t.biz_tag for t in tags.ListTags(pb.ListTagsRequest()).tags]
        assert "py.a" in names and "py.big" in names, names
        row = tags.GetTag(pb.GetTagRequest(biz_tag="py.big"))
        assert row.max_id == ABOVE_2_53 and row.step == 100, row
        try:
            tags.CreateTag(pb.CreateTagRequest(biz_tag="py.x", step=10))
            raise AssertionError("created without the admin token")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAUTHENTICATED and reason(e) == "unauthorized", e

    def test_segment_ids_ranges_stream_one_caller():
        ids = list(seg.NextIds(pb.NextIdsRequest(biz_tag="py.a", count=25)).ids)
        r = seg.NextRanges(pb.NextRangesRequest(biz_tag="py.a", count=40))
        assert r.count == 40 and not r.strict, r
        ids += run_ids(r.ranges)
        streamed = 0
        for m in seg.StreamRanges(pb.StreamRangesRequest(biz_tag="py.a", count=1000, chunk=64)):
            assert 1 <= m.count <= 64, m
            got = run_ids(m.ranges)
            assert len(got) == m.count
            ids += got
            streamed += m.count
        assert streamed == 1000, streamed
        ids += list(seg.NextIds(pb.NextIdsRequest(biz_tag="py.a", count=3)).ids)
        assert len(ids) == 25 + 40 + 1000 + 3
        check_ids(ids)

    def test_pull_ranges_takes_only_what_was_asked():
        tags.CreateTag(pb.CreateTagRequest(biz_tag="py.pull", step=1000), metadata=admin())
        asks = [pb.PullRequest(biz_tag="py.pull", count=n) for n in (100, 1, 250)]
        got = []
        for m, want in zip(seg.PullRanges(iter(asks)), (100, 1, 250)):
            assert m.count == want, m
            got += run_ids(m.ranges)
        assert len(got) == 351, len(got)
        check_ids(got)
        time.sleep(0.3)
        nxt = list(seg.NextIds(pb.NextIdsRequest(biz_tag="py.pull", count=1)).ids)
        assert nxt == [got[-1] + 1], (nxt, got[-1])

    def test_exact_64_bit_values():
        ids = list(seg.NextIds(pb.NextIdsRequest(biz_tag="py.big", count=3)).ids)
        assert ids == [ABOVE_2_53, ABOVE_2_53 + 1, ABOVE_2_53 + 2], ids
        r = seg.NextRanges(pb.NextRangesRequest(biz_tag="py.big", count=5))
        assert run_ids(r.ranges) == list(range(ABOVE_2_53 + 3, ABOVE_2_53 + 8)), r

    def test_formatted_ids_and_decode():
        req = urllib.request.Request(
            server.http + "/api/v1/tags",
            data=b'{"biz_tag":"py.fmt","step":20,"format":{"prefix":"PY-","width":6}}',
            headers={"content-type": "application/json", "authorization": f"Bearer {ADMIN}"},
            method="POST",
        )
        with urllib.request.urlopen(req) as r:
            assert r.status == 201
        f = seg.NextFormattedIds(pb.NextIdsRequest(biz_tag="py.fmt", count=3))
        assert len(f.ids) == 3 and f.ordered and all(i.startswith("PY-") for i in f.ids), f
        seqs = [seg.Decode(pb.DecodeRequest(biz_tag="py.fmt", id=i)).sequence for i in f.ids]
        assert seqs == sorted(seqs) and len(set(seqs)) == 3, seqs

    def test_snowflake():
        ids = list(snow.NextIds(pb.SnowflakeIdsRequest(count=100)).ids)
        ids += run_ids(snow.NextRanges(pb.SnowflakeIdsRequest(count=50)).ranges)
        check_ids(ids)
        d = snow.Decode(pb.SnowflakeDecodeRequest(id=ids[0]))
        assert d.id == ids[0] and d.layout and d.timestamp, d
        now = int(time.time() * 1000)
        b = snow.Bounds(pb.BoundsRequest(from_unix_ms=now - 60000, to_unix_ms=now + 60000))
        assert b.min_id <= ids[0] <= b.max_id, (b, ids[0])

    def test_errors_carry_the_http_code():
        for call, code, want in [
            (lambda: seg.NextIds(pb.NextIdsRequest(biz_tag="nope", count=1)), grpc.StatusCode.NOT_FOUND, "unknown_biz_tag"),
            (lambda: seg.NextIds(pb.NextIdsRequest(biz_tag="py.a", count=0)), grpc.StatusCode.INVALID_ARGUMENT, "invalid_count"),
            (lambda: seg.NextIds(pb.NextIdsRequest(biz_tag="bad tag", count=1)), grpc.StatusCode.INVALID_ARGUMENT, "invalid_biz_tag"),
            (lambda: snow.Decode(pb.SnowflakeDecodeRequest(id=-5)), grpc.StatusCode.INVALID_ARGUMENT, "invalid_id"),
        ]:
            try:
                call()
                raise AssertionError(f"no error, wanted {want}")
            except grpc.RpcError as e:
                assert (e.code(), reason(e)) == (code, want), (e.code(), e.details())

    def test_health_checker():
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "leafid.v1.Segment", "leafid.v1.Snowflake", "leafid.v1.Tags"):
            r = stub.Check(health_pb2.HealthCheckRequest(service=service))
            assert r.status == health_pb2.HealthCheckResponse.SERVING, (service, r)

    def test_reflection_listing():
        services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
        for want in ("leafid.v1.Segment", "leafid.v1.Snowflake", "leafid.v1.Tags", "grpc.health.v1.Health"):
            assert want in services, (want, services)

    try:
        for name, test in list(locals().items()):
            if not name.startswith("test_"):
                continue
            try:
                test()
                passed += 1
                print(f"ok {name}")
            except Exception:  # noqa: BLE001 - every failure is reported and counted
                failed += 1
                print(f"FAILED {name}")
                traceback.print_exc()
    finally:
        channel.close()
        server.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
