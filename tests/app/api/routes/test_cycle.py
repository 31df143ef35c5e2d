"""Models with a seasonal cycle through the ASGI app: the service computes each window's phase from
`start` and feeds it to the graphs; the answer must equal a direct ONNX Runtime call with the phase
computed here independently (calendar arithmetic on datetimes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import engine_of, make_settings, ort_forecast, ort_run, running_client

L, H, C = 8, 4, 3


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)


def _days(t: datetime) -> int:
    return (_utc(t).date() - date(1970, 1, 1)).days


# Per model: the step of its rows and the phase of a window whose first row is at t.
MODELS: dict[str, tuple[timedelta, Callable[[datetime], int]]] = {
    "hourly": (timedelta(hours=1), lambda t: _utc(t).hour),
    "daily": (timedelta(days=1), lambda t: _days(t) % 7),
    "weekly": (timedelta(hours=1), lambda t: (_days(t) * 24 + _utc(t).hour) % 168),
}


def expected_phase(model: str, start: str, n: int) -> int:
    """The phase of the last L of n values whose first is at `start`."""
    step, phase = MODELS[model]
    return phase(datetime.fromisoformat(start) + step * (n - L))


def values(seed: int, n: int = L) -> np.ndarray:
    return np.random.default_rng(seed).normal(10, 3, (n, C)).astype(np.float32)


def model_file(repo: Path, model: str, file: str = "model.onnx") -> Path:
    return repo / model / "1" / file


def forecasts(body: dict[str, Any]) -> np.ndarray:
    return np.array([f["forecast"] for f in body["forecasts"]])


@pytest.fixture(scope="module")
def client(cycle_repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(cycle_repository)) as c:
        yield c


def post(client: TestClient, model: str, series: list[dict[str, Any]]) -> dict[str, Any]:
    r = client.post(f"/v1/models/{model}/forecast", json={"series": series})
    assert r.status_code == 200, r.text
    return r.json()


def test_phase_of_the_last_l_values(client: TestClient, cycle_repository: Path) -> None:
    x = values(1, n=L + 5)
    start = "2018-06-01T03:00:00"
    body = post(client, "hourly", [{"values": x.tolist(), "start": start}])
    phase = expected_phase("hourly", start, L + 5)
    assert phase == 8  # 03:00 + 5 h: the window starts at 08:00 UTC
    path = model_file(cycle_repository, "hourly")
    np.testing.assert_allclose(forecasts(body)[0], ort_forecast(path, x[-L:][None], [phase])[0], atol=1e-4)
    for wrong in (phase - 1, phase + 1, 3):  # one step off, or the phase of the first value sent
        assert not np.allclose(forecasts(body)[0], ort_forecast(path, x[-L:][None], [wrong])[0], atol=1e-2)
    assert body["forecasts"][0]["timestamps"][0] == "2018-06-01T16:00:00Z"  # start + n steps, as before


@pytest.mark.parametrize(
    "start",
    [
        "2018-06-01T03:00:00",
        "2018-06-01T03:00:00Z",
        "2018-06-01T03:00:00+02:00",
        "2018-06-01T03:00:00-05:30",
        "2018-06-01T00:59:59.999999",
        "1969-12-31T23:00:00",
    ],
)
def test_naive_and_aware_starts(client: TestClient, cycle_repository: Path, start: str) -> None:
    x = values(2)
    body = post(client, "hourly", [{"values": x.tolist(), "start": start}])
    want = ort_forecast(model_file(cycle_repository, "hourly"), x[None], [expected_phase("hourly", start, L)])
    np.testing.assert_allclose(forecasts(body), want, atol=1e-4)


def test_naive_and_aware_starts_really_differ(client: TestClient) -> None:
    x = values(2).tolist()
    naive, aware = (
        forecasts(post(client, "hourly", [{"values": x, "start": s}]))
        for s in ("2018-06-01T03:00:00", "2018-06-01T03:00:00+02:00")
    )
    assert not np.allclose(naive, aware, atol=1e-2)


@pytest.mark.parametrize("model", ["daily", "weekly"])
def test_other_periods(client: TestClient, cycle_repository: Path, model: str) -> None:
    starts = ["2018-06-01T00:00:00", "2021-02-28T13:00:00+01:00", "2000-01-06T23:00:00"]
    xs = [values(10 + i, n=L + 3 * i) for i in range(len(starts))]
    series = [{"values": x.tolist(), "start": s} for x, s in zip(xs, starts, strict=True)]
    body = post(client, model, series)
    phases = [expected_phase(model, s, len(x)) for x, s in zip(xs, starts, strict=True)]
    want = ort_forecast(model_file(cycle_repository, model), np.stack([x[-L:] for x in xs]), phases)
    np.testing.assert_allclose(forecasts(body), want, atol=1e-4)


def test_several_series_with_different_starts(client: TestClient, cycle_repository: Path) -> None:
    starts = [f"2018-06-0{1 + i % 3}T{3 * i:02d}:00:00" for i in range(6)]  # window phases 4i
    xs = [values(20 + i, n=L + i) for i in range(6)]
    body = post(
        client,
        "hourly",
        [
            {"id": f"s{i}", "values": x.tolist(), "start": s}
            for i, (x, s) in enumerate(zip(xs, starts, strict=True))
        ],
    )
    phases = [expected_phase("hourly", s, len(x)) for x, s in zip(xs, starts, strict=True)]
    assert len(set(phases)) == 6
    want = ort_forecast(model_file(cycle_repository, "hourly"), np.stack([x[-L:] for x in xs]), phases)
    assert [f["id"] for f in body["forecasts"]] == [f"s{i}" for i in range(6)]
    np.testing.assert_allclose(forecasts(body), want, atol=1e-4)


def test_missing_start_is_422_naming_the_field(client: TestClient) -> None:
    batcher = engine_of(client).get("hourly", 1).batcher
    assert batcher is not None
    calls = batcher.stats.session_calls
    series = [{"values": values(3).tolist(), "start": "2018-06-01T00:00:00"}, {"values": values(4).tolist()}]
    for path in ("/v1/models/hourly/forecast", "/v1/models/hourly/versions/1/forecast"):
        r = client.post(path, json={"series": series})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_input", "series[1].start")
        assert "required by this model" in error["message"]
        assert "seasonal cycle of period 24 steps of 3600 s" in error["message"]
    r = client.post("/v1/models/hourly/attention", json={"series": {"values": values(4).tolist()}})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "series.start"
    assert "required by this model" in r.json()["error"]["message"]
    r = client.post("/v1/models/daily/forecast", json={"series": [{"values": values(4).tolist()}]})
    assert r.status_code == 422 and "period 7 steps of 86400 s" in r.json()["error"]["message"]
    assert batcher.stats.session_calls == calls


def test_start_too_late_is_still_a_422(client: TestClient) -> None:
    series = [{"values": values(3).tolist(), "start": "9999-12-31T20:00:00"}]
    r = client.post("/v1/models/hourly/forecast", json={"series": series})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "series[0].start"


def test_attention_gets_the_phase(client: TestClient, cycle_repository: Path) -> None:
    x = values(5, n=L + 2)
    start = "2018-06-01T10:00:00+03:00"
    r = client.post("/v1/models/hourly/attention", json={"series": {"values": x.tolist(), "start": start}})
    assert r.status_code == 200, r.text
    head = r.json()["layers"][0]["heads"][0]["matrices"]
    names = ["attn_softmax", "attn_mixed"]
    path = model_file(cycle_repository, "hourly", "inspect.onnx")
    phase = expected_phase("hourly", start, L + 2)
    soft, mixed = ort_run(path, x[-L:][None], names, [phase])
    np.testing.assert_allclose(head["softmax"], soft[0, 0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(head["mixed"], mixed[0, 0, 0, 0], atol=1e-6)
    off_by_one, _ = ort_run(path, x[-L:][None], names, [(phase + 1) % 24])
    assert not np.allclose(head["softmax"], off_by_one[0, 0, 0, 0], atol=1e-4)
    png = client.post(
        "/v1/models/hourly/attention?format=png", json={"series": {"values": x.tolist(), "start": start}}
    )
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


def test_metadata_reports_the_cycle(client: TestClient) -> None:
    cycles = {
        name: client.get(f"/v1/models/{name}").json()["versions"][0]["cycle"]
        for name in ("hourly", "daily", "weekly", "plain")
    }
    assert cycles == {
        "hourly": {"period": 24, "step_seconds": 3600.0},
        "daily": {"period": 7, "step_seconds": 86400.0},
        "weekly": {"period": 168, "step_seconds": 3600.0},
        "plain": None,
    }


def test_model_without_cycle_beside_them_is_unchanged(client: TestClient, cycle_repository: Path) -> None:
    x = values(6)
    for series in ({"values": x.tolist()}, {"values": x.tolist(), "start": "2018-06-01T03:00:00"}):
        body = post(client, "plain", [series])
        np.testing.assert_allclose(
            forecasts(body), ort_forecast(model_file(cycle_repository, "plain"), x[None]), atol=1e-4
        )
    r = client.post("/v1/models/plain/attention", json={"series": {"values": x.tolist()}})
    assert r.status_code == 200, r.text


def test_concurrent_requests_merge_and_each_keeps_its_phases(cycle_repository: Path) -> None:
    n_clients = 24
    rng = np.random.default_rng(7)
    base = datetime(2018, 6, 1)
    # Per client 1..3 series, each with its own start and length, so phases differ within and across.
    requests = [
        [
            (
                rng.normal(0, 5, (L + int(rng.integers(0, 30)), C)).astype(np.float32),
                (base + timedelta(hours=int(rng.integers(0, 24 * 60)))).isoformat(),
            )
            for _ in range(1 + i % 3)
        ]
        for i in range(n_clients)
    ]
    settings = make_settings(cycle_repository, max_batch_wait_ms=20.0, max_batch_rows=16)
    with running_client(settings) as client:
        batcher = engine_of(client).get("hourly", 1).batcher
        assert batcher is not None
        calls_before = batcher.stats.session_calls

        def call(i: int) -> tuple[int, dict[str, Any]]:
            series = [
                {"id": f"c{i}-{j}", "values": x.tolist(), "start": s} for j, (x, s) in enumerate(requests[i])
            ]
            r = client.post("/v1/models/hourly/forecast", json={"series": series})
            return r.status_code, r.json()

        with ThreadPoolExecutor(max_workers=n_clients) as pool:
            results = list(pool.map(call, range(n_clients)))
        calls = batcher.stats.session_calls - calls_before
    assert calls < n_clients, f"{calls} session calls for {n_clients} concurrent requests: nothing merged"
    path = model_file(cycle_repository, "hourly")
    for i, (status, body) in enumerate(results):
        assert status == 200, body
        assert [f["id"] for f in body["forecasts"]] == [f"c{i}-{j}" for j in range(len(requests[i]))]
        phases = [expected_phase("hourly", s, len(x)) for x, s in requests[i]]
        want = ort_forecast(path, np.stack([x[-L:] for x, _ in requests[i]]), phases)
        np.testing.assert_allclose(forecasts(body), want, atol=1e-4)


def test_request_split_over_session_calls_keeps_phases(cycle_repository: Path) -> None:
    xs = [values(40 + i) for i in range(11)]
    starts = [f"2018-06-01T{h:02d}:00:00" for h in range(0, 22, 2)]
    with running_client(make_settings(cycle_repository, max_batch_rows=4)) as client:
        batcher = engine_of(client).get("hourly", 1).batcher
        assert batcher is not None
        before = batcher.stats.session_calls
        body = post(
            client, "hourly", [{"values": x.tolist(), "start": s} for x, s in zip(xs, starts, strict=True)]
        )
        assert batcher.stats.session_calls - before == 3  # ceil(11 / 4)
    want = ort_forecast(model_file(cycle_repository, "hourly"), np.stack(xs), list(range(0, 22, 2)))
    np.testing.assert_allclose(forecasts(body), want, atol=1e-4)
