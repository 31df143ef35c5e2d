"""The documented requests of every /v1 route that takes series (forecast, fit on request, backtest with
and without refit, anomalies), sent to the shipped models with one field broken at a time: deleted, null,
of the wrong type, out of range, non-finite, empty, or the series too short, null or flat. Never a 5xx,
and every 4xx names the field it refuses (issue 45: no new 500; a refusal names the field)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[3]


def _example(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "docs" / "examples" / f"{name}.json").read_text())


SHOPS = _example("fit_request")["series"][:2]  # two of the README's monthly shops
BODIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "etth1 forecast": ("etth1-rsa", "forecast", _example("forecast_request")),
    "etth1 backtest": ("etth1-rsa", "cross_validation", _example("backtest_request")),
    "etth1 anomalies": ("etth1-rsa", "detect_anomalies", _example("anomaly_request")),
    "monthly fit": ("pretrained-monthly", "fit_forecast", _example("fit_request")),
    "monthly backtest, refit": (
        "pretrained-monthly",
        "cross_validation",
        {"series": SHOPS, "horizon": 12, "n_windows": 3, "step_size": 12, "level": [80], "refit": True},
    ),
    "monthly anomalies": (
        "pretrained-monthly",
        "detect_anomalies",
        {"series": SHOPS, "level": 99, "last": 12},
    ),
}
BROKEN: list[Any] = [None, "x", -1, 0, 2.5, 10**12, 1e308, [], {}, True, [None], [150]]


def broken(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what was broken, the body) for each field of the body and of its first series, each value of
    BROKEN and the field deleted, then the first series' values too short, all null and flat."""

    def series_of(b: dict[str, Any]) -> dict[str, Any]:
        return b["series"][0] if isinstance(b["series"], list) else b["series"]

    for key in [k for k in body if k != "series"]:
        for value in [*BROKEN, "deleted"]:
            b = copy.deepcopy(body)
            if value == "deleted":
                del b[key]
            else:
                b[key] = value
            yield f"{key}={value!r}", b
    for key in list(series_of(body)):
        for value in [*BROKEN, "deleted"]:
            b = copy.deepcopy(body)
            if value == "deleted":
                del series_of(b)[key]
            else:
                series_of(b)[key] = value
            yield f"series.{key}={value!r}", b
    values = series_of(body)["values"]

    def each(f: Any) -> Any:  # a univariate series' list or a multivariate one's channels
        return {k: f(v) for k, v in values.items()} if isinstance(values, dict) else f(values)

    for name, f in (("3 values", lambda v: v[:3]), ("all null", lambda v: [None] * len(v))):
        b = copy.deepcopy(body)
        series_of(b)["values"] = each(f)
        yield f"values {name}", b


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with running_client(make_settings(ROOT / "model_repository")) as c:
        yield c


@pytest.mark.parametrize("case", list(BODIES))
def test_a_broken_field_is_a_4xx_naming_it_never_a_5xx(client: TestClient, case: str) -> None:
    model, route, body = BODIES[case]
    assert client.post(f"/v1/models/{model}/{route}", json=body).status_code == 200
    failures = []
    for what, b in broken(body):
        r = client.post(f"/v1/models/{model}/{route}", json=b)
        named = r.status_code < 400 or bool(r.json().get("error", {}).get("field"))
        if r.status_code >= 500 or not named:
            failures.append(f"{what}: {r.status_code} {r.text[:200]}")
    assert not failures, "\n".join(failures)
