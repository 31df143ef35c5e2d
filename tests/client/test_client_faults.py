"""The client against servers that misbehave (issue 46, item 11), no service needed:

- a server that drips its answer a byte at a time: `timeout_s` bounds the whole request (connecting,
  sending, the last byte of the answer), not each read, so the call ends with a timeout while the
  server is still dripping (a fake server on 127.0.0.1, bounded in connections and time);
- `Retry-After: nan` (or inf, or text): treated as absent, the client's own backoff, never a bare
  ValueError;
- a connection refused, reset (a fake server sending RST) or closed before its answer: sent again twice
  at most, then httpx's own error; 503 retries counted apart;
- garbage answers (not JSON, JSON of the wrong shape, binary tensors that do not fit): `ServiceError`
  naming the call and what was wrong, not a decode error (httpx.MockTransport).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client, ServiceError

# -- a server that drips ------------------------------------------------------------------------------

DRIP_EVERY_S = 0.05
DRIP_BYTES = 400  # 20 s of dripping: far past the client's 0.5 s, and the bound on the server's time
TIMEOUT_S = 0.5


@dataclass
class Dripper:
    url: str
    connections: int = 0
    finished: threading.Event = field(default_factory=threading.Event)  # a drip sent to its last byte
    left: threading.Event = field(default_factory=threading.Event)  # the client went away mid-drip


@contextmanager
def dripping_server(head: bytes, drip: bytes, max_connections: int = 2) -> Iterator[Dripper]:
    """127.0.0.1: answers each request (at most `max_connections`) with `head` at once, then `drip` one
    byte every DRIP_EVERY_S; stops at a client's disconnect, the drip's end, or the context's exit."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(max_connections)
    listener.settimeout(0.1)
    stop = threading.Event()
    server = Dripper(f"http://127.0.0.1:{listener.getsockname()[1]}")

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                request += chunk
            try:
                conn.sendall(head)
                for i in range(len(drip)):
                    if stop.is_set():
                        return
                    conn.sendall(drip[i : i + 1])
                    time.sleep(DRIP_EVERY_S)
            except OSError:  # the client closed: what a bounded call does
                server.left.set()
                return
            server.finished.set()

    def accept() -> None:
        threads = []
        while not stop.is_set() and server.connections < max_connections:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by the context's exit
                break
            server.connections += 1
            thread = threading.Thread(target=serve, args=(conn,), daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join(DRIP_BYTES * DRIP_EVERY_S + 10)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield server
    finally:
        stop.set()
        listener.close()
        acceptor.join(DRIP_BYTES * DRIP_EVERY_S + 15)


ANSWER = json.dumps({"name": "m", "versions": []}).encode().ljust(DRIP_BYTES)
HEADERS = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(ANSWER)


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_dripping_server_cannot_hold_a_call_past_timeout_s(where: str) -> None:
    """Each byte comes well within the read timeout, so only a bound on the whole request ends it."""
    head, drip = (b"", HEADERS + ANSWER) if where == "headers" else (HEADERS, ANSWER)
    with dripping_server(head, drip) as server:
        client = Client(server.url, timeout_s=TIMEOUT_S, max_retries=0)
        with client, pytest.raises(httpx.TimeoutException, match="timeout_s"):
            client.model("m")
        assert not server.finished.is_set(), "the call waited for the whole drip"
        assert server.connections == 1


def test_a_call_within_timeout_s_is_answered() -> None:
    """The bound is on the whole request, and a quick one is served as before (a drip of 0 bytes)."""
    body = json.dumps({"error": "no such model"}).encode()
    head = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(
        body
    )
    with dripping_server(head + body, b"") as server:
        with (
            Client(server.url, timeout_s=5.0, max_retries=0) as client,
            pytest.raises(ServiceError) as caught,
        ):
            client.model("m")
        assert caught.value.status == 404 and "no such model" in caught.value.message


# -- Retry-After ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["nan", "NaN", "inf", "-inf", "1e999", "soon", "", "Wed, 21 Oct 2015 07:28:00 GMT"]
)
def test_an_unusable_retry_after_is_treated_as_absent(value: str) -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(503, headers={"Retry-After": value}, json={"error": "overloaded"})
        return httpx.Response(200, json={"ok": True})

    client = Client("http://test", max_retries=2, max_wait_s=0.01)
    client.http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    assert client._send("GET", "/x").json() == {"ok": True} and len(calls) == 2
    wait = client._wait(httpx.Response(503, headers={"Retry-After": value}), attempt=0)
    assert wait == 0.01  # the backoff (0.25 s), capped by max_wait_s


