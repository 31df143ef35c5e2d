"""The pandas client against a real service process: its answers are /v1's for the same series, it
sizes requests by the server's limits, names the series of a refused request, retries 503 and 429, and
wraps attention inspection and the repository API."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client, ServiceError
from rsa_client.client import ModelLimits

from tests.client.conftest import CHANNELS, etth1_long

L = 512
CLIENT = Path(__file__).resolve().parents[2] / "client" / "rsa_client"


def v1_answer(url: str, frame: pd.DataFrame, h: int, level: list[float], per_request: int) -> dict:
    """/v1's JSON answer for each series' last L rows (start: the first of them), `per_request` series a
    request in id order: the client's own grouping, so that each series is run in a batch of the same
    size (ONNX Runtime's CPU kernels for a batch of one differ from a larger batch's in the last bits,
    3.5e-5 measured on this model)."""
    series = []
    for sid, rows in frame.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True):
        last = rows.tail(L)
        start = pd.Timestamp(last["ds"].iloc[0]).isoformat()
        series.append({"id": sid, "values": last[CHANNELS].to_numpy().tolist(), "start": start})
    answers = {}
    for i in range(0, len(series), per_request):
        body = {"series": series[i : i + per_request], "horizon": h, "level": level}
        response = httpx.post(f"{url}/v1/models/etth1-rsa/versions/5/forecast", json=body, timeout=120)
        assert response.status_code == 200, response.text
        answers |= {f["id"]: f for f in response.json()["forecasts"]}
    return answers


def check_against_v1(out: pd.DataFrame, expected: dict, exact: bool) -> None:
    assert sorted(out["unique_id"].unique()) == sorted(expected)
    for sid, rows in out.groupby("unique_id"):
        want = expected[sid]
        stamps = pd.to_datetime(want["timestamps"]).tz_convert(None)
        assert (rows["ds"].to_numpy() == stamps.to_numpy()).all()
        for name, key in (("", "forecast"), ("-lo-80", "lo-80"), ("-hi-80", "hi-80")):
            got = rows[[f"etth1-rsa-{c}{name}" for c in CHANNELS]].to_numpy()  # named after the model
            if exact:  # float32 both, and /v1 writes each in its shortest exact form
                np.testing.assert_array_equal(got, np.asarray(want[key], np.float32))
            else:
                np.testing.assert_allclose(got, np.asarray(want[key], np.float32), rtol=1e-4, atol=1e-4)


def test_forecast_is_v1s_answer_for_the_same_series(service):
    """One request at a time, so the service's batcher cannot merge two: every value is /v1's exactly."""
    frame = etth1_long(7)
    with Client(service.url, concurrency=1) as client:
        out = client.forecast(frame, h=24, level=[80], model="etth1-rsa")
    assert list(out.columns[:3]) == ["unique_id", "ds", "etth1-rsa-HUFL"] and "etth1-rsa-OT-hi-80" in out
    assert len(out) == 7 * 24  # 7 series under a limit of 3 a request: three requests, in order
    check_against_v1(out, v1_answer(service.url, frame, 24, [80], per_request=3), exact=True)


def test_concurrent_requests_answer_the_same(service):
    frame = etth1_long(11, seed=2)
    with Client(service.url, concurrency=4) as client:
        out = client.forecast(frame, h=96, level=[80], model="etth1-rsa")
    check_against_v1(out, v1_answer(service.url, frame, 96, [80], per_request=3), exact=False)


def test_rows_per_request_follow_both_limits():
    assert ModelLimits(1024, 64 * 2**20).rows_per_request(512, 7, True) == 1024
    # the body limit binds: 14,344 bytes a window
    assert ModelLimits(1024, 2**20).rows_per_request(512, 7, True) == (2**20 - 16 * 1024) // (512 * 28 + 8)
    assert ModelLimits(5, 2**10).rows_per_request(512, 7, False) == 1  # at least one
    # a global model's `lengths`: 8 bytes more a window (one channel, L = 24, no start)
    fit = ModelLimits(10**6, 2**20).rows_per_request(24, 1, False, with_lengths=True)
    assert fit == (2**20 - 16 * 1024) // (24 * 4 + 8)


def test_metadata_states_the_limits(service):
    with Client(service.url) as client:
        spec = client.model("etth1-rsa")
    assert spec.limits.max_series_per_request == 3 and spec.limits.max_body_bytes == 64 * 2**20
    assert spec.version == 5 and spec.has_cycle and spec.levels


def test_a_refused_series_is_named(service):
    frame = etth1_long(5, seed=1)
    latest = frame[frame["unique_id"] == "s03"]["ds"].idxmax()
    frame.loc[latest, "OT"] = 1e30  # in its last window; beyond what float32 normalises
    with Client(service.url) as client, pytest.raises(ServiceError) as caught:
        client.forecast(frame, h=4, model="etth1-rsa")
    assert caught.value.status == 400 and caught.value.series == ["s03"], caught.value


def test_short_series_are_named_before_any_request(service):
    """etth1-rsa is not a global model: every series needs its input length (a global model's shorter
    series: tests/client/test_short_series_client.py)."""
    frame = etth1_long(2)
    short = frame[frame["unique_id"] == "s01"].sort_values("ds").tail(100)
    frame = pd.concat([frame[frame["unique_id"] == "s00"], short])
    with Client(service.url) as client, pytest.raises(ValueError, match="'s01' \\(100 rows\\)"):
        client.forecast(frame, model="etth1-rsa")


class DeadlineOver(httpx.HTTPTransport):
    """The real service, except that an infer call of more than `most` windows answers 504 (its deadline
    passed), as a loaded server answers a call too big for its deadline."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self.most = most
        self.sizes: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/infer"):
            head = request.read()[: int(request.headers["inference-header-content-length"])]
            window = next(t for t in json.loads(head)["inputs"] if t["name"] == "window")
            self.sizes.append(window["shape"][0])
            if window["shape"][0] > self.most:
                return httpx.Response(504, json={"error": "no result within the request's deadline of 30s"})
        return super().handle_request(request)


