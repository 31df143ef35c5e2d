"""Admission control on a real uvicorn under an offered load of several times capacity.

The server runs in this process (uvicorn in a thread) so that its session can be made slow: each call
sleeps, releasing the GIL as a GPU-bound session would, so the session, not this 2-core machine's CPU,
is what saturates. The load comes from bench.loadgen's client (raw asyncio HTTP/1.1 keep-alive).
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import uvicorn

from app.engine.batching import Feed
from app.main import create_app
from bench.harness.load import Connection, http_request
from bench.loadgen import Failure, LoadResult, free_port, run_load
from tests.app.conftest import make_settings
from tests.app.metrics_scrape import scrape, total
from tests.utils.batching import replace_run
from tests.utils.speed import scaled

L, C = 8, 3
ROWS = 8  # series per request
SESSION_S = 0.04  # fixed cost of one session call (a slow model, or a GPU's launch overhead)
ROW_S = 0.0005  # and per row
DEADLINE_S = 1.0
URL = "/v1/models/toy/versions/2/forecast"


@contextmanager
def slow_server(repository: Path) -> Iterator[str]:
    settings = make_settings(
        repository,
        max_batch_rows=16,
        max_batch_wait_ms=2,
        request_timeout_s=DEADLINE_S,
        max_queue_rows=100_000,
    )
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server not ready"
            time.sleep(0.05)
        batcher = app.state.runtime.engine.get("toy", 2).batcher
        inner = batcher.runner.run

        def slow(feed: Feed) -> np.ndarray:
            time.sleep(SESSION_S + ROW_S * len(next(iter(feed.values()))))
            return inner(feed)

        replace_run(batcher, slow)  # inline calls too
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


def _bodies() -> list[bytes]:
    rng = np.random.default_rng(5)
    return [
        json.dumps(
            {"series": [{"id": str(i), "values": rng.normal(size=(L, C)).tolist()} for i in range(ROWS)]}
        ).encode()
        for _ in range(16)
    ]


def _check(b: int, payload: bytes) -> Failure | None:
    forecasts = json.loads(payload)["forecasts"]
    return None if len(forecasts) == ROWS else Failure("bad_body", f"{len(forecasts)} forecasts")


async def _probe_healthz(url: str, stop: asyncio.Event) -> list[float]:
    """GET /healthz every 20 ms on its own keep-alive connection until `stop`: latencies in ms."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    conn = Connection(parts.hostname, parts.port)
    wire = http_request("GET", parts.hostname, parts.port, "/healthz", b"", "application/json")
    latencies: list[float] = []
    try:
        for _ in range(2000):  # bounded; `stop` ends it first
            if stop.is_set():
                break
            t0 = time.perf_counter()
            status, _ = await conn.exchange(wire)
            latencies.append((time.perf_counter() - t0) * 1e3)
            assert status == 200
            await asyncio.sleep(0.02)
    finally:
        conn.close()
    return latencies


def _load(
    url: str, concurrency: int, seconds: float, backoff_s: float = 0.0, probe: list[float] | None = None
) -> LoadResult:
    async def both() -> LoadResult:
        stop = asyncio.Event()
        prober = asyncio.ensure_future(_probe_healthz(url, stop))
        try:
            return await _run(url, concurrency, seconds, backoff_s)
        finally:
            stop.set()
            if probe is not None:
                probe.extend(await prober)

    return asyncio.run(both())


async def _run(url: str, concurrency: int, seconds: float, backoff_s: float) -> LoadResult:
    return await run_load(
        url + URL,
        _bodies(),
        _check,
        requests=1_000_000,  # bounded by the time limit
        concurrency=concurrency,
        time_limit_s=seconds,
        request_timeout_s=10,
        series_per_request=ROWS,
        backoff_s=backoff_s,
    )


def _summary(result: LoadResult) -> dict[str, Any]:
    by_status: dict[int, list[float]] = {}
    for status, ms in zip(result.statuses, result.latencies_ms, strict=True):
        by_status.setdefault(status, []).append(ms)
    ok = by_status.get(200, [])
    return {
        "goodput_rows_s": len(ok) * ROWS / result.duration_s,
        "statuses": {k: len(v) for k, v in by_status.items()},
        "max_ms": {k: max(v) for k, v in by_status.items()},
        "p50_ms": {k: statistics.median(v) for k, v in by_status.items()},
    }


