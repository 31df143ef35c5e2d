"""Every malformed forecast request gets a 4xx JSON error naming the field (and the limit), never a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client

L, C = 8, 3
URL = "/v1/models/toy/forecast"


def rows(n: int = L) -> list[list[float]]:
    return np.arange(n * C, dtype=float).reshape(n, C).tolist()


def columns(n: int = L) -> dict[str, list[float]]:
    return {"HUFL": [1.0] * n, "MUFL": [2.0] * n, "OT": [3.0] * n}


def with_value(row: int, col: int, value: Any) -> list[list[Any]]:
    values: list[list[Any]] = rows()
    values[row][col] = value
    return values


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) >= {"code", "message", "field", "limit"}
    return error


CASES: list[tuple[str, dict[str, Any], str, Any, str]] = [
    # (case id, body, field, limit, a word the message must contain)
    (
        "string in values",
        {"series": [{"values": with_value(2, 1, "abc")}]},
        "series[0].values[2][1]",
        None,
        "number",
    ),
    (
        "numeric string in values",
        {"series": [{"values": with_value(0, 0, "1.5")}]},
        "series[0].values[0][0]",
        None,
        "number",
    ),
    (
        "bool in values",
        {"series": [{"values": with_value(1, 2, True)}]},
        "series[0].values[1][2]",
        None,
        "number",
    ),
    ("values not a list", {"series": [{"values": 5}]}, "series[0].values", None, "array"),
    ("values a string", {"series": [{"values": "1,2,3"}]}, "series[0].values", None, "array"),
    # A flat list is one channel's values: refused by a model of several (3), saying what to send.
    ("values flat list", {"series": [{"values": [1.0, 2.0, 3.0]}]}, "series[0].values", 3, "one channel"),
    ("missing values", {"series": [{"id": "a"}]}, "series[0].values", None, "required"),
    (
        "ragged row",
        {"series": [{"values": [*rows()[:3], [1.0, 2.0], *rows()[4:]]}]},
        "series[0].values[3]",
        C,
        "3 channels",
    ),
    (
        "wrong channel count",
        {"series": [{"values": [[1.0, 2.0, 3.0, 4.0]] * L}]},
        "series[0].values[0]",
        C,
        "channels",
    ),
    (
        "missing named channel",
        {"series": [{"values": {"HUFL": [1.0] * L, "OT": [1.0] * L}}]},
        "series[0].values.MUFL",
        ["HUFL", "MUFL", "OT"],
        "missing",
    ),
    (
        "unknown named channel",
        {"series": [{"values": {**columns(), "XX": [1.0] * L}}]},
        "series[0].values.XX",
        ["HUFL", "MUFL", "OT"],
        "unknown",
    ),
    (
        "unequal columns",
        {"series": [{"values": {**columns(), "OT": [1.0] * (L + 1)}}]},
        "series[0].values.OT",
        L,
        "same length",
    ),
    (
        "string in a column",
        {"series": [{"values": {**columns(), "OT": ["a"] * L}}]},
        "series[0].values.OT[0]",
        None,
        "number",
    ),
    ("too short", {"series": [{"values": rows(L - 1)}]}, "series[0].values", L, f"at least {L}"),
    ("too short columns", {"series": [{"values": columns(2)}]}, "series[0].values", L, f"at least {L}"),
    (
        "second series too short",
        {"series": [{"values": rows()}, {"values": rows(3)}]},
        "series[1].values",
        L,
        "input length",
    ),
    ("horizon 0", {"series": [{"values": rows()}], "horizon": 0}, "horizon", 1, "greater than or equal"),
    (
        "horizon above model",
        {"series": [{"values": rows()}], "horizon": 5},
        "horizon",
        4,
        "is above model toy's horizon 4",
    ),
    ("horizon string", {"series": [{"values": rows()}], "horizon": "x"}, "horizon", None, "integer"),
    ("empty series", {"series": []}, "series", 1, "at least 1"),
    ("series not a list", {"series": {"values": rows()}}, "series", None, "array"),
    ("missing series", {"horizon": 2}, "series", None, "required"),
    ("unknown field", {"series": [{"values": rows()}], "horizn": 2}, "horizn", None, "not permitted"),
    (
        "bad start",
        {"series": [{"values": rows(), "start": "yesterday"}]},
        "series[0].start",
        None,
        "datetime",
    ),
    ("id not a string", {"series": [{"values": rows(), "id": {"a": 1}}]}, "series[0].id", None, "string"),
    (
        "float32 overflow",
        {"series": [{"values": with_value(4, 2, 1e39)}]},
        "series[0].values[4][2]",
        1e18,  # the model's bound for L = 8: sqrt(float32 max / 8) / 2, rounded down to a power of ten
        "float32",
    ),
    (
        "finite in float32, too large for the model's arithmetic",
        {"series": [{"values": with_value(7, 0, -3e19)}]},
        "series[0].values[7][0]",
        1e18,
        "|x| <= 1e+18",
    ),
]


@pytest.mark.parametrize(
    ("body", "field", "limit", "word"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_invalid_input_is_422_naming_field_and_limit(
    client: TestClient, body: dict[str, Any], field: str, limit: Any, word: str
) -> None:
    error = error_of(client.post(URL, json=body), 422)
    assert error["code"] == "invalid_input"
    assert error["field"] == field
    assert error["limit"] == limit
    assert word in error["message"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_non_finite_numbers_are_422(client: TestClient, literal: str) -> None:
    values = rows()
    text = "[" + ",".join("[" + ",".join(str(v) for v in row) + "]" for row in values) + "]"
    text = text.replace("[3.0,", f"[{literal},", 1)  # row 1, channel 0
    raw = '{"series": [{"values": ' + text + "}]}"
    error = error_of(client.post(URL, content=raw, headers={"content-type": "application/json"}), 422)
    assert error["field"] == "series[0].values[1][0]"
    assert "finite" in error["message"]


def test_non_finite_in_named_column(client: TestClient) -> None:
    raw = (
        '{"series": [{"values": {"HUFL": [1,1,1,1,1,1,1,1], "MUFL": [1,1,1,1,NaN,1,1,1], '
        '"OT": [1,1,1,1,1,1,1,1]}}]}'
    )
    error = error_of(client.post(URL, content=raw, headers={"content-type": "application/json"}), 422)
    assert error["field"] == "series[0].values.MUFL[4]"


def test_every_validation_error_is_listed(client: TestClient) -> None:
    error = error_of(client.post(URL, json={"series": [{"values": [[1.0, "a", "b"]]}], "horizon": 0}), 422)
    fields = {d["field"] for d in error["details"]}
    assert fields == {"series[0].values[0][1]", "series[0].values[0][2]", "horizon"}
    assert "more error" in error["message"]


@pytest.mark.parametrize(
    ("name", "ours"),
    [("h", "`horizon` (steps)"), ("prediction_length", "`horizon`"), ("quantile_levels", "`quantiles`")],
)
def test_another_apis_name_for_a_field_says_ours(client: TestClient, name: str, ours: str) -> None:
    """statsforecast's and TimeGPT's `h`, GluonTS's `prediction_length`: refused as unknown, naming ours."""
    error = error_of(client.post(URL, json={"series": [{"values": rows()}], name: 4}), 422)
    assert error["field"] == name and f"this API calls it {ours}" in error["message"]
    plain = error_of(client.post(URL, json={"series": [{"values": rows()}], "nonsense": 4}), 422)
    assert "this API calls it" not in plain["message"]