def test_a_504_is_asked_again_in_halves(service):
    """A call the service could not finish within its deadline is asked again in halves, down to what
    it finishes: the answers are the whole call's, in order; a 504 on one window is raised."""
    frame = etth1_long(5)
    with Client(service.url) as client:
        want = client.forecast(frame, h=8, model="etth1-rsa")
        over = DeadlineOver(most=2)
        client.http = httpx.Client(base_url=service.url, transport=over, timeout=120)
        got = client.forecast(frame, h=8, model="etth1-rsa")
        pd.testing.assert_frame_equal(got, want, rtol=1e-4, atol=1e-4)  # other batch sizes: last bits
        answered = [n for n in over.sizes if n <= over.most]
        assert sum(answered) == 5 and len(answered) < len(over.sizes)  # every window once, after 504s
        client.http = httpx.Client(base_url=service.url, transport=DeadlineOver(most=0), timeout=120)
        with pytest.raises(ServiceError) as caught:
            client.forecast(frame, h=8, model="etth1-rsa")
        assert caught.value.status == 504


def test_503_and_429_are_retried_after_retry_after():
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(503, headers={"Retry-After": "0"}, json={"error": "overloaded"})
        if len(calls) == 2:
            return httpx.Response(429, headers={"Retry-After": "0"}, json={"error": "slow down"})
        return httpx.Response(200, json={"ok": True})

    client = Client("http://test", max_retries=3)
    client.http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    assert client._send("GET", "/x").json() == {"ok": True} and len(calls) == 3
    calls.clear()
    client.max_retries = 1
    with pytest.raises(ServiceError) as caught:
        client._send("GET", "/x", series=["a"])
    assert caught.value.status == 429 and len(calls) == 2  # bounded: the second answer is raised


def test_attention_and_the_repository_api(service):
    frame = etth1_long(1)
    with Client(service.url) as client:
        answer = client.attention(frame, matrices=["rem"], average_heads=True, layers=[0])
        assert isinstance(answer, dict) and answer["input_length"] == L
        listed = client.index()
        assert {(m["name"], m["version"], m["state"]) for m in listed} >= {("etth1-rsa", "5", "READY")}
        client.unload("etth1-rsa")
        assert not client.index(ready_only=True)
        client.load("etth1-rsa")
        assert client.model("etth1-rsa").version == 5


def test_the_client_imports_nothing_of_the_service():
    """Installable on its own: pandas, numpy, httpx; no torch, onnxruntime or app."""
    imported = set()
    for path in CLIENT.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= {
        "rsa_client",
        "httpx",
        "numpy",
        "pandas",
        "json",
        "math",
        "re",
        "threading",
        "time",
        "contextlib",
        "httpcore",  # httpx's own transport, given a bound on each request (the client's deadline)
        "collections",
        "concurrent",
        "dataclasses",
        "datetime",
        "typing",
        "warnings",  # an in-sample backtest is said as a UserWarning
        "functools",  # one_series: a frame without an id column, one rule for every call
        "inspect",
        "rsa_core",  # the rules it shares with the service (installed on its own, client/pyproject.toml)
    }, imported
