"""The real thing: `uvicorn app.main:app` in a subprocess on 127.0.0.1, configured by env variables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from bench.loadgen import free_port
from tests.app.conftest import ort_forecast

ROOT = Path(__file__).resolve().parents[2]
L, C = 8, 3


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def server(toy_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("uvicorn") / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    env.update(
        {
            "RSA_MODEL_REPOSITORY": str(toy_repository),
            "RSA_DEVICE": "auto",  # CUDA requested when the build lists it; this machine falls back to CPU
            "RSA_INTRA_OP_THREADS": "1",
            "RSA_MAX_BATCH_WAIT_MS": "25",
            "RSA_LOG_LEVEL": "info",
        }
    )
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    srv = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"uvicorn exited with {process.returncode}:\n{srv.output()}")
            try:
                if httpx.get(f"{srv.url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"uvicorn not ready after 30 s:\n{srv.output()}")
            time.sleep(0.1)
        yield srv
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def test_forecast_over_http(server: Server, toy_repository: Path) -> None:
    x = np.random.default_rng(11).normal(0, 2, (3, L + 4, C)).astype(np.float32)
    body = {
        "series": [
            {"id": str(i), "values": s.tolist(), "start": "2018-06-01T00:00:00"} for i, s in enumerate(x)
        ]
    }
    r = httpx.post(f"{server.url}/v1/models/toy/forecast", json=body, timeout=10)
    assert r.status_code == 200, r.text
    data = r.json()
    assert (data["version"], data["provider"]) == (2, "CPUExecutionProvider")
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", x[:, -L:])
    np.testing.assert_allclose(np.array([f["forecast"] for f in data["forecasts"]]), expected, atol=1e-5)
    assert data["forecasts"][0]["timestamps"][0] == "2018-06-01T12:00:00Z"


def test_provider_fallback_is_reported_and_logged(server: Server) -> None:
    versions = httpx.get(f"{server.url}/v1/models/toy", timeout=5).json()["versions"]
    assert {v["provider"] for v in versions} == {"CPUExecutionProvider"}
    out = server.output()
    assert "providers in use ['CPUExecutionProvider']" in out
    if "CUDAExecutionProvider" in out:  # the build offered CUDA: the fallback must be a WARNING line
        assert "WARNING app.engine.session" in out and "fell back to CPUExecutionProvider" in out


def test_concurrent_http_requests_are_merged(server: Server, toy_repository: Path) -> None:
    """Two series a request: above RSA_INLINE_MAX_ROWS, so each goes through the queue (a one-series
    request that finds its version idle runs at once, unbatched)."""

    def session_calls() -> int:
        versions = httpx.get(f"{server.url}/v1/models/toy", timeout=5).json()["versions"]
        return int(versions[1]["batching"]["session_calls"])

    n = 24
    x = np.random.default_rng(12).normal(0, 1, (2 * n, L, C)).astype(np.float32)
    before = session_calls()
    with (
        httpx.Client(base_url=server.url, timeout=30, limits=httpx.Limits(max_connections=n)) as http,
        ThreadPoolExecutor(max_workers=n) as pool,
    ):

        def call(i: int) -> httpx.Response:
            body = {"series": [{"id": f"c{k}", "values": x[k].tolist()} for k in (2 * i, 2 * i + 1)]}
            return http.post("/v1/models/toy/forecast", json=body)

        responses = list(pool.map(call, range(n)))
    calls = session_calls() - before
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", x)
    for i, r in enumerate(responses):
        assert r.status_code == 200, r.text
        forecasts = r.json()["forecasts"]
        assert [f["id"] for f in forecasts] == [f"c{2 * i}", f"c{2 * i + 1}"]
        got = np.array([f["forecast"] for f in forecasts])
        np.testing.assert_allclose(got, expected[2 * i : 2 * i + 2], atol=1e-5)
    assert calls < n


def test_errors_over_http(server: Server) -> None:
    url = f"{server.url}/v1/models/toy/forecast"
    raw = '{"series": [{"values": [' + ",".join(["[1, 2, 3]"] * (L - 1)) + ", [NaN, 1, 1]]}]}"
    r = httpx.post(url, content=raw, headers={"content-type": "application/json"}, timeout=5)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series[0].values[7][0]"
    r = httpx.post(url, content='{"series": [', headers={"content-type": "application/json"}, timeout=5)
    assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json"
    r = httpx.post(
        f"{server.url}/v1/models/nope/forecast", json={"series": [{"values": [[1, 2, 3]]}]}, timeout=5
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_attention_png_over_http(server: Server) -> None:
    body = {"series": {"values": np.ones((L, C)).tolist()}, "matrices": ["mixed"]}
    r = httpx.post(f"{server.url}/v1/models/toy/attention?format=png", json=body, timeout=30)
    assert r.status_code == 200 and r.content.startswith(b"\x89PNG")
    assert json.loads(httpx.get(f"{server.url}/healthz", timeout=5).text) == {"status": "alive"}