def test_too_many_series(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository, max_series_per_request=4)) as client:
        ok = client.post(URL, json={"series": [{"values": rows()}] * 4})
        assert ok.status_code == 200, ok.text
        error = error_of(client.post(URL, json={"series": [{"values": rows()}] * 5}), 422)
        assert (error["field"], error["limit"]) == ("series", 4)
        assert "at most 4" in error["message"]


def test_history_longer_than_the_cap(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository, max_history_length=20, max_body_bytes=4000)) as client:
        error = error_of(client.post(URL, json={"series": [{"values": rows(21)}]}), 422)
        assert (error["field"], error["limit"]) == ("series[0].values", 20)
        too_big = {"series": [{"values": rows(20)}] * 20}
        error = error_of(client.post(URL, json=too_big), 413)
        assert (error["code"], error["limit"]) == ("payload_too_large", 4000)

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
            yield json.dumps(too_big).encode()

        streamed = client.post(URL, content=chunks(), headers={"content-type": "application/json"})
        error = error_of(streamed, 413)
        assert (error["code"], error["field"], error["limit"]) == ("payload_too_large", "body", 4000)


def test_a_body_over_the_size_limit_names_the_ways_out(toy_repository: Path) -> None:
    """413, declared or streamed: fewer series, OIP v2 binary tensors, or RSA_MAX_BODY_BYTES."""
    too_big = {"series": [{"values": rows()}] * 60}
    with running_client(make_settings(toy_repository, max_body_bytes=4000)) as client:

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
            yield json.dumps(too_big).encode()

        declared = error_of(client.post(URL, json=too_big), 413)
        streamed = error_of(
            client.post(URL, content=chunks(), headers={"content-type": "application/json"}), 413
        )
    assert declared["message"].startswith("request body of ") and streamed["message"].startswith(
        "request body is"
    )
    for error in (declared, streamed):
        for way_out in ("send fewer series per request", "binary tensors", "raise RSA_MAX_BODY_BYTES"):
            assert way_out in error["message"], error


