"""Overload (503 + Retry-After), timeouts (504) and failing sessions (500, then service continues)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from app.engine.batching import DynamicBatcher, Feed
from app.protocols.rsa_v1.handlers import V1Handlers
from tests.app.conftest import engine_of, make_settings, ort_forecast, running_client, runtime_of, wait_for
from tests.app.fakes import GatedSession
from tests.app.metrics_scrape import delta, scrape
from tests.utils.batching import replace_run

L, C = 8, 3
URL = "/v1/models/toy/versions/2/forecast"
BODY = {"series": [{"values": np.ones((L, C)).tolist()}]}


def _batcher(client: TestClient) -> DynamicBatcher:
    batcher = engine_of(client).get("toy", 2).batcher
    assert batcher is not None
    return batcher


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


def _submit(pool: ThreadPoolExecutor, client: TestClient) -> Future[Any]:
    return pool.submit(client.post, URL, json=BODY)


def test_full_queue_is_503_with_retry_after(toy_repository: Path, pool: ThreadPoolExecutor) -> None:
    settings = make_settings(
        toy_repository, max_queue_rows=1, max_batch_rows=1, max_batch_wait_ms=0, retry_after_s=3
    )
    with running_client(settings) as client:
        batcher = _batcher(client)
        session = GatedSession(batcher)
        in_flight = _submit(pool, client)
        wait_for(lambda: session.calls == 1, what="first request in the session")
        queued = _submit(pool, client)
        wait_for(lambda: batcher.queued_rows == 1, what="second request queued")
        r = client.post(URL, json=BODY)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "3"
        error = r.json()["error"]
        assert (error["code"], error["limit"]) == ("overloaded", 1)
        session.gate.set()
        assert in_flight.result(10).status_code == 200
        assert queued.result(10).status_code == 200
        assert client.post(URL, json=BODY).status_code == 200
        assert batcher.stats.rejected_items == 1


def test_timeout_is_504_and_expired_request_never_reaches_the_session(
    toy_repository: Path, pool: ThreadPoolExecutor
) -> None:
    settings = make_settings(toy_repository, request_timeout_s=0.3, max_batch_rows=1, max_batch_wait_ms=0)
    with running_client(settings) as client:
        batcher = _batcher(client)
        session = GatedSession(batcher)
        in_flight = _submit(pool, client)
        wait_for(lambda: session.calls == 1, what="first request in the session")
        r = client.post(URL, json=BODY)  # queued behind the blocked call, expires there
        assert r.status_code == 504, r.text
        assert r.json()["error"]["code"] == "timeout"
        assert r.json()["error"]["limit"] == 0.3
        assert in_flight.result(10).status_code == 504  # its own deadline passed in the session
        calls_before = batcher.stats.session_calls
        session.gate.set()
        wait_for(lambda: batcher.stats.session_calls == calls_before + 1, what="the blocked call to end")
        ok = client.post(URL, json=BODY)
        assert ok.status_code == 200, ok.text
        assert session.calls == 2  # the blocked one and the last one: the expired request was dropped
        assert batcher.stats.dropped_items + batcher.stats.expired_items == 1


def test_session_error_is_500_and_the_batcher_keeps_serving(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository)) as client:
        batcher = _batcher(client)
        inner = batcher.runner.run
        failures = iter([True])

        def flaky(feed: Feed) -> np.ndarray:
            if next(failures, False):
                raise RuntimeError("CUDA exploded")
            return inner(feed)

        replace_run(batcher, flaky)  # inline calls too
        r = client.post(URL, json=BODY)
        assert r.status_code == 500, r.text
        error = r.json()["error"]
        assert error["code"] == "inference_failed"
        assert "CUDA exploded" in error["message"]
        ok = client.post(URL, json=BODY)
        assert ok.status_code == 200, ok.text
        assert batcher.running
        assert batcher.stats.failed_calls == 1


def test_unexpected_exception_is_a_json_500(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository)) as client:
        handlers = runtime_of(client).handlers_of(V1Handlers)

        async def broken(*args: Any) -> None:
            raise KeyError("bug")

        handlers.forecast = broken
        r = client.post(URL, json=BODY)
        assert r.status_code == 500
        assert r.json()["error"]["code"] == "internal_error"


ATTENTION_URL = "/v1/models/toy/versions/2/attention"
ATTENTION_BODY = {"series": {"values": np.ones((L, C)).tolist()}}


def _gate_inspect(client: TestClient) -> tuple[threading.Event, list[int]]:
    """Make the version's inspection block until the returned event is set; counts the calls."""
    model = engine_of(client).get("toy", 2).model
    assert model is not None
    inner, gate, calls = model.inspect_feed, threading.Event(), [0]

    def gated(feed: Feed) -> Any:
        calls[0] += 1
        assert gate.wait(10), "gate never opened"
        return inner(feed)

    model.inspect_feed = gated  # type: ignore[method-assign]
    return gate, calls


