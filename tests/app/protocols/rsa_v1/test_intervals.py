"""`level` and `quantiles` on `/v1` forecast: both lanes, the answer's arrays, and every refusal's field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from app.protocols.rsa_v1.schemas import ForecastRequest
from app.protocols.rsa_v1.wire import fast_forecast
from tests.app.conftest import make_settings, ort_forecast, running_client
from tests.app.fakes import ToySpec, intervals_block, write_version

LEVELS = [50.0, 80.0, 90.0, 95.0, 99.0]
L, H, C = 8, 4, 3


def widths() -> np.ndarray:
    rng = np.random.default_rng(3)
    grow = np.sort(rng.uniform(0.05, 3.0, size=(len(LEVELS), H, C)), axis=0)
    return grow.astype(np.float32)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("intervals_repo")
    block = intervals_block(LEVELS, widths().astype(np.float64))
    write_version(repo, ToySpec(version=1))  # exported before intervals
    write_version(repo, ToySpec(version=2, manifest_overrides={"intervals": block}))
    return repo


@pytest.fixture(scope="module")
def client(repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(repository)) as c:
        yield c


def body(**extra: object) -> dict[str, object]:
    values = np.random.default_rng(0).normal(10, 3, size=(2, L + 2, C)).round(3)
    return {"series": [{"id": f"s{i}", "values": v.tolist()} for i, v in enumerate(values)], **extra}


def window(b: dict) -> np.ndarray:
    return np.array([s["values"][-L:] for s in b["series"]], np.float32)


def test_level_adds_lo_and_hi_equal_to_the_forecast_plus_minus_the_widths(
    client: TestClient, repository: Path
):
    b = body(level=[95, 80], horizon=3)
    r = client.post("/v1/models/toy/forecast", json=b)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["version"] == 2
    forecast = ort_forecast(repository / "toy" / "2" / "model.onnx", window(b))[:, :3]
    w = widths()
    for i, series in enumerate(answer["forecasts"]):
        assert list(series) == [
            "id",
            "forecast",
            "lo-95",
            "hi-95",
            "lo-80",
            "hi-80",
            "channels",
            "timestamps",
            "timestamps_note",  # these series have no start
        ]
        f = np.array(series["forecast"], np.float32)
        np.testing.assert_array_equal(f, forecast[i])
        for level, k in ((95, 3), (80, 1)):
            # exactly: the JSON holds each float32's shortest form, read back as that float32
            np.testing.assert_array_equal(np.array(series[f"lo-{level}"], np.float32), f - w[k, :3])
            np.testing.assert_array_equal(np.array(series[f"hi-{level}"], np.float32), f + w[k, :3])


def test_quantiles_add_one_array_per_probability(client: TestClient):
    r = client.post("/v1/models/toy/forecast", json=body(quantiles=[0.025, 0.5, 0.75]))
    assert r.status_code == 200, r.text
    series = r.json()["forecasts"][0]
    f = np.array(series["forecast"], np.float32)
    np.testing.assert_array_equal(np.array(series["q-2.5"], np.float32), f - widths()[3])
    np.testing.assert_array_equal(np.array(series["q-50"], np.float32), f)
    np.testing.assert_array_equal(np.array(series["q-75"], np.float32), f + widths()[0])


def test_the_slow_lane_answers_the_same(client: TestClient):
    """A `true` anywhere sends the body to the pydantic model (the fast lane never reads bools)."""
    fast = client.post("/v1/models/toy/forecast", json=body(level=[90]))
    slow_body = body(level=[90])
    slow_body["series"][0]["id"] = "true"  # the word, even in a string, diverts the body
    assert fast_forecast(json.dumps(slow_body).encode(), 16) is None
    assert fast_forecast(json.dumps(body(level=[90])).encode(), 16) is not None
    slow = client.post("/v1/models/toy/forecast", json=slow_body)
    assert fast.status_code == slow.status_code == 200
    assert fast.json()["forecasts"][0]["lo-90"] == slow.json()["forecasts"][0]["lo-90"]


def test_without_level_the_answer_is_unchanged(client: TestClient):
    series = client.post("/v1/models/toy/forecast", json=body()).json()["forecasts"][0]
    assert list(series) == ["id", "forecast", "channels", "timestamps", "timestamps_note"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"level": [85]}, "level[0]"),
        ({"level": [80, 80]}, "level[1]"),
        ({"level": [100]}, "level[0]"),
        ({"level": [0]}, "level[0]"),
        ({"level": []}, "level"),
        ({"level": list(range(1, 40))}, "level"),
        ({"level": "80"}, "level"),
        ({"level": [True]}, "level[0]"),
        ({"quantiles": [0.3]}, "quantiles[0]"),
        ({"quantiles": [0.1, 1.5]}, "quantiles[1]"),
        ({"quantiles": [0.1, 0.1]}, "quantiles[1]"),
        ({"level": [80], "quantiles": [0.1]}, "quantiles"),
    ],
)
def test_bad_requests_get_422_naming_the_field(client: TestClient, extra: dict, field: str):
    r = client.post("/v1/models/toy/forecast", json=body(**extra))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_an_uncalibrated_level_lists_the_available_ones(client: TestClient):
    error = client.post("/v1/models/toy/forecast", json=body(level=[85])).json()["error"]
    assert error["limit"] == LEVELS and error["code"] == "interval_not_calibrated"
    assert "available: 50, 80, 90, 95, 99" in error["message"]


def test_a_model_without_intervals_refuses_clearly(client: TestClient):
    for extra, field in (({"level": [80]}, "level"), ({"quantiles": [0.1]}, "quantiles")):
        r = client.post("/v1/models/toy/versions/1/forecast", json=body(**extra))
        assert r.status_code == 422
        assert r.json()["error"]["field"] == field
        assert r.json()["error"]["code"] == "no_calibrated_intervals"
        assert "no prediction intervals" in r.json()["error"]["message"]
    assert client.post("/v1/models/toy/versions/1/forecast", json=body()).status_code == 200


def test_models_endpoint_lists_the_calibrated_levels(client: TestClient):
    versions = {v["version"]: v for v in client.get("/v1/models/toy").json()["versions"]}
    assert versions[1]["intervals"] is None
    info = versions[2]["intervals"]
    assert info["levels"] == LEVELS and info["method"] == "split_conformal"
    assert info["quantiles"] == [0.005, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.995]


numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(0, 3), max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.none(), st.lists(numbers, max_size=4), numbers), st.sampled_from(["level", "quantiles"]))
def test_the_fast_lane_reads_levels_as_the_model_does_or_steps_aside(value: object, key: str) -> None:
    raw = json.dumps({"series": [{"values": [[1.0, 2.0, 3.0]] * L}], key: value}).encode()
    fast = fast_forecast(raw, 16)
    try:
        model = ForecastRequest.model_validate_json(raw)
    except ValidationError:
        assert fast is None
        return
    if fast is not None:
        assert getattr(fast, key) == getattr(model, key)