# -- dropped connections ------------------------------------------------------------------------------


@dataclass
class Resetter:
    url: str
    connections: int = 0


@contextmanager
def resetting_server(resets: int) -> Iterator[Resetter]:
    """127.0.0.1: reads each request, resets the first `resets` connections (SO_LINGER 0: an RST, as
    Linux sends for what was queued on a killed front end's socket) and answers the next with 200. At
    most resets + 2 connections, each bounded by 5 s."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.1)
    server = Resetter(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()
    body = b'{"ok": true}'
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n" + body

    def accept() -> None:
        while not stop.is_set() and server.connections < resets + 2:
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            server.connections += 1
            with conn:
                conn.settimeout(5)
                request = b""
                while b"\r\n\r\n" not in request and (chunk := conn.recv(65536)):
                    request += chunk
                if server.connections <= resets:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(answer)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield server
    finally:
        stop.set()
        acceptor.join(10)
        listener.close()


@pytest.mark.parametrize("resets", [0, 1, 2])
def test_a_reset_connection_is_sent_again(resets: int) -> None:
    """A front end killed with the request queued on its socket (docs/service.md): sent again, on a
    new connection, twice at most."""
    with resetting_server(resets) as server, Client(server.url, max_wait_s=0.01) as client:
        assert client._send("GET", "/x").json() == {"ok": True}
        assert server.connections == resets + 1


def test_a_connection_reset_three_times_raises_httpx_error() -> None:
    with resetting_server(3) as server, Client(server.url, max_wait_s=0.01) as client:
        with pytest.raises(httpx.TransportError):
            client._send("GET", "/x")
        assert server.connections == 3


@pytest.mark.parametrize(
    "error", [httpx.ConnectError("refused"), httpx.ReadError("reset"), httpx.RemoteProtocolError("closed")]
)
def test_dropped_connections_are_tried_three_times_and_503s_counted_apart(error: Exception) -> None:
    """Three tries of a refused, reset or closed connection, then httpx's own error (a wrong URL fails
    within a second); a 503 between them is a retry of its own kind, bounded by max_retries."""
    answers: list[Exception | httpx.Response] = [
        error,
        httpx.Response(503, json={"error": "busy"}),
        error,
        httpx.Response(503, json={"error": "busy"}),
        httpx.Response(200, json={"ok": True}),
    ]
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        answer = answers[len(calls) - 1] if len(calls) <= len(answers) else error
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = Client("http://test", max_retries=2, max_wait_s=0.01)
    client.http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    assert client._send("GET", "/x").json() == {"ok": True} and len(calls) == 5
    calls.clear()
    answers[:] = [error] * 4
    with pytest.raises(type(error)):
        client._send("GET", "/x")
    assert len(calls) == 3
    calls.clear()
    no_retries = Client("http://test", max_retries=0, max_wait_s=0.01)
    no_retries.http = client.http
    with pytest.raises(type(error)):
        no_retries._send("GET", "/x")
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("error", "calls"), [(httpx.ConnectError("refused"), 2), (httpx.ReadError("reset"), 1)]
)
def test_a_call_that_is_not_idempotent_is_sent_again_only_where_it_never_left(
    error: Exception, calls: int
) -> None:
    """A fit that publishes adds a version each time it reaches the server: after a reset its answer may
    be lost with the version published, so it is not sent again; a refused connection sent nothing."""
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        if len(sent) == 1:
            raise error
        return httpx.Response(200, json={"ok": True})

    client = Client("http://test", max_wait_s=0.01)
    client.http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    if calls == 1:
        with pytest.raises(type(error)):
            client._send("POST", "/x", idempotent=False, json={"publish": {"model": "m"}})
    else:
        assert client._send("POST", "/x", idempotent=False, json={"publish": {"model": "m"}}).json()
    assert len(sent) == calls


def test_fit_forecast_sends_a_publish_once_and_a_plain_fit_again() -> None:
    bodies: list[dict[str, Any]] = []

    def reset_fits(request: httpx.Request) -> httpx.Response | None:
        if not request.url.path.endswith("/fit_forecast"):
            return None  # the model's description, as documented
        bodies.append(json.loads(request.content))
        raise httpx.ReadError("reset")

    client = serving(reset_fits)
    client.max_retries, client.max_wait_s = 8, 0.01
    for publish, tries in ((None, 3), ("m2", 1)):
        bodies.clear()
        with pytest.raises(httpx.ReadError):
            client.fit_forecast(FRAME, h=2, model="m", publish=publish)
        assert len(bodies) == tries and all(("publish" in b) == (publish is not None) for b in bodies)


# -- garbage answers ------------------------------------------------------------------------------------

INFO = {
    "name": "m",
    "latest_version": 1,
    "versions": [
        {
            "version": 1,
            "state": "ready",
            "channels": ["y"],
            "input_length": 4,
            "horizon": 2,
            "frequency": "1h",
            "frequency_seconds": 3600,
            "intervals": None,
            "timezone": None,
            "panel": None,
        }
    ],
}
META = {"inputs": [{"name": "window"}], "parameters": {"max_series_per_request": 8, "max_body_bytes": 2**20}}
FRAME = pd.DataFrame(
    {
        "unique_id": ["a"] * 6,
        "ds": pd.date_range("2024-01-01", periods=6, freq="h"),
        "y": np.arange(6, dtype=np.float64),
    }
)


def serving(garbage: Callable[[httpx.Request], httpx.Response | None]) -> Client:
    """A client of a fake service: model "m" described right, every other answer `garbage`'s."""

    def handler(request: httpx.Request) -> httpx.Response:
        answer = garbage(request)
        if answer is not None:
            return answer
        if request.url.path == "/v1/models/m":
            return httpx.Response(200, json=INFO)
        if request.url.path == "/v2/models/m/versions/1":
            return httpx.Response(200, json=META)
        return httpx.Response(500, json={"error": f"unexpected {request.url.path}"})

    client = Client("http://test", max_retries=0)
    client.http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    return client