def test_attention_has_a_deadline_and_a_bound(toy_repository: Path, pool: ThreadPoolExecutor) -> None:
    settings = make_settings(
        toy_repository, request_timeout_s=0.3, max_attention_in_flight=1, retry_after_s=2
    )
    with running_client(settings) as client:
        gate, calls = _gate_inspect(client)
        r = client.post(ATTENTION_URL, json=ATTENTION_BODY)
        assert r.status_code == 504, r.text
        assert r.json()["error"]["code"] == "timeout"
        # The timed-out call still runs in its thread and holds the only slot: the next one is refused.
        r = client.post(ATTENTION_URL, json=ATTENTION_BODY)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "2"
        assert (r.json()["error"]["code"], r.json()["error"]["limit"]) == ("overloaded", 1)
        gate.set()
        wait_for(
            lambda: client.post(ATTENTION_URL, json=ATTENTION_BODY).status_code == 200, what="slot freed"
        )
        assert calls[0] >= 2


def test_start_too_late_for_the_calendar_is_422_before_the_session(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository)) as client:
        batcher = _batcher(client)
        calls = batcher.stats.session_calls
        body = {"series": [{"values": np.ones((L, C)).tolist(), "start": "9999-12-31T20:00:00"}]}
        r = client.post(URL, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "series[0].start"
        assert batcher.stats.session_calls == calls


def test_non_finite_forecast_is_never_serialised(toy_repository: Path) -> None:
    """Within the input bound a model can still overflow: that answer is a 422 naming the series, counted
    in the metrics, and never a 200 with nulls."""
    with running_client(make_settings(toy_repository)) as client:
        batcher = _batcher(client)
        inner = batcher.runner.run

        def overflowing(feed: Feed) -> np.ndarray:
            out = inner(feed)
            out[1, 2, 0] = np.inf
            return out

        replace_run(batcher, overflowing)  # inline calls too
        body = {"series": [{"values": np.ones((L, C)).tolist()} for _ in range(3)]}
        r = client.post(URL, json=body)
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert (error["code"], error["field"]) == ("non_finite_result", "series[1]")
        metrics = client.get("/metrics").text
        assert 'reason="non_finite_result"' in metrics


CUDA_OOM = "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : CUDA failure 2: out of memory ; GPU=0"


def test_device_faults_are_503_with_their_own_codes_and_the_service_keeps_serving(
    toy_repository: Path,
) -> None:
    """Out of memory: retried in halves (answers exact), then 503 device_out_of_memory once a half fails
    too; any other provider fault 503 device_error; both with Retry-After, on /v1 and OIP v2 alike."""
    with running_client(make_settings(toy_repository)) as client:
        runner = engine_of(client).get("toy", 2).model.runner  # type: ignore[union-attr]
        inner, fits, error = runner._call, [2], [ort_errors.RuntimeException(CUDA_OOM)]

        def faulty(feed: Feed, alone: bool) -> np.ndarray:
            if len(feed["window"]) > fits[0]:
                raise error[0]
            return inner(feed, alone)

        runner._call = faulty  # type: ignore[method-assign]
        rng = np.random.default_rng(0)
        windows = rng.normal(0, 1, (3, L, C))
        body = {"series": [{"values": w.tolist()} for w in windows]}
        before = scrape(client)
        r = client.post(URL, json=body)  # 3 rows: out of memory, then 2 + 1 fit
        assert r.status_code == 200, r.text
        want = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", windows)
        got = np.array([s["forecast"] for s in r.json()["forecasts"]], np.float32)
        np.testing.assert_array_equal(got, want)
        fits[0] = 0
        r = client.post(URL, json=body)
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert r.json()["error"]["code"] == "device_out_of_memory"
        assert "out of memory on a call of 2 series" in r.json()["error"]["message"]
        error[0] = ort_errors.EPFail("CUBLAS failure 13: CUBLAS_STATUS_EXECUTION_FAILED")
        v2 = client.post(
            "/v2/models/toy/versions/2/infer",
            json={
                "inputs": [{"name": "window", "datatype": "FP32", "shape": [1, L, C], "data": [0.0] * L * C}]
            },
        )
        assert v2.status_code == 503 and "CUBLAS failure 13" in v2.json()["error"], v2.text
        fits[0] = 8
        assert client.post(URL, json=body).status_code == 200  # serving on
        after = scrape(client)
    labels = {"model": "toy", "version": "2"}
    assert delta(before, after, "rsa_session_retries_total", reason="out_of_memory", **labels) == 2
    assert delta(before, after, "rsa_session_failures_total", **labels) == 2
    assert delta(before, after, "rsa_request_rejections_total", reason="device_error", **labels) == 2
