"""Client input that once answered 500 on the `/v1` routes, now a 422 naming the field and the limit
(issue 46, items 1 and 2):

- a `start` whose instant leaves years 1..9999 once moved to the model's zone (or to UTC): the move
  overflowed (`astimezone`, OverflowError) on forecast, cross_validation, detect_anomalies and
  fit_forecast; with a `[Zone]` suffix it overflowed while parsing, on any model;
- OIP v2's `start` (Unix seconds) on a zoned model with a cycle, read on the model's clock;
- fit_forecast of a series whose `values` is an object without columns (`{}`): StopIteration raised
  inside the coroutine (`RuntimeError: coroutine raised StopIteration`).

One in-process app serves toy models (UTC "toy", zoned "tokyo" with intervals, tests/app/fakes.py) and the
monthly global read-out of tests/utils/panel.py ("stores", and "stores-tokyo": the same in Asia/Tokyo)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client
from tests.app.fakes import ToySpec, intervals_block, write_version
from tests.utils.panel import NAME, publish, store

L, H, C = 8, 4, 3
ZONE = "Asia/Tokyo"
LEVELS = [80.0, 95.0]
LIMIT = "0001-01-01..9999-12-31"


def _intervals() -> dict[str, Any]:
    widths = np.sort(np.random.default_rng(3).uniform(0.1, 2.0, (len(LEVELS), H, C)), axis=0)
    return intervals_block(LEVELS, widths)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder = tmp_path_factory.mktemp("bad_starts")
    repo, _ = publish(folder)  # "stores", a refittable global read-out, monthly, UTC
    shutil.copytree(repo / NAME / "1", repo / f"{NAME}-tokyo" / "1")
    path = repo / f"{NAME}-tokyo" / "1" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(name=f"{NAME}-tokyo", timezone=ZONE)
    path.write_text(json.dumps(manifest))
    write_version(repo, ToySpec(name="toy"))
    write_version(repo, ToySpec(name="tokyo-hourly", cycle_period=24, manifest_overrides={"timezone": ZONE}))
    write_version(
        repo, ToySpec(name="tokyo", manifest_overrides={"timezone": ZONE, "intervals": _intervals()})
    )
    with running_client(make_settings(repo)) as c:
        yield c


def rows(n: int) -> list[list[float]]:
    return np.random.default_rng(n).normal(10, 3, (n, C)).round(3).tolist()


def toy_body(route: str, start: str) -> dict[str, Any]:
    series = {"values": rows(L + 6), "start": start}
    if route == "fit_forecast":
        return {"series": [series]}
    return {"series": [{"values": rows(L), "start": start}] if route == "forecast" else [series]}


def stores_body(start: str) -> dict[str, Any]:
    return {"series": [{"id": "a", "start": start, "values": store(1, 60).tolist()}]}


def assert_names_the_start(r: Any) -> None:
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "series[0].start", error
    assert error["limit"] == LIMIT, error
    assert "9999" in error["message"], error


ROUTES = ("forecast", "cross_validation", "detect_anomalies")
# Instants outside years 1..9999 in the model's zone (Asia/Tokyo, UTC+9) or in UTC.
OUT_OF_RANGE = (
    "9999-12-31T23:00:00-05:00",  # 10000-01-01 04:00 UTC
    "9999-12-31T20:00:00+00:00",  # 10000-01-01 05:00 in Tokyo
    "0001-01-01T00:00:00+05:00",  # year 0 in UTC
    "0001-01-01T03:00:00",  # naive: Tokyo's wall clock, year 0 in UTC
)


@pytest.mark.parametrize("start", OUT_OF_RANGE)
@pytest.mark.parametrize("route", ROUTES)
def test_a_start_outside_the_years_in_the_models_zone_is_named(
    client: TestClient, route: str, start: str
) -> None:
    assert_names_the_start(client.post(f"/v1/models/tokyo/{route}", json=toy_body(route, start)))


@pytest.mark.parametrize("start", OUT_OF_RANGE)
def test_a_refit_start_outside_the_years_in_the_models_zone_is_named(client: TestClient, start: str) -> None:
    ok = client.post(f"/v1/models/{NAME}-tokyo/fit_forecast", json=stores_body("2015-01-01"))
    assert ok.status_code == 200, ok.text  # the zoned copy is refittable: the start is what is refused
    assert_names_the_start(client.post(f"/v1/models/{NAME}-tokyo/fit_forecast", json=stores_body(start)))


@pytest.mark.parametrize("route", (*ROUTES, "fit_forecast", "attention"))
@pytest.mark.parametrize("model", ["toy", "tokyo", "absent"])
def test_a_zone_suffix_outside_the_years_is_refused_while_parsing(
    client: TestClient, route: str, model: str
) -> None:
    """The `[Zone]` suffix moves the instant into that zone while the body is parsed: any model, even one
    that does not exist, answers 422 for it."""
    start = "9999-12-31T23:00:00-05:00[Asia/Tokyo]"
    if route == "attention":
        r = client.post(f"/v1/models/{model}/attention", json={"series": {"values": rows(L), "start": start}})
        assert r.status_code == 422, r.text
        assert (r.json()["error"]["field"], r.json()["error"]["limit"]) == ("series.start", LIMIT)
        return
    assert_names_the_start(client.post(f"/v1/models/{model}/{route}", json=toy_body(route, start)))


def test_in_range_starts_near_the_ends_are_served(client: TestClient) -> None:
    """The limit is the representable years, no narrower: the first hours that fit are served (Tokyo was
    UTC+9:18:59 in year 1, its local mean time) and the last ones whose forecast fits; a later one is refused
    because its forecast runs past year 9999, a message of its own on the same field."""
    for start in ("0001-01-01T09:19:00", "0001-01-01T00:00:00+00:00", "9999-12-31T10:00:00+09:00"):
        r = client.post("/v1/models/tokyo/forecast", json=toy_body("forecast", start))
        assert r.status_code == 200, r.text
    # 8 values and 4 steps after 14:00: the last step would be 10000-01-01T01:00 in Tokyo
    r = client.post("/v1/models/tokyo/forecast", json=toy_body("forecast", "9999-12-31T14:00:00+09:00"))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "series[0].start" and "the forecast would run past" in error["message"], error


@pytest.mark.parametrize(
    ("values", "field"),
    [({}, "series[0].values"), ({"y": []}, "series[0].values"), ([], "series[0].values")],
)
def test_a_refit_series_without_columns_or_values_is_named(
    client: TestClient, values: Any, field: str
) -> None:
    r = client.post(f"/v1/models/{NAME}/fit_forecast", json={"series": [{"values": values}]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.text


@pytest.mark.parametrize("start", [2**62, -(2**62), 253402300799, -62135596800 - 3600])
def test_oip_v2_unix_starts_outside_the_years_in_the_models_zone_are_named(
    client: TestClient, start: int
) -> None:
    """OIP v2's `start` (Unix seconds of each window's first row) is read on a zoned model's clock for its
    cycle: an instant whose local time leaves years 1..9999 is refused naming its element, as /v1's is."""
    window = {"name": "window", "datatype": "FP32", "shape": [2, L, C], "data": [0.5] * (2 * L * C)}
    starts = {"name": "start", "datatype": "INT64", "shape": [2], "data": [0, start]}
    r = client.post("/v2/models/tokyo-hourly/infer", json={"inputs": [window, starts]})
    assert r.status_code == 400, r.text
    assert "start[1]" in r.text and LIMIT in r.text and "9999" in r.text, r.text
