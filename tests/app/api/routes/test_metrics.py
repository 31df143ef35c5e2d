"""GET /metrics through the real app: what each request, batch and rejection adds, and when."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.engine.batching import Feed
from app.engine.model import OnnxModel
from tests.app.conftest import engine_of, in_process_engine, make_settings, running_client, wait_for
from tests.app.fakes import GatedSession, write_repository
from tests.app.metrics_scrape import delta, scrape, total, value
from tests.utils.batching import replace_run

L, C = 8, 3
LATEST = "/v1/models/{name}/forecast"
VERSIONED = "/v1/models/{name}/versions/{version}/forecast"


def _body(n: int = 1) -> dict[str, Any]:
    return {"series": [{"id": str(i), "values": np.ones((L, C)).tolist()} for i in range(n)]}


def test_exposition_formats_and_families(client: TestClient) -> None:
    assert client.post("/v1/models/toy/forecast", json=_body()).status_code == 200  # labelled series appear
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    for name in (
        "rsa_requests_total",
        "rsa_request_duration_seconds_bucket",
        "rsa_requests_in_flight",
        "rsa_event_loop_lag_seconds_bucket",
        "rsa_queue_wait_seconds_bucket",
        "rsa_session_run_seconds_bucket",
        "rsa_batch_rows_bucket",
        "rsa_rows_total",
        "rsa_queue_rows",
        "rsa_backlog_seconds",
        "rsa_model_info",
        "rsa_model_load_state",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
    ):
        assert f"\n{name}" in r.text, name
    assert "_created" not in r.text
    om = client.get("/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"})
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert om.text.endswith("# EOF\n") and "# TYPE rsa_model info" in om.text


def test_memory_of_every_process_of_the_service_and_its_total(client: TestClient) -> None:
    """One process: itself as the front end (the engine's process too, with TEST_ENGINE=remote), each
    process once, and the total their sum."""
    samples = scrape(client)
    memory = {
        dict(labels)["pid"]: (dict(labels)["role"], v)
        for (name, labels), v in samples.items()
        if name == "rsa_process_resident_memory_bytes"
    }
    assert memory[str(os.getpid())][0] == "frontend"
    assert [role for role, _ in memory.values()].count("frontend") == 1
    assert all(v > 0 for _, v in memory.values())
    assert value(samples, "rsa_service_resident_memory_bytes") == sum(v for _, v in memory.values())


def test_requests_counted_by_endpoint_model_version_and_code(client: TestClient) -> None:
    before = scrape(client)
    for _ in range(3):
        assert client.post("/v1/models/toy/forecast", json=_body()).status_code == 200
    assert client.post("/v1/models/toy/versions/1/forecast", json=_body()).status_code == 200
    malformed = {"content": b'{"series": [', "headers": {"content-type": "application/json"}}
    for _ in range(2):
        assert client.post("/v1/models/toy/forecast", **malformed).status_code == 400  # type: ignore[arg-type]
    assert (
        client.post("/v1/models/toy/versions/1/forecast", json={"series": [{"values": [[1]]}]}).status_code
        == 422
    )
    assert client.post("/v1/models/made-up-name/forecast", json=_body()).status_code == 404
    assert client.post("/v1/models/toy/versions/9/forecast", json=_body()).status_code == 404
    assert client.get("/no/such/path").status_code == 404
    after = scrape(client)

    def d(**labels: str) -> float:
        return delta(before, after, "rsa_requests_total", **labels)

    # "latest" is labelled with the version that answered; a parse error happens before that is known
    assert d(endpoint=LATEST, model="toy", version="2", code="200") == 3
    assert d(endpoint=VERSIONED, model="toy", version="1", code="200") == 1
    assert d(endpoint=LATEST, model="toy", version="", code="400") == 2
    assert d(endpoint=VERSIONED, model="toy", version="1", code="422") == 1
    # client-chosen names never become label values: an unknown model or version is labelled empty
    assert d(endpoint=LATEST, model="", version="", code="404") == 1
    assert d(endpoint=VERSIONED, model="toy", version="", code="404") == 1
    assert d(endpoint="unmatched", code="404") == 1
    assert not any("made-up-name" in str(labels) or "/no/such" in str(labels) for _, labels in after)

    def rejected(reason: str) -> float:
        return delta(before, after, "rsa_request_rejections_total", reason=reason)

    assert (rejected("invalid_input"), rejected("not_found")) == (3, 3)
    durations = delta(before, after, "rsa_request_duration_seconds_count", endpoint=LATEST)
    assert durations == 3 + 2 + 1
    assert delta(before, after, "rsa_request_duration_seconds_sum", endpoint=LATEST) > 0


def test_rows_batches_queue_wait_and_session_time(client: TestClient) -> None:
    before = scrape(client)
    assert client.post("/v1/models/toy/versions/2/forecast", json=_body(5)).status_code == 200
    after = scrape(client)
    labels = {"model": "toy", "version": "2"}
    assert delta(before, after, "rsa_rows_total", **labels) == 5
    assert delta(before, after, "rsa_batch_rows_count", **labels) == 1
    assert delta(before, after, "rsa_batch_rows_sum", **labels) == 5
    # 5 rows fall in the le="8" bucket, not in le="4"
    assert delta(before, after, "rsa_batch_rows_bucket", le="4.0", **labels) == 0
    assert delta(before, after, "rsa_batch_rows_bucket", le="8.0", **labels) == 1
    assert delta(before, after, "rsa_queue_wait_seconds_count", **labels) == 1
    run = {**labels, "provider": "CPUExecutionProvider"}
    assert delta(before, after, "rsa_session_run_seconds_count", **run) == 1
    assert 0 < delta(before, after, "rsa_session_run_seconds_sum", **run) < 10
    # probes are counted but kept out of the latency histogram
    assert delta(before, after, "rsa_requests_total", endpoint="/metrics", code="200") == 1
    assert total(after, "rsa_request_duration_seconds_count", endpoint="/metrics") == 0


def test_model_info_and_load_state(client: TestClient) -> None:
    samples = scrape(client)
    for version in ("1", "2"):
        info = [ls for (n, ls), _ in samples.items() if n == "rsa_model_info" and ("version", version) in ls]
        assert len(info) == 1
        got = dict(info[0])
        assert got["provider"] == "CPUExecutionProvider" and got["onnxruntime_version"]
        assert (got["input_length"], got["horizon"]) == (str(L), "4")
        states = {
            s: value(samples, "rsa_model_load_state", model="toy", version=version, state=s)
            for s in ("loading", "ready", "failed")
        }
        assert states == {"loading": 0, "ready": 1, "failed": 0}
    assert not any(n.startswith("rsa_gpu_") for n, _ in samples)  # no CUDA in use: absent, not zero


def test_rejection_series_of_loaded_versions_start_at_zero(toy_repository: Path) -> None:
    """rate() cannot count the increment that creates a series: they must exist before the first one."""
    with running_client(make_settings(toy_repository)) as client:
        samples = scrape(client)
    for endpoint in (LATEST, VERSIONED, "/v1/models/{name}/attention"):
        for reason in ("overloaded", "timeout", "invalid_input", "not_ready"):
            labels = {
                "endpoint": endpoint,
                "protocol": "rsa_v1",
                "model": "toy",
                "version": "2",
                "reason": reason,
            }
            assert ("rsa_request_rejections_total", frozenset(labels.items())) in samples, labels
    assert total(samples, "rsa_request_rejections_total") == 0


def test_failed_version_is_visible(tmp_path: Path) -> None:
    repository = write_repository(tmp_path)
    (repository / "toy" / "1" / "model.onnx").write_bytes(b"not onnx")  # sha256 no longer matches
    with running_client(make_settings(repository), ready=False) as client:
        samples = scrape(client)
        assert value(samples, "rsa_model_load_state", model="toy", version="1", state="failed") == 1
        assert value(samples, "rsa_model_load_state", model="toy", version="2", state="ready") == 1
        assert [dict(ls)["version"] for (n, ls), _ in samples.items() if n == "rsa_model_info"] == ["2"]
        r = client.post("/v1/models/toy/versions/1/forecast", json=_body())
        assert r.status_code == 503
        after = scrape(client)
        rejected = delta(
            samples, after, "rsa_request_rejections_total", model="toy", version="1", reason="not_ready"
        )
        assert rejected == 1


def test_overload_timeout_and_in_flight(toy_repository: Path) -> None:
    settings = make_settings(
        toy_repository, max_queue_rows=1, max_batch_rows=1, max_batch_wait_ms=0, request_timeout_s=2
    )
    url = "/v1/models/toy/versions/2/forecast"
    with running_client(settings) as client, ThreadPoolExecutor(max_workers=2) as pool:
        before = scrape(client)
        batcher = engine_of(client).get("toy", 2).batcher
        assert batcher is not None
        session = GatedSession(batcher)
        first = pool.submit(client.post, url, json=_body())
        wait_for(lambda: session.calls == 1, what="first request in the session")
        queued = pool.submit(client.post, url, json=_body())
        wait_for(lambda: batcher.queued_rows == 1, what="second request queued")
        # /metrics answers while the session is busy and the queue is full
        during = scrape(client)
        assert value(during, "rsa_requests_in_flight") == 2
        assert value(during, "rsa_queue_rows", model="toy", version="2") == 1
        # one row running and one queued, at the drain rate the version measured at load
        assert batcher.row_seconds is not None and batcher.row_seconds > 0
        backlog = value(during, "rsa_backlog_seconds", model="toy", version="2")
        assert backlog == pytest.approx(2 * batcher.row_seconds, rel=1e-6)
        assert client.post(url, json=_body()).status_code == 503
        session.gate.set()
        assert first.result(10).status_code == 200 and queued.result(10).status_code == 200
        # a request that outlives its deadline behind a closed gate
        session.gate.clear()
        slow = pool.submit(client.post, url, json=_body())
        wait_for(lambda: session.calls == 3, what="the slow request in the session")
        # one row running, at the drain rate the first calls measured
        assert batcher.row_seconds is not None
        backlog = value(scrape(client), "rsa_backlog_seconds", model="toy", version="2")
        assert backlog == pytest.approx(batcher.row_seconds)
        assert slow.result(10).status_code == 504
        session.gate.set()
        wait_for(lambda: value(scrape(client), "rsa_requests_in_flight") == 0, what="no request in flight")
        after = scrape(client)
    labels = {"endpoint": VERSIONED, "model": "toy", "version": "2"}
    assert delta(before, after, "rsa_request_rejections_total", reason="overloaded", **labels) == 1
    assert delta(before, after, "rsa_request_rejections_total", reason="timeout", **labels) == 1
    assert delta(before, after, "rsa_requests_total", code="503", **labels) == 1
    assert delta(before, after, "rsa_requests_total", code="504", **labels) == 1
    wait = delta(before, after, "rsa_queue_wait_seconds_sum", model="toy", version="2")
    assert wait > 0 and math.isfinite(wait)


def test_session_failures_and_payload_too_large(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository, max_body_bytes=2000)) as client:
        batcher = engine_of(client).get("toy", 2).batcher
        assert batcher is not None

        def broken(feed: Feed) -> np.ndarray:
            raise RuntimeError("device lost")

        replace_run(batcher, broken)  # inline calls too
        before = scrape(client)
        assert client.post("/v1/models/toy/versions/2/forecast", json=_body()).status_code == 500
        assert client.post("/v1/models/toy/versions/2/forecast", json=_body(20)).status_code == 413
        after = scrape(client)
    labels = {"model": "toy", "version": "2"}
    assert delta(before, after, "rsa_session_failures_total", **labels) == 1
    assert delta(before, after, "rsa_rows_total", **labels) == 0
    assert delta(before, after, "rsa_requests_total", code="500", **labels) == 1
    assert delta(before, after, "rsa_request_rejections_total", reason="invalid_input", **labels) == 1


class FakeNvml:
    """The part of pynvml the GPU collector calls, with known numbers."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def nvmlInit(self) -> None:  # noqa: N802  (pynvml's names)
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        return type("Memory", (), {"used": 3 * 2**30, "total": 80 * 2**30})()


@in_process_engine
@pytest.mark.parametrize("nvml_starts", [True, False])
def test_gpu_memory_only_where_cuda_is_in_use(
    toy_repository: Path, monkeypatch: pytest.MonkeyPatch, nvml_starts: bool
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", FakeNvml(fail=not nvml_starts))
    with running_client(make_settings(toy_repository, cuda_device_id=0)) as client:
        assert not any(n.startswith("rsa_gpu_") for n, _ in scrape(client))  # CPU provider: absent
        monkeypatch.setattr(OnnxModel, "provider", property(lambda self: "CUDAExecutionProvider"))
        samples = scrape(client)
    gpu = {n: v for (n, ls), v in samples.items() if n.startswith("rsa_gpu_") and dict(ls) == {"device": "0"}}
    if nvml_starts:
        assert gpu == {"rsa_gpu_memory_used_bytes": 3 * 2**30, "rsa_gpu_memory_total_bytes": 80 * 2**30}
    else:
        assert gpu == {}  # no driver: the scrape still works, and says nothing rather than zero
    info = [dict(ls) for (n, ls), _ in samples.items() if n == "rsa_model_info"]
    assert {i["provider"] for i in info} == {"CUDAExecutionProvider"}
