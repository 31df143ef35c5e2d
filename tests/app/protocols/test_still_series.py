"""A series without change forecasts itself from every shipped global model, with intervals of no width,
through /v1: zeros (a product that has not sold) forecast zeros (the read-out's un-scaling is 0 for an
all-zero window, app/artifacts/readout/windows.py `output_scales`), a constant its value and a cycle
repeated that cycle (`hold_still`: the read-out forecasts a still window as its last cycle), and the local
half forecasts each the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with running_client(make_settings(ROOT / "model_repository")) as c:
        yield c


@pytest.mark.parametrize(
    ("model", "values"),
    [
        ("pretrained-monthly", 120),
        ("pretrained-quarterly", 40),
        ("pretrained-yearly", 20),
        ("pretrained-hourly", 200),
    ],
)
def test_an_all_zero_series_forecasts_zeros(client: TestClient, model: str, values: int) -> None:
    body = {"series": [{"id": "new", "values": [0.0] * values}], "level": [80]}
    r = client.post(f"/v1/models/{model}/forecast", json=body)
    assert r.status_code == 200, r.text
    (answer,) = r.json()["forecasts"]
    for key in ("forecast", "lo-80", "hi-80"):
        assert all(abs(step[0]) < 1e-6 for step in answer[key]), (key, answer[key])


MODELS = [("pretrained-monthly", 12, 120), ("pretrained-quarterly", 4, 40), ("pretrained-yearly", 1, 20)]
MODELS += [("pretrained-hourly", 24, 200)]
# Each model's shortest history (its min_history): the local members read it too.
SHORTEST = [("pretrained-monthly", 12, 24), ("pretrained-quarterly", 4, 8), ("pretrained-yearly", 1, 2)]
SHORTEST += [("pretrained-hourly", 24, 48)]


@pytest.mark.parametrize(("model", "period", "values"), MODELS + SHORTEST)
def test_a_constant_or_a_repeated_cycle_forecasts_itself(
    client: TestClient, model: str, period: int, values: int
) -> None:
    """Before hold_still, 3000 constant was forecast 3008-3039 by pretrained-quarterly with 80% intervals
    of no width around it, excluding 3000. Before the local half held a still window too (LocalSpec.feed),
    24 months of a cycle came back as 96.2, 97.6, 98.6 ... from pretrained-monthly (the cycle: 100, 105,
    108.7 ...), 8 quarters and a cycle below zero the same way, inside intervals of no width."""
    cycle = 100.0 + 30.0 * np.sin(2 * np.pi * np.arange(period) / period) + 5.0 * (np.arange(period) % 3 == 0)
    repeated = np.tile(cycle, values // period + 1)[:values]
    for series in (np.full(values, 3000.0), repeated, repeated - 200.0, -repeated):
        r = client.post(
            f"/v1/models/{model}/forecast",
            json={"series": [{"id": "still", "values": series.tolist()}], "level": [80]},
        )
        assert r.status_code == 200, r.text
        (answer,) = r.json()["forecasts"]
        H = len(answer["forecast"])
        want = series[len(series) - period + np.arange(H) % period]
        for key in ("forecast", "lo-80", "hi-80"):
            np.testing.assert_allclose(np.array(answer[key])[:, 0], want, rtol=1e-5, err_msg=key)


def test_a_fit_on_request_of_a_lone_still_series_forecasts_it_and_of_zeros_says_why_not(
    client: TestClient,
) -> None:
    """A lone constant series refits (its windows stay in the fit) and forecasts its value, in a fit and in
    a backtest with refit; a lone series of zeros leaves the fit nothing (every window all zeros), and
    both routes say so, naming the field, instead of a 500 or "rescale them"."""
    url = "/v1/models/pretrained-monthly"
    for values, fits in (([3000.0] * 60, True), ([0.0] * 60, False)):
        series = [{"id": "still", "values": values}]
        fit = client.post(f"{url}/fit_forecast", json={"series": series, "horizon": 6})
        backtest = client.post(
            f"{url}/cross_validation", json={"series": series, "horizon": 6, "n_windows": 2, "refit": True}
        )
        if fits:
            assert fit.status_code == backtest.status_code == 200, (fit.text, backtest.text)
            assert [step[0] for step in fit.json()["forecasts"][0]["forecast"]] == [3000.0] * 6
            for window in backtest.json()["series"][0]["windows"]:
                assert [step[0] for step in window["forecast"]] == [3000.0] * 6
        else:
            assert fit.status_code == backtest.status_code == 422, (fit.text, backtest.text)
            assert fit.json()["error"]["field"] == "series" and "all zeros" in fit.json()["error"]["message"]
            error = backtest.json()["error"]
            assert error["field"] == "refit" and "all zeros" in error["message"], error
