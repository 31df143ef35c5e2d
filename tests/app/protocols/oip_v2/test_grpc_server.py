"""The gRPC server's bounds against a real `python -m app` with API keys (issue 32, failure 8): a call
without a valid key is refused from its metadata, before its message is read, so a flood of big
unauthenticated calls leaves the service's memory where it was.

The flood is the probe's: 32 concurrent ModelInfer calls of 60 MiB each, on one HTTP/2 connection as a
gRPC channel sends them. They are written frame by frame here (HTTP/2 with flow control, a few lines),
from one buffer of zeros: 32 real gRPC client calls would hold a copy of each message in the test itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb  # not ours: the two cannot share a process (oip_v2/README.md)
from tritonclient.grpc import service_pb2_grpc as pb_grpc

from bench.loadgen import free_port
from tests.app.fakes import write_cycle_repository
from tests.app.live import LiveService, live_service
from tests.app.protocols.conftest import C, L

KEY = "s3cret"
CALLS, MESSAGE_MIB = 32, 60
INFER = "/inference.GRPCInferenceService/ModelInfer"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveService, int]]:
    folder = tmp_path_factory.mktemp("grpc_keyed")
    grpc_port = free_port()
    with live_service(
        write_cycle_repository(folder / "repository"),
        folder / "service.log",
        RSA_GRPC_PORT=str(grpc_port),
        RSA_API_KEYS=KEY,
    ) as service:
        yield service, grpc_port


def _infer(model: str = "plain") -> pb.ModelInferRequest:
    window = np.ones((1, L, C), np.float32)
    request = pb.ModelInferRequest(model_name=model)
    request.inputs.add(name="window", datatype="FP32", shape=list(window.shape))
    request.raw_input_contents.append(window.tobytes())
    return request


def _call(port: int, metadata: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        try:
            stub.ModelInfer(_infer(), metadata=metadata, timeout=30)
        except grpc.RpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


def test_keys_are_checked_before_the_message_and_answer_as_before(keyed: tuple[LiveService, int]) -> None:
    _, port = keyed
    assert _call(port, (("authorization", f"Bearer {KEY}"),)) == grpc.StatusCode.OK
    assert _call(port, ()) == grpc.StatusCode.UNAUTHENTICATED
    assert _call(port, (("authorization", "Bearer nope"),)) == grpc.StatusCode.PERMISSION_DENIED
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:  # the probes stay open, as /healthz
        assert pb_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(), timeout=30).live
        with pytest.raises(grpc.RpcError) as info:
            pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(_infer(), timeout=30)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "an API key is required" in (info.value.details() or "")


def test_an_unauthenticated_flood_leaves_memory_flat(keyed: tuple[LiveService, int]) -> None:
    service, port = keyed
    for _ in range(3):  # warm: the servicer, the channel's buffers
        _call(port, (("authorization", f"Bearer {KEY}"),))
        _call(port, ())
    idle = _rss_mib(service.process.pid)
    peak = idle
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _rss_mib(service.process.pid))
            await asyncio.sleep(0.02)

    async def run() -> Flood:
        sampler = asyncio.ensure_future(sample())
        try:
            return await asyncio.wait_for(_flood(port, CALLS, MESSAGE_MIB * 2**20), 60)
        finally:
            await asyncio.sleep(0.5)  # what the server does after the calls ended counts too
            stop.set()
            await sampler

    flood = asyncio.run(run())
    print(
        f"\n{CALLS} unauthenticated calls of {MESSAGE_MIB} MiB: RSS {idle:.0f} MiB idle, {peak:.0f} MiB at "
        f"most; {flood.sent / 2**20:.1f} MiB sent before all {len(flood.ended)} ended in "
        f"{flood.seconds:.2f} s"
    )
    assert len(flood.ended) == CALLS, flood.ended  # every call answered (refused), none left hanging
    assert flood.sent < CALLS * MESSAGE_MIB * 2**20 // 4  # refused long before the messages were read
    assert peak - idle < 100, (idle, peak)
    assert service.process.poll() is None, service.output()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


# -- HTTP/2, just enough to send big gRPC messages under flow control (RFC 9113) ----------------------
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x4, 0x5


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _header(name: str, value: str) -> bytes:
    """An HPACK literal without indexing, new name, no Huffman coding (names and values under 127)."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


class Flood:
    def __init__(self) -> None:
        self.sent = 0
        self.ended: set[int] = set()
        self.seconds = 0.0


async def _flood(port: int, calls: int, payload_bytes: int) -> Flood:
    """`calls` ModelInfer calls at once without a key, each a message with `payload_bytes` of zeros in
    raw_input_contents, sent as fast as the server's flow control allows; until every call has ended
    (its trailers or a reset)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    flood, start = Flood(), time.perf_counter()
    headers = b"".join(
        _header(k, v)
        for k, v in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", INFER),
            (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        )
    )
    prefix = b"\x0a\x05plain\x3a" + _varint(payload_bytes)  # model_name, then raw_input_contents' length
    message = len(prefix) + payload_bytes
    streams = [2 * i + 1 for i in range(calls)]
    left = {s: 5 + message for s in streams}  # the gRPC frame: flag, length, message
    window = {s: 65_535 for s in streams}
    state = {"connection": 65_535, "frame": 16_384}
    zeros = memoryview(bytes(1 << 20))
    changed = asyncio.Event()
    writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(SETTINGS, 0, 0))
    for s in streams:
        writer.write(_frame(HEADERS, END_HEADERS, s, headers))

    async def read() -> None:
        while len(flood.ended) < calls:
            head = await reader.readexactly(9)
            length, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            body = await reader.readexactly(length)
            if kind == SETTINGS and not flags & ACK:
                for i in range(0, len(body), 6):
                    key, value = (
                        int.from_bytes(body[i : i + 2], "big"),
                        int.from_bytes(body[i + 2 : i + 6], "big"),
                    )
                    if key == INITIAL_WINDOW_SIZE:
                        for s in streams:
                            window[s] += value - 65_535
                    elif key == MAX_FRAME_SIZE:
                        state["frame"] = value
                writer.write(_frame(SETTINGS, ACK, 0))
            elif kind == WINDOW_UPDATE:
                increment = int.from_bytes(body, "big") & 0x7FFFFFFF
                if stream == 0:
                    state["connection"] += increment
                elif stream in window:
                    window[stream] += increment
            elif kind == PING and not flags & ACK:
                writer.write(_frame(PING, ACK, 0, body))
            elif kind == GOAWAY:
                flood.ended.update(streams)
            elif (kind == HEADERS and flags & END_STREAM) or kind == RST_STREAM:
                flood.ended.add(stream)
            changed.set()

    async def write() -> None:
        while True:
            progress = False
            for s in streams:
                if s in flood.ended or not left[s]:
                    continue
                n = min(window[s], state["connection"], state["frame"], left[s], len(zeros))
                if n <= 0:
                    continue
                first = left[s] == 5 + message
                chunk = (b"\x00" + message.to_bytes(4, "big") + prefix)[:n] if first else zeros[:n]
                n = len(chunk)
                left[s] -= n
                window[s] -= n
                state["connection"] -= n
                flood.sent += n
                writer.write(_frame(DATA, END_STREAM if not left[s] else 0, s, bytes(chunk)))
                progress = True
            await writer.drain()
            if not progress:
                if all(s in flood.ended or not left[s] for s in streams):
                    return
                changed.clear()
                await changed.wait()

    sender = asyncio.ensure_future(write())
    try:
        await read()
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        writer.close()
    flood.seconds = time.perf_counter() - start
    return flood
