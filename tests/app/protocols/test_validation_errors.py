"""app/protocols/validation_errors.py: a refusal names the place the client wrote, not pydantic's union
members, on /v1, KServe's time-series API and OIP v2 alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.protocols.oip_v2.schemas import InferenceRequest
from app.protocols.timeseries.schemas import TimeSeriesForecastRequest
from app.protocols.validation_errors import first_problem, union_free
from tests.app.conftest import make_settings, running_client

REPOSITORY = Path("model_repository")


def errors_of(model: type, body: dict) -> list:
    with pytest.raises(ValidationError) as exc:
        model.model_validate(body)
    return exc.value.errors(include_url=False)


def test_a_scalar_parameter_given_a_list_is_one_problem_naming_every_member() -> None:
    body = {"inputs": [{"name": "w", "shape": [1], "datatype": "FP32"}], "parameters": {"level": [80]}}
    problem = first_problem(errors_of(InferenceRequest, body))
    assert problem.loc == ("parameters", "level") and problem.more == 0
    assert problem.message == (
        "Input should be a valid boolean, a valid integer, a valid number or a valid string"
    )


def test_the_other_places_counted_are_those_of_the_first_errors_reading() -> None:
    """Two nulls in a KServe series: read as numbers, two places are wrong; the list-of-rows member's
    "not a list" for every number is not counted."""
    series = [1.0, None, 2.0, None, 3.0]
    body = {
        "model": "m",
        "inputs": [{"type": "univariate_time_series", "name": "a", "series": series, "frequency": "M"}],
        "options": {"horizon": 1},
    }
    problem = first_problem(errors_of(TimeSeriesForecastRequest, body))
    assert problem.loc == ("inputs", 0, "series", 1) and problem.more == 1
    assert problem.message == "Input should be a valid number or a valid list"


def test_union_free_keeps_field_names_and_positions() -> None:
    assert union_free(("series", 0, "values", "flat", 3), ("flat", "rows")) == (
        ("series", 0, "values", 3),
        ("flat",),
    )
    assert union_free(("inputs", 0, "series", "list[list[float]]", 2)) == (
        ("inputs", 0, "series", 2),
        ("list[list[float]]",),
    )
    assert union_free(("options", "horizon")) == (("options", "horizon"), ())
    assert first_problem([]).message == "invalid request"


def test_every_protocol_names_the_place_the_client_wrote() -> None:
    settings = make_settings(REPOSITORY, models=["pretrained-monthly"])
    values = [100.0 + i for i in range(60)]
    with running_client(settings) as c:
        v1 = c.post(
            "/v1/models/pretrained-monthly/forecast",
            json={"series": [{"values": [*values[:5], "x", *values[6:]]}]},
        ).json()["error"]
        assert v1["field"] == "series[0].values[5]" and v1["message"].startswith("series[0].values[5]: ")
        assert "more error" not in v1["message"]
        series = [*values[:3], None, *values[4:]]
        item = {"type": "univariate_time_series", "name": "a", "series": series, "frequency": "MS"}
        ts = c.post(
            "/v1/timeseries/forecast",
            json={"model": "pretrained-monthly", "inputs": [item], "options": {"horizon": 3}},
        ).json()["error"]
        assert ts["param"] == "inputs[0].series[3]"
        assert ts["message"] == (
            "inputs[0].series[3]: Input should be a valid number or a valid array: a missing value (null); "
            "KServe's time series are numbers only, POST /v1/models/<name>/forecast takes null for a "
            "missing value"
        )
        item["series"] = [*values[:3], "x", *values[4:]]  # not a null: no word of missing values
        ts = c.post(
            "/v1/timeseries/forecast",
            json={"model": "pretrained-monthly", "inputs": [item], "options": {"horizon": 3}},
        ).json()["error"]
        assert ts["param"] == "inputs[0].series[3]" and "null" not in ts["message"]
        window = {"name": "window", "shape": [1, 120, 1], "datatype": "FP32", "data": [1.0] * 120}
        body = {"inputs": [window], "parameters": {"level": [80]}}
        v2 = c.post(
            "/v2/models/pretrained-monthly/infer",
            content=json.dumps(body),
            headers={"content-type": "application/json"},
        )
        assert v2.status_code == 400
        assert v2.json()["error"].startswith("parameters.level: Input should be a valid boolean, a valid")


def test_a_null_in_a_kserve_series_is_named_as_one_when_the_parse_process_reads_the_body() -> None:
    """A body parsed off the loop (the parse process: its errors travel without the values refused)
    keeps the one fact the answer needs, that the value was a null."""
    settings = make_settings(REPOSITORY, models=["pretrained-monthly"], parse_process_min_bytes=1)
    series: list[float | None] = [100.0 + i for i in range(60)]
    series[7] = None
    item = {"type": "univariate_time_series", "name": "a", "series": series, "frequency": "MS"}
    with running_client(settings) as c:
        r = c.post(
            "/v1/timeseries/forecast",
            json={"model": "pretrained-monthly", "inputs": [item], "options": {"horizon": 3}},
        )
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "inputs[0].series[7]" and "a missing value (null)" in error["message"], error
