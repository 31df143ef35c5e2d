"""KServe's time-series forecast API: requests shaped like KServe's documented example (two inputs, a
frequency, a start timestamp, a horizon, quantiles), a multivariate one, the numbers (and the quantiles,
from calibrated intervals) equal to `/v1`'s, and every error in KServe's shape with its code."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from app.protocols.timeseries.codec import parse_request
from app.protocols.timeseries.schemas import TimeSeriesForecastRequest
from tests.app.conftest import make_settings, running_client
from tests.app.fakes import ToySpec, intervals_block, write_version

L, H = 8, 4
URL = "/v1/timeseries/forecast"
LEVELS = [50.0, 80.0, 90.0, 95.0, 99.0]
QUANTILES = [0.005, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.995]  # what LEVELS answer


def intervals(channels: int, seed: int) -> dict[str, Any]:
    """A manifest `intervals` block: widths per level, step and channel, growing with the level."""
    widths = np.sort(np.random.default_rng(seed).uniform(0.1, 3, (len(LEVELS), H, channels)), axis=0)
    return intervals_block(LEVELS, widths.astype(np.float32).astype(np.float64))


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repository = tmp_path_factory.mktemp("timeseries")
    univariate = {"intervals": intervals(1, seed=7)}
    write_version(repository, ToySpec(name="univariate", channels=("value",), manifest_overrides=univariate))
    write_version(repository, ToySpec(name="hourly", cycle_period=24))  # 3 channels, a cycle, no intervals
    write_version(repository, ToySpec(name="banded", manifest_overrides={"intervals": intervals(3, seed=8)}))
    return Path(repository)


@pytest.fixture(scope="module")
def client(repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(repository)) as c:
        yield c


def _series(n: int, width: int | None, seed: int) -> list[Any]:
    values = np.random.default_rng(seed).normal(10, 2, (n, width or 1)).astype(np.float32)
    return values[:, 0].tolist() if width is None else values.tolist()


def documented_example(quantiles: list[float] | None) -> dict[str, Any]:
    """KServe's documented request ("Request Example"), with this model's name, input length and step."""
    options: dict[str, Any] = {"horizon": 3, "other_options": "value"}
    if quantiles is not None:
        options["quantiles"] = quantiles
    return {
        "model": "univariate",
        "inputs": [
            {
                "type": "univariate_time_series",
                "name": "stock_price",
                "series": _series(L + 2, None, seed=1),
                "frequency": "H",
                "start_timestamp": "2025-06-05T13:10:00Z",
            },
            {
                "type": "univariate_time_series",
                "name": "humidity",
                "series": _series(L, None, seed=2),
                "frequency": "hour",
                "start_timestamp": "2025-06-05T13:10:00Z",
            },
        ],
        "options": options,
        "metadata": {"request_id": "user_defined_request_id", "other_data": "value"},
        "other_properties": "value",
    }


def _v1_answer(
    client: TestClient, model: str, values: list[Any], start: str, horizon: int, **extra: object
) -> dict[str, Any]:
    rows = [[v] for v in values] if not isinstance(values[0], list) else values
    body = {"series": [{"values": rows, "start": start}], "horizon": horizon, **extra}
    r = client.post(f"/v1/models/{model}/forecast", json=body)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()["forecasts"][0]
    return answer


def _v1(client: TestClient, model: str, values: list[Any], start: str, horizon: int) -> np.ndarray:
    return np.array(_v1_answer(client, model, values, start, horizon)["forecast"], np.float32)


def test_documented_example_with_quantiles_answers_the_v1_quantiles(client: TestClient) -> None:
    quantiles = [0.1, 0.5, 0.9]
    body = documented_example(quantiles)
    r = client.post(URL, json=body)
    assert r.status_code == 200, r.text
    for item, output in zip(body["inputs"], r.json()["outputs"], strict=True):
        (content,) = output["content"]
        assert list(content["quantiles"]) == ["0.1", "0.5", "0.9"]  # KServe's keys: str(q), in request order
        v1 = _v1_answer(client, "univariate", item["series"], item["start_timestamp"], 3, quantiles=quantiles)
        for q, key in zip(quantiles, ("q-10", "q-50", "q-90"), strict=True):
            got = content["quantiles"][str(q)]
            assert len(got) == len(content["mean_forecast"]) == 3 and all(isinstance(v, float) for v in got)
            np.testing.assert_array_equal(np.array(got, np.float32), np.array(v1[key], np.float32)[:, 0])
        assert content["quantiles"]["0.5"] == content["mean_forecast"]
        assert np.less(content["quantiles"]["0.1"], content["quantiles"]["0.9"]).all()


def test_multivariate_quantiles_are_shaped_like_the_mean_and_use_the_first_steps_widths(
    client: TestClient,
) -> None:
    series = _series(L + 3, 3, seed=9)
    start = "2024-05-01T00:00:00Z"
    item = {"type": "multivariate_time_series", "name": "m", "series": series, "frequency": "H"}
    quantiles = [0.995, 0.025, 0.25]
    for horizon in (2, H):
        body = {
            "model": "banded",
            "inputs": [{**item, "start_timestamp": start}],
            "options": {"horizon": horizon, "quantiles": quantiles},
        }
        r = client.post(URL, json=body)
        assert r.status_code == 200, r.text
        (content,) = r.json()["outputs"][0]["content"]
        v1 = _v1_answer(client, "banded", series, start, horizon, quantiles=quantiles)
        assert list(content["quantiles"]) == ["0.995", "0.025", "0.25"]
        for q in quantiles:
            got = np.array(content["quantiles"][str(q)], np.float32)
            assert got.shape == np.array(content["mean_forecast"]).shape == (horizon, 3)
            np.testing.assert_array_equal(got, np.array(v1[f"q-{100 * q:g}"], np.float32))


def test_quantiles_of_a_model_without_intervals_are_a_400_with_a_code(client: TestClient) -> None:
    body = {
        "model": "hourly",
        "inputs": [
            {
                "type": "multivariate_time_series",
                "name": "grid",
                "series": _series(L, 3, seed=3),
                "frequency": "H",
                "start_timestamp": "2024-01-01T00:00:00Z",
            }
        ],
        "options": {"horizon": 2, "quantiles": [0.1, 0.9]},
    }
    r = client.post(URL, json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"code", "message", "param", "type"}
    assert error["code"] == "no_calibrated_intervals" and error["param"] == "options.quantiles"
    assert error["type"] == "BadRequestError" and "has no prediction intervals" in error["message"]
    body["options"]["quantiles"] = []  # asks for nothing, as in KServe's server
    r = client.post(URL, json=body)
    assert r.status_code == 200 and "quantiles" not in r.json()["outputs"][0]["content"][0]


@pytest.mark.parametrize(
    ("quantiles", "code", "param"),
    [
        ([0.1, 0.3], "interval_not_calibrated", "options.quantiles[1]"),
        ([0.9, 0.9], "invalid_input", "options.quantiles[1]"),
        ([0.0], "invalid_input", "options.quantiles[0]"),
        ([0.5, 1.2], "invalid_input", "options.quantiles[1]"),
        ([0.5] * 40, "invalid_input", "options.quantiles"),
    ],
    ids=["uncalibrated", "repeated", "zero", "above-one", "too-many"],
)
def test_a_bad_quantile_is_a_400_naming_the_param(
    client: TestClient, quantiles: list[float], code: str, param: str
) -> None:
    r = client.post(URL, json=documented_example(quantiles))
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (code, param, "BadRequestError"), error
    if code == "interval_not_calibrated":
        assert "quantile 0.3 is not calibrated" in error["message"]
        assert "available: " + ", ".join(f"{q:g}" for q in QUANTILES) in error["message"]


def test_documented_example_without_quantiles_answers_in_kserves_shape(client: TestClient) -> None:
    body = documented_example(None)
    r = client.post(URL, json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert set(answer) == {"id", "created_at", "status", "error", "model", "outputs", "usage"}
    assert answer["status"] == "completed" and answer["model"] == "univariate" and answer["error"] is None
    assert len(answer["outputs"]) == 2
    for item, output in zip(body["inputs"], answer["outputs"], strict=True):
        assert output["type"] == "time_series_forecast" and output["status"] == "completed"
        (content,) = output["content"]
        assert (content["type"], content["name"], content["frequency"]) == (
            item["type"],
            item["name"],
            item["frequency"],
        )
        first = datetime(2025, 6, 5, 13, 10, tzinfo=UTC) + timedelta(hours=len(item["series"]))
        assert content["start_timestamp"] == first.isoformat().replace("+00:00", "Z")
        expected = _v1(client, "univariate", item["series"], item["start_timestamp"], 3)[:, 0]
        np.testing.assert_array_equal(np.array(content["mean_forecast"], np.float32), expected)


def test_multivariate_series_on_a_multivariate_cycle_model(client: TestClient) -> None:
    series = _series(L + 5, 3, seed=3)
    start = "2024-02-29T22:00:00+00:00"
    body = {
        "model": "hourly",
        "inputs": [
            {
                "type": "multivariate_time_series",
                "name": "grid",
                "series": series,
                "frequency": "H",
                "start_timestamp": start,
            }
        ],
        "options": {"horizon": H},
    }
    r = client.post(URL, json=body)
    assert r.status_code == 200, r.text
    (content,) = r.json()["outputs"][0]["content"]
    assert (
        content["type"] == "multivariate_time_series" and content["start_timestamp"] == "2024-03-01T11:00:00Z"
    )
    got = np.array(content["mean_forecast"], np.float32)
    assert got.shape == (H, 3)
    np.testing.assert_array_equal(got, _v1(client, "hourly", series, start, H))


@pytest.mark.parametrize(
    ("change", "status", "code", "param"),
    [
        (lambda b: b.update(model="nope"), 404, "model_not_found", "model"),  # KServe's field
        (lambda b: b["options"].update(horizon=H + 1), 400, "invalid_input", "options.horizon"),
        (lambda b: b["inputs"][1].update(frequency="D"), 400, "invalid_input", "inputs[1].frequency"),
        (lambda b: b["inputs"][0].update(series=[1.0, 2.0]), 400, "invalid_input", "inputs[0].series"),
        (lambda b: b["inputs"][0].pop("start_timestamp"), 400, "invalid_input", "inputs[0].start_timestamp"),
        (lambda b: b["inputs"][0].update(type="weird"), 400, "invalid_input", "inputs[0].type"),
        (lambda b: b.update(model="hourly"), 400, "invalid_input", "inputs[0].type"),
    ],
    ids=["model", "horizon", "frequency", "too-short", "no-start", "bad-type", "univariate-on-3-channels"],
)
def test_every_error_has_kserves_shape_and_a_code(
    client: TestClient, change: Any, status: int, code: str, param: str
) -> None:
    body = documented_example(None)
    change(body)
    r = client.post(URL, json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert (error["code"], error["param"]) == (code, param), error
    assert error["message"] and error["type"]


def test_malformed_json_and_models_list(client: TestClient) -> None:
    r = client.post(URL, content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json"
    assert sorted(client.get("/v1/timeseries/models").json()) == ["banded", "hourly", "univariate"]


def test_the_models_own_frequency_string_is_accepted_beside_kserves_codes(client: TestClient) -> None:
    """`1h`, as the manifest and GET /v1/models write it, and `h`, pandas' alias of one hour (as
    `pd.infer_freq` gives it), answer exactly as `H`; another step, or a string that is neither, is a 400
    naming what is accepted."""
    body = documented_example(None)
    expected = [o["content"][0] for o in client.post(URL, json=body).json()["outputs"]]
    for code in ("1h", "h"):
        for item in body["inputs"]:
            item["frequency"] = code
        r = client.post(URL, json=body)
        assert r.status_code == 200, r.text
        got = [o["content"][0] for o in r.json()["outputs"]]
        assert [c["mean_forecast"] for c in got] == [c["mean_forecast"] for c in expected]
        assert [c["frequency"] for c in got] == [code, code]
    body["inputs"][0]["frequency"] = "min"
    error = client.post(URL, json=body).json()["error"]
    assert error["param"] == "inputs[0].frequency"
    assert "must be one of ['hour', 'H', '1h', 'h']" in error["message"]
    body["inputs"][0]["frequency"] = "1D"
    error = client.post(URL, json=body).json()["error"]
    assert error["param"] == "inputs[0].frequency"
    assert "must be one of ['hour', 'H', '1h', 'h']" in error["message"]
    body["inputs"][0]["frequency"] = "hourly"
    error = client.post(URL, json=body).json()["error"]
    assert error["param"] == "inputs[0].frequency"
    assert (
        "or a pandas alias of the model's step (its own frequency as GET /v1/models/<name> shows it"
        in (error["message"])
    )


@pytest.mark.parametrize(
    ("frequency", "calendar", "seconds", "ok"),
    [
        ("3MS", True, 3 * 2_629_746.0, ["Q", "quarter", "3MS", "QS", "QS-MAR", "QE-DEC", "3M"]),
        ("1MS", True, 2_629_746.0, ["M", "month", "MS", "1MS", "ME", "BMS"]),
        ("12MS", True, 12 * 2_629_746.0, ["Y", "year", "YS", "YS-JAN", "A-DEC", "12MS"]),
        ("7D", False, 604_800.0, ["W", "week", "W-SAT", "W-SUN", "7D", "168h"]),
        ("1h", False, 3_600.0, ["H", "hour", "h", "1h", "60min", "3600s"]),
    ],
)
def test_any_pandas_alias_of_the_models_step_is_accepted(
    frequency: str, calendar: bool, seconds: float, ok: list[str]
) -> None:
    """What `pd.infer_freq` gives a pandas user (`QS-MAR` for quarters from March, `W-SAT` for weeks to
    Saturday) names the model's step as KServe's code does, by the rule every path reads an alias by
    (rsa_core.frequency.parse_alias); another step is refused, naming the accepted codes."""
    from types import SimpleNamespace

    from app.artifacts.calendar import calendar_step
    from app.core.errors import InvalidInput
    from app.protocols.timeseries.codec import check_frequency
    from app.protocols.timeseries.schemas import TimeSeriesInput

    manifest = SimpleNamespace(
        name="m", frequency=frequency, frequency_seconds=seconds, calendar=calendar_step(frequency)
    )
    assert (manifest.calendar is not None) == calendar

    def item(code: str) -> TimeSeriesInput:
        return TimeSeriesInput(type="univariate_time_series", name="a", series=[1.0, 2.0], frequency=code)

    for code in ok:
        check_frequency(item(code), manifest, "inputs[0].frequency")  # type: ignore[arg-type]
    for code in {"MS", "QS-MAR", "YS", "W-SAT", "D", "h", "15min"} - set(ok):
        with pytest.raises(InvalidInput, match=r"must be one of \[.*\] \(or another pandas alias"):
            check_frequency(item(code), manifest, "inputs[0].frequency")  # type: ignore[arg-type]


def test_a_start_timestamp_that_is_not_iso_8601_says_so(client: TestClient) -> None:
    body = documented_example(None)
    body["inputs"][0]["start_timestamp"] = "26/01/2018"
    error = client.post(URL, json=body).json()["error"]
    assert error["param"] == "inputs[0].start_timestamp"
    assert "expected an ISO 8601 datetime such as 2018-01-26T16:00:00Z" in error["message"]
    assert "got '26/01/2018'" in error["message"]


def test_bodies_parsed_in_the_parse_process_answer_as_on_the_loop(
    client: TestClient, repository: Path
) -> None:
    """Issue 46: the parse process hands each rectangular series back as one array (millions of floats in
    lists unpickled on the service's side held the event loop for 100-200 ms on a 50 MB body); every
    answer and every error is the loop's, byte for byte."""
    bodies: list[dict[str, Any]] = [documented_example([0.1, 0.9])]
    for change in [
        lambda b: b.update(model="hourly"),  # univariate series on 3 channels
        lambda b: b["inputs"][0].update(series=[1.0, 2.0]),  # too short
        lambda b: b["inputs"][0].update(series=[[1.0], [2.0]] * L),  # rows on a univariate model
        lambda b: b["inputs"][0].update(series=[1.0, [2.0]] * L),  # numbers mixed with rows
    ]:
        body = documented_example(None)
        change(body)
        bodies.append(body)
    multivariate = {"type": "multivariate_time_series", "name": "m", "frequency": "H"}
    multivariate["start_timestamp"] = "2024-02-29T22:00:00+00:00"
    for series in [_series(L + 5, 3, seed=4), _series(L + 5, 2, seed=4), [[1.0, 2.0, 3.0], [1.0]] * L]:
        bodies.append(
            {"model": "hourly", "inputs": [{**multivariate, "series": series}], "options": {"horizon": H}}
        )
    with running_client(make_settings(repository, parse_process_min_bytes=1)) as offloaded:
        for body in bodies:
            on_loop, in_worker = client.post(URL, json=body), offloaded.post(URL, json=body)
            assert on_loop.status_code == in_worker.status_code, (on_loop.text, in_worker.text)
            if on_loop.status_code == 200:
                a, b = on_loop.json(), in_worker.json()
                assert a["outputs"][0]["content"] == b["outputs"][0]["content"]
            else:
                assert on_loop.json() == in_worker.json()
    assert sum(r.status_code == 200 for r in [client.post(URL, json=b) for b in bodies]) == 2
    parsed = parse_request(orjson.dumps(bodies[-3]))
    assert isinstance(parsed, TimeSeriesForecastRequest)
    assert isinstance(parsed.inputs[0].series, np.ndarray) and parsed.inputs[0].series.shape == (L + 5, 3)
    ragged = parse_request(orjson.dumps(bodies[-1]))
    assert isinstance(ragged, TimeSeriesForecastRequest) and isinstance(ragged.inputs[0].series, list)
