"""bench.loadgen: the short form against the real service, and its checks shown to catch wrong answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import numpy as np
import pytest

from bench import loadgen
from bench.harness.checks import ForecastChecker
from bench.harness.load import Failure, LoadResult, http_request, run_load
from bench.harness.workloads import Workload, prepare_forecast_workload


def _table(out: str) -> dict[str, str]:
    rows = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition("  ")
        rows[key.strip()] = value.strip()
    return rows


def test_short_form_against_the_service(capsys: pytest.CaptureFixture[str]) -> None:
    """About 2,000 requests at concurrency 64 against `python -m app` started by the module itself."""
    argv = ["--requests", "2000", "--concurrency", "64", "--warmup", "64", "--time-limit", "240"]
    # One ORT thread per session: the machine is shared, and spinning threads only slow the server here.
    code = loadgen.main([*argv, "--server-env", "RSA_INTRA_OP_THREADS=1"])
    out = capsys.readouterr().out
    rows = _table(out)
    assert code == 0, out
    assert rows["requests"] == "2000 of 2000 (+ 64 warm-up)", out
    assert rows["answers checked"] == "2064", out  # every answer, warm-up included
    assert int(rows["parsed"].split()[0]) >= 64, out  # each distinct window compared with onnxruntime
    assert rows["errors"] == "0 (none)", out
    assert rows["server exit code"] == "0", out
    assert rows["result"] == "PASS", out
    for key in ("throughput", "latency ms", "duration"):
        assert key in rows, out


@pytest.fixture(scope="module")
def workload() -> Workload:
    return prepare_forecast_workload(windows=4, series_per_request=2)


def _answer(checker: ForecastChecker, b: int, **overrides: object) -> dict:
    forecasts = [
        {"id": sid, "forecast": checker.expected[b][k].astype(float).tolist(), "channels": None}
        for k, sid in enumerate(checker.ids[b])
    ]
    return {"model": "etth1-rsa", "version": 1, "provider": "CPUExecutionProvider", "forecasts": forecasts}


def _fresh(w: Workload) -> ForecastChecker:
    return ForecastChecker(w.checker.model, w.checker.version, w.checker.ids, w.checker.expected)


def test_workload_is_the_v1_request_format(workload: Workload) -> None:
    assert workload.path == "/v1/models/etth1-rsa/versions/1/forecast"
    body = json.loads(workload.bodies[1])
    assert body["horizon"] == 96 and [s["id"] for s in body["series"]] == workload.checker.ids[1]
    assert np.array(body["series"][0]["values"]).shape == (96, 7)
    assert "start" not in body["series"][0]  # version 1 has no seasonal cycle
    assert workload.checker.expected[1].shape == (2, 96, 7)
    # Body 1's second series is window 3: distinct windows, so the reference answers differ too.
    assert not np.allclose(workload.checker.expected[1][0], workload.checker.expected[1][1])


def test_checker_passes_a_right_answer_and_memoises_it(workload: Workload) -> None:
    check = _fresh(workload)
    good = json.dumps(_answer(check, 1)).encode()
    assert check(1, good) is None
    assert check(1, good) is None
    assert (check.parsed, check.memo_hits) == (1, 1)
    # A verified answer for body 1 says nothing about body 0.
    failure = check(0, good)
    assert failure is not None and failure.kind == "bad_body" and "id" in failure.detail


@pytest.mark.parametrize(
    ("tamper", "kind"),
    [
        ("scaled", "mismatch"),
        ("one_value", "mismatch"),
        ("missing_id", "bad_body"),
        ("swapped_ids", "bad_body"),
        ("nan", "bad_body"),
        ("short_horizon", "bad_body"),
        ("string_value", "bad_body"),
        ("wrong_version", "bad_body"),
        ("not_json", "bad_body"),
    ],
)
def test_checker_catches_a_wrong_answer(workload: Workload, tamper: str, kind: str) -> None:
    check = _fresh(workload)
    assert check(1, json.dumps(_answer(check, 1)).encode()) is None  # memoised: the tampered one must not hit
    data = _answer(check, 1)
    fc = data["forecasts"]
    if tamper == "scaled":
        fc[1]["forecast"] = (np.array(fc[1]["forecast"]) * 1.001).tolist()
    elif tamper == "one_value":
        fc[0]["forecast"][50][6] += 0.05
    elif tamper == "missing_id":
        del fc[1]["id"]
    elif tamper == "swapped_ids":
        data["forecasts"] = fc[::-1]
    elif tamper == "nan":
        fc[0]["forecast"][0][0] = float("nan")
    elif tamper == "short_horizon":
        fc[0]["forecast"] = fc[0]["forecast"][:95]
    elif tamper == "string_value":
        fc[0]["forecast"][3][3] = str(fc[0]["forecast"][3][3])
    elif tamper == "wrong_version":
        data["version"] = 2
    payload = b'{"forecasts": [' if tamper == "not_json" else json.dumps(data).encode()
    failure = check(1, payload)
    assert isinstance(failure, Failure) and failure.kind == kind, failure


# A fake server on loopback for the core: each answer is chosen by the order requests arrive in.
# A reply in parts is written part by part, with a pause between, so the client reads them separately.
Reply = Callable[[int], Awaitable[bytes | list[bytes] | None]]


async def _with_server(
    reply: Reply, run: Callable[[str], Awaitable[LoadResult]], heads: list[bytes] | None = None
) -> LoadResult:
    """`heads`, if given, collects each request's head as it arrives."""
    seen = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if heads is not None:
                    heads.append(head)
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                k, seen = seen, seen + 1
                answer = await reply(k)
                if answer is None:  # drop the connection without answering
                    break
                parts = answer if isinstance(answer, list) else [answer]
                for n, part in enumerate(parts):
                    if n:
                        await asyncio.sleep(0.01)
                    writer.write(part)
                    await writer.drain()
                if b"connection: close" in parts[0].lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        return await run(f"http://127.0.0.1:{port}/forecast")