def test_overload_is_refused_fast_and_goodput_holds(toy_repository: Path) -> None:
    healthz: list[float] = []
    with slow_server(toy_repository) as url:
        measured = {c: _summary(_load(url, c, 3.0)) for c in (2, 4)}
        concurrency = max(measured, key=lambda c: measured[c]["goodput_rows_s"])
        best = measured[concurrency]
        # 48 clients pausing 0.15 s after a refusal (as a client honouring Retry-After would, briefly):
        # an offered load of several times what the session can serve
        over = _summary(_load(url, 48, 6.0, backoff_s=0.15, probe=healthz))
        # the capacity measured again right after: the goodput is judged against the lower of the two, so
        # that the machine slowing down between them (the other test worker's load) is not read as
        # admission losing goodput (a fresh-clone run failed at 0.77 of a capacity measured 9 s earlier)
        after = _summary(_load(url, concurrency, 3.0))
        best = min(best, after, key=lambda s: s["goodput_rows_s"])
    capacity_rps = best["goodput_rows_s"] / ROWS
    offered_rps = sum(over["statuses"].values()) / 6.0
    healthz_p99 = float(np.percentile(healthz, 99))
    ratio = offered_rps / capacity_rps
    print(  # the figures of the closing note; /healthz p99 is reported, not asserted (a timing)
        f"\nbest {best}\noverload {over}\noffered {offered_rps:.0f} req/s = {ratio:.1f}x "
        f"capacity; goodput {over['goodput_rows_s'] / best['goodput_rows_s']:.0%} of best; "
        f"/healthz p99 {healthz_p99:.1f} ms over {len(healthz)} probes"
    )
    assert offered_rps > 2.5 * capacity_rps  # really an overload
    assert set(over["statuses"]) <= {200, 503, 504}, over  # an answer or a refusal, never a 500
    # Admission leaves slack, but a machine that slows down at once can still make an admitted request
    # miss its deadline: rare, and answered at the deadline (the bound below), never later.
    assert over["statuses"].get(504, 0) <= 0.02 * sum(over["statuses"].values()), over
    # Answered within about one deadline: the deadline, then half of one for the answer to be written,
    # stretched on a busy machine (1.9 s was seen at a load of 6 on 2 cores); a server that let a request
    # run a second deadline still fails here unless the machine is measured twice as slow.
    assert max(over["max_ms"].values()) < (DEADLINE_S + scaled(0.5 * DEADLINE_S)) * 1e3, over
    assert over["p50_ms"][503] < scaled(0.1) * 1e3, over  # refusals come back at once, not after waiting
    assert over["goodput_rows_s"] >= 0.8 * best["goodput_rows_s"]


def _upload(host: str, port: int, declared: int, sent: bytes) -> socket.socket:
    """A forecast upload that declares `declared` bytes and sends only `sent`, then stalls."""
    upload = socket.create_connection((host, port))
    upload.sendall(
        f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n".encode()
        + sent
    )
    return upload


def test_a_body_being_read_counts_for_the_bytes_that_arrived(toy_repository: Path) -> None:
    """A request's rows count as admitted work as its body arrives (estimated from the bytes that came),
    until it submits or ends: an upload well under way makes the next request a 503 at once, and when it
    is abandoned its rows stop counting. (Bodies in flight were in no count: a flood of big requests
    was refused only once parsed, seconds later.)"""
    bodies = _bodies()
    with slow_server(toy_repository) as url:
        host, port = urlsplit(url).hostname, urlsplit(url).port
        assert host is not None and port is not None
        with httpx.Client(base_url=url, timeout=10) as http:
            for body in bodies[:5]:  # the version measures what a row costs it
                assert (
                    http.post(URL, content=body, headers={"content-type": "application/json"}).status_code
                    == 200
                )
            # what the upload's size says it holds (L x C values of about 8 bytes each): 360 rows arrived,
            # 23 full calls of 16 at 48 ms, past 60% of the deadline (the drain rate is per row of a full
            # call: 180 rows, 12 calls, would be through in time and are admitted)
            rows = 400
            declared = rows * L * C * 8
            with _upload(host, port, declared, b"[" + b" " * (declared * 9 // 10)):
                # Until the service has reserved the rows that arrived (an ordering, not a sleep); then at
                # once: the reservation expires at the upload's deadline.
                admitted_by = time.monotonic() + DEADLINE_S / 2
                while total(scrape(http), "rsa_backlog_seconds", model="toy") == 0:
                    assert time.monotonic() < admitted_by, "the upload was never admitted"
                    time.sleep(0.01)
                t0 = time.perf_counter()
                refused = http.post(URL, content=bodies[0], headers={"content-type": "application/json"})
                took_ms = (time.perf_counter() - t0) * 1e3
                assert refused.status_code == 503 and refused.json()["error"]["code"] == "overloaded", (
                    refused.text
                )
                assert took_ms < scaled(0.5) * 1e3, took_ms
            deadline = time.monotonic() + scaled(5)
            while (
                http.post(URL, content=bodies[0], headers={"content-type": "application/json"}).status_code
                != 200
            ):
                assert time.monotonic() < deadline, "the abandoned upload's rows still count"
                time.sleep(0.05)


def test_a_stalled_body_refuses_no_other_request(toy_repository: Path) -> None:
    """The probe of issue 32: a connection declares Content-Length 60,000,000 and sends 6 bytes. Reserved
    by its declared size, it held the version for its whole deadline (every forecast 503); reserved by
    what arrived, it holds one row, and every other request is answered."""
    bodies = _bodies()
    with slow_server(toy_repository) as url:
        host, port = urlsplit(url).hostname, urlsplit(url).port
        assert host is not None and port is not None
        with httpx.Client(base_url=url, timeout=10) as http:
            post = lambda: http.post(URL, content=bodies[0], headers={"content-type": "application/json"})  # noqa: E731
            for _ in range(5):  # the version measures what a row costs it
                assert post().status_code == 200
            with _upload(host, port, 60_000_000, b'{"ser'):
                time.sleep(0.3)  # judged on its headers (an idle version admits it), reading its body
                statuses = [post().status_code for _ in range(20)]
            assert statuses == [200] * 20, statuses