def text(body: str | bytes, status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, content=body.encode() if isinstance(body, str) else body, headers=headers)


def on(path_end: str, answer: httpx.Response) -> Callable[[httpx.Request], httpx.Response | None]:
    return lambda request: answer if request.url.path.endswith(path_end) else None


def infer_answer(
    shape: list[int], data: list[float] | None = None, binary: bytes | None = None
) -> httpx.Response:
    output: dict[str, Any] = {"name": "forecast", "datatype": "FP32", "shape": shape}
    if binary is None:
        output["data"] = data if data is not None else [0.0] * int(np.prod(shape))
        return httpx.Response(200, json={"outputs": [output]})
    output["parameters"] = {"binary_data_size": len(binary)}
    head = json.dumps({"outputs": [output]}).encode()
    return httpx.Response(
        200, content=head + binary, headers={"inference-header-content-length": str(len(head))}
    )


GARBAGE: dict[str, tuple[Callable[[httpx.Request], httpx.Response | None], Callable[[Client], Any], str]] = {
    "model: not JSON": (
        on("/v1/models/m", text("<html>proxy error</html>")),
        lambda c: c.model("m"),
        "not JSON",
    ),
    "model: a list": (on("/v1/models/m", text("[]")), lambda c: c.model("m"), "GET /v1/models/m"),
    "model: versions not a list": (
        on("/v1/models/m", text('{"latest_version": 1, "versions": 3}')),
        lambda c: c.model("m"),
        "GET /v1/models/m",
    ),
    "model: a version without channels": (
        on("/v1/models/m", text('{"latest_version": 1, "versions": [{"version": 1, "state": "ready"}]}')),
        lambda c: c.model("m"),
        "channels",
    ),
    "metadata: not JSON": (on("/versions/1", text("\x00\x01")), lambda c: c.model("m"), "not JSON"),
    "infer: not JSON": (on("/infer", text("oops")), lambda c: c.forecast(FRAME, model="m"), "/infer"),
    "infer: no outputs": (on("/infer", text("{}")), lambda c: c.forecast(FRAME, model="m"), "outputs"),
    "infer: a wrong shape": (
        on("/infer", infer_answer([3, 2, 1])),
        lambda c: c.forecast(FRAME, model="m"),
        "shape",
    ),
    "infer: too few values": (
        on("/infer", infer_answer([1, 2, 1], data=[0.0])),
        lambda c: c.forecast(FRAME, model="m"),
        "/infer",
    ),
    "infer: a short binary part": (
        on("/infer", infer_answer([1, 2, 1], binary=b"\x00" * 4)),
        lambda c: c.forecast(FRAME, model="m"),
        "/infer",
    ),
    "infer: a header length past the body": (
        on("/infer", text("{}", **{"inference-header-content-length": "x"})),
        lambda c: c.forecast(FRAME, model="m"),
        "/infer",
    ),
    "cross_validation: not JSON": (
        on("/cross_validation", text("")),
        lambda c: c.cross_validation(FRAME, model="m"),
        "not JSON",
    ),
    "cross_validation: no series": (
        on("/cross_validation", text('{"series": 1}')),
        lambda c: c.cross_validation(FRAME, model="m"),
        "cross_validation",
    ),
    "cross_validation: a window without its forecast": (
        on(
            "/cross_validation",
            text(json.dumps({"series": [{"metrics": {}, "windows": [{"cutoff": 4, "actual": [[1.0]]}]}]})),
        ),
        lambda c: c.cross_validation(FRAME, model="m"),
        "forecast",
    ),
    "detect_anomalies: a list": (
        on("/detect_anomalies", text("[1, 2]")),
        lambda c: c.detect_anomalies(FRAME, model="m"),
        "detect_anomalies",
    ),
    "fit_forecast: not JSON": (
        on("/fit_forecast", text("Service Unavailable")),
        lambda c: c.fit_forecast(FRAME, model="m"),
        "not JSON",
    ),
    "fit_forecast: no fit block": (
        on("/fit_forecast", text('{"forecasts": []}')),
        lambda c: c.fit_forecast(FRAME, model="m"),
        "fit",
    ),
    "attention: not JSON": (
        on("/attention", text("nope")),
        lambda c: c.attention(FRAME, model="m"),
        "not JSON",
    ),
    "index: not JSON": (on("/v2/repository/index", text("{")), lambda c: c.index(), "not JSON"),
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_a_garbage_answer_is_a_service_error_naming_what_was_wrong(case: str) -> None:
    garbage, call, named = GARBAGE[case]
    with serving(garbage) as client, pytest.raises(ServiceError) as caught:
        call(client)
    error = caught.value
    assert error.status == 200, error
    assert named in error.message, error.message
    assert "answer" in error.message, error.message


# -- well-formed answers still read as before -------------------------------------------------------------


def well_formed(request: httpx.Request) -> httpx.Response | None:
    """Documented answers for FRAME (6 hourly values of "a"; L = 4, H = 2)."""
    path = request.url.path
    if path.endswith("/infer"):
        return infer_answer([1, 2, 1], data=[6.0, 7.0])
    if path.endswith("/cross_validation"):
        window = {"cutoff": 4, "forecast": [[4.5], [5.5]], "actual": [[4.0], [5.0]]}
        metrics = {"mae": 0.5, "mse": 0.25, "mase": 1.0, "smape": 0.1, "coverage": {}, "points": 2}
        return httpx.Response(200, json={"series": [{"id": "a", "windows": [window], "metrics": metrics}]})
    if path.endswith("/detect_anomalies"):
        series = {
            "actual": [[4.0], [5.0]],
            "forecast": [[4.0], [9.0]],
            "lo": [[3.0], [8.0]],
            "hi": [[5.0], [10.0]],
            "score": [[0.0], [4.0]],
            "anomaly": [[False], [True]],
        }
        return httpx.Response(200, json={"level": 99, "series": [series]})
    if path.endswith("/fit_forecast"):
        forecast = {
            "id": "a",
            "forecast": [[6.0], [7.0]],
            "timestamps": ["2024-01-01T06:00:00Z", "2024-01-01T07:00:00Z"],
        }
        return httpx.Response(200, json={"forecasts": [forecast], "fit": {"levels": [], "series": 1}})
    return None


def test_well_formed_answers_read_as_before() -> None:
    with serving(well_formed) as client:
        assert client.model("m").horizon == 2
        forecast = client.forecast(FRAME, model="m")
        assert forecast["m"].tolist() == [6.0, 7.0]  # the forecast's column is named after the model
        backtest = client.cross_validation(FRAME, model="m")
        assert backtest["m"].tolist() == [4.5, 5.5] and backtest.attrs["metrics"]["points"] == 2
        flagged = client.detect_anomalies(FRAME, model="m", last=2)
        assert flagged["anomaly"].tolist() == [False, True] and "m-hi-99" in flagged
        fitted = client.fit_forecast(FRAME, model="m")
        assert fitted["m"].tolist() == [6.0, 7.0] and fitted.attrs["fit"]["series"] == 1


@pytest.mark.parametrize("limit", [None, 1, 3])
def test_a_backtests_pieces_are_sent_at_most_the_services_evaluations_in_flight_at_once(
    limit: int | None,
) -> None:
    """The service refuses a model's evaluations past RSA_MAX_EVALUATIONS_IN_FLIGHT (503) while the first
    run: a client sending more pieces of one call at once than that failed once its retries ran out (one
    67,849-value series' anomaly check, 2026-12-07). It reads the limit from the OIP v2 metadata (2, the
    service's default, where absent) and keeps at most that many pieces in flight, whatever its
    `concurrency`."""
    frame = pd.concat([FRAME.assign(unique_id=f"s{i}") for i in range(6)], ignore_index=True)
    params: dict[str, int] = {"max_series_per_request": 1, "max_body_bytes": 2**20}
    if limit is not None:
        params["max_evaluations_in_flight"] = limit
    lock, flying, most = threading.Lock(), [0], [0]

    def counting(request: httpx.Request) -> httpx.Response | None:
        path = request.url.path
        if path == "/v2/models/m/versions/1":
            return httpx.Response(200, json={**META, "parameters": params})
        if not path.endswith("/cross_validation"):
            return None
        with lock:
            flying[0] += 1
            most[0] = max(most[0], flying[0])
        time.sleep(0.05)  # long enough for the other workers to send theirs
        with lock:
            flying[0] -= 1
        window = {"cutoff": 4, "forecast": [[4.5], [5.5]], "actual": [[4.0], [5.0]]}
        metrics = {"mae": 0.5, "mse": 0.25, "mase": 1.0, "smape": 0.1, "coverage": {}, "points": 2}
        ids = [s["id"] for s in json.loads(request.content)["series"]]
        return httpx.Response(
            200, json={"series": [{"id": i, "windows": [window], "metrics": metrics} for i in ids]}
        )

    with serving(counting) as client:
        client.concurrency = 4
        assert client.model("m").limits.max_evaluations_in_flight == (limit or 2)
        backtest = client.cross_validation(frame, model="m")
    assert sorted(backtest["unique_id"].unique()) == [f"s{i}" for i in range(6)]
    assert 1 <= most[0] <= (limit or 2)