def _ok(body: bytes, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode() + body


def _good_or_bad(b: int, payload: bytes) -> Failure | None:
    return None if payload == b"good" else Failure("mismatch", repr(payload))


def test_core_counts_every_kind_of_error() -> None:
    async def reply(k: int) -> bytes | list[bytes] | None:
        match k % 10:
            case 1:  # chunked, split mid-word
                return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\ngo\r\n2\r\nod\r\n0\r\n\r\n"
            case 2:
                return _ok(b"good", "Connection: close")  # the client must reconnect
            case 3:
                return b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\n\r\n{}"
            case 4:  # no length: the body runs to the end of the connection, here sent in two parts
                return [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ngo", b"od"]
            case 5:
                return _ok(b"bad")
            case 7:
                return None
        return _ok(b"good")

    result = asyncio.run(
        _with_server(
            reply,
            lambda url: run_load(
                url, [b"{}", b"[]"], _good_or_bad, requests=40, concurrency=4, time_limit_s=60, warmup=10
            ),
        )
    )
    # 50 requests arrive (warm-up included), five of each failing kind.
    assert result.errors == {"status_503": 5, "mismatch": 5, "transport": 5}, result.error_samples
    assert (result.completed, result.checked, len(result.latencies_ms)) == (40, 40, 36)
    assert not result.passed
    assert not result.stopped_by_time_limit


def test_core_passes_a_clean_run_and_stops_at_the_time_limit() -> None:
    async def fast(k: int) -> bytes:
        return _ok(b"good")

    async def slow(k: int) -> bytes:
        await asyncio.sleep(0.05)
        return _ok(b"good")

    def run(n: int, limit: float) -> Callable[[str], Awaitable[LoadResult]]:
        return lambda url: run_load(url, [b"{}"], _good_or_bad, requests=n, concurrency=2, time_limit_s=limit)

    clean = asyncio.run(_with_server(fast, run(200, 60)))
    assert clean.passed and (clean.completed, clean.checked, clean.error_count) == (200, 200, 0)
    cut = asyncio.run(_with_server(slow, run(10_000, 0.3)))
    assert cut.stopped_by_time_limit and not cut.passed
    assert 0 < cut.completed < 100 and cut.error_count == 0


def test_only_loopback_is_load_tested() -> None:
    with pytest.raises(ValueError, match="loopback"):
        asyncio.run(
            run_load("http://192.0.2.1/x", [b"{}"], _good_or_bad, requests=1, concurrency=1, time_limit_s=1)
        )


def test_extra_headers_go_with_every_body() -> None:
    async def fast(k: int) -> bytes:
        return _ok(b"good")

    heads: list[bytes] = []
    headers = {"Inference-Header-Content-Length": "2"}
    result = asyncio.run(
        _with_server(
            fast,
            lambda url: run_load(
                url,
                [b"{}", b"[]xyz"],
                _good_or_bad,
                requests=6,
                concurrency=2,
                time_limit_s=60,
                content_type="application/octet-stream",
                headers=headers,
            ),
            heads,
        )
    )
    assert result.passed and len(heads) == 6
    for head in heads:
        lines = head.lower().split(b"\r\n")
        assert lines.count(b"inference-header-content-length: 2") == 1, head
        assert lines.count(b"content-type: application/octet-stream") == 1, head
        assert sum(line.startswith(b"content-length:") for line in lines) == 1, head
    # Without `headers`, the request is what it always was.
    plain = http_request("POST", "h", 1, "/p", b"{}", "application/json")
    assert plain == (
        b"POST /p HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        b"Connection: keep-alive\r\n\r\n{}"
    )
    assert plain == http_request("POST", "h", 1, "/p", b"{}", "application/json", {})


@pytest.mark.parametrize(
    "headers",
    [{"Content-Length": "3"}, {"host": "x"}, {"X-A": "1\r\nX-B: 2"}, {"X-A\n": "1"}, {"X:A": "1"}],
)
def test_extra_headers_cannot_break_the_request(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="cannot be sent"):
        http_request("POST", "h", 1, "/p", b"{}", "application/json", headers)