def test_a_start_that_is_not_iso_8601_says_so_with_an_example(client: TestClient) -> None:
    error = error_of(client.post(URL, json={"series": [{"values": rows(), "start": "26/01/2018"}]}), 422)
    assert error["field"] == "series[0].start"
    assert error["message"].startswith(
        "series[0].start: expected an ISO 8601 datetime such as 2018-01-26T16:00:00Z (or a date, "
        "2018-01-26, or a time ending in a zone name, 2023-10-29T02:30:00[Europe/Berlin]; without an offset "
        "or zone it is in the model's zone, UTC for most), got '26/01/2018'"
    )


@pytest.mark.parametrize("raw", ['{"series": [', "not json", '{"series": [{"values": [[1,2,3],]}]}'])
def test_malformed_json_is_400(client: TestClient, raw: str) -> None:
    error = error_of(client.post(URL, content=raw, headers={"content-type": "application/json"}), 400)
    assert error["code"] == "malformed_json"
    assert error["field"] == "body"


def test_empty_body_and_wrong_content_type(client: TestClient) -> None:
    error = error_of(client.post(URL), 422)
    assert error["field"] == "body"
    error = error_of(client.post(URL, content=b"{}", headers={"content-type": "text/plain"}), 415)
    assert (error["code"], error["field"]) == ("unsupported_media_type", "header Content-Type")
    ok = client.post(
        URL, content=b'{"series": [{"values": [[1, 2, 3]]}]}', headers={"content-type": "text/plain"}
    )
    assert ok.status_code == 415  # even a valid body: the declared type is what counts


def test_unknown_model_is_404(client: TestClient) -> None:
    error = error_of(client.post("/v1/models/nope/forecast", json={"series": [{"values": rows()}]}), 404)
    assert error["code"] == "model_not_found"
    assert error["field"] == "name"
    assert "toy" in error["message"]
    # A model exported into the repository of a running service that does not poll: the answer says how
    # to get it served (issue 35, item 7).
    assert "RSA_MODEL_CONTROL=poll" in error["message"]
    assert "POST /v2/repository/models/nope/load" in error["message"]


def test_unknown_version_is_404(client: TestClient) -> None:
    r = client.post("/v1/models/toy/versions/9/forecast", json={"series": [{"values": rows()}]})
    error = error_of(r, 404)
    assert error["code"] == "version_not_found"
    assert error["field"] == "version"
    assert "1, 2" in error["message"]


@pytest.mark.parametrize(("version", "limit"), [("0", 1), ("abc", None)])
def test_bad_version_path_is_422(client: TestClient, version: str, limit: Any) -> None:
    r = client.post(f"/v1/models/toy/versions/{version}/forecast", json={"series": [{"values": rows()}]})
    error = error_of(r, 422)
    assert (error["field"], error["limit"]) == ("version", limit)


def test_unknown_route_and_method_use_the_error_shape(client: TestClient) -> None:
    assert error_of(client.get("/v9/nothing"), 404)["code"] == "not_found"
    assert error_of(client.get(URL), 405)["code"] == "method_not_allowed"


def test_too_many_series_is_refused_before_the_values_are_validated(toy_repository: Path) -> None:
    from tests.app.conftest import make_settings, running_client

    with running_client(make_settings(toy_repository, max_series_per_request=3)) as client:
        # the fourth series is malformed: the count is what is reported, so it was checked first
        body = {"series": [{"values": rows()}] * 3 + [{"values": "not numbers"}]}
        error = error_of(client.post(URL, json=body), 422)
        assert (error["field"], error["limit"]) == ("series", 3)
        assert "at most 3" in error["message"]
        assert client.post(URL, json={"series": [{"values": rows()}] * 3}).status_code == 200
