"""A series in any unit float32 holds forecasts as in its own: c times a series is answered c times its
forecast and intervals by every shipped global model, through /v1. Until 2026-12-06 the read-out took a
window whose mean |value| was below an absolute 1e-8 for all zeros, and the intervals' spread floor was an
absolute 1e-9: from pretrained-monthly, 1e-12 times a seasonal series came back 12.8 of its own units off,
and its 80% interval 697 times too wide (1e-15: 697,000 times)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[3]
MODELS = [("pretrained-monthly", 12, 120), ("pretrained-quarterly", 4, 40), ("pretrained-yearly", 1, 20)]
MODELS += [("pretrained-hourly", 24, 200)]
KEYS = ("forecast", "lo-80", "hi-80")


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with running_client(make_settings(ROOT / "model_repository")) as c:
        yield c


def _answer(client: TestClient, model: str, values: np.ndarray) -> dict[str, np.ndarray]:
    body = {"series": [{"id": "s", "values": [float(v) for v in values]}], "level": [80]}
    r = client.post(f"/v1/models/{model}/forecast", json=body)
    assert r.status_code == 200, r.text
    (answer,) = r.json()["forecasts"]
    return {k: np.asarray(answer[k], dtype=np.float64)[:, 0] for k in KEYS}


@pytest.mark.parametrize(("model", "period", "n"), MODELS)
@pytest.mark.parametrize("c", [1e-20, 1e-12, 1e-9, 1e12])
def test_c_times_a_series_forecasts_c_times_its_forecast(
    client: TestClient, model: str, period: int, n: int, c: float
) -> None:
    rng = np.random.default_rng(3)
    t = np.arange(n)
    x = 100.0 + 10.0 * np.sin(2 * np.pi * t / max(period, 2)) + 0.3 * t + rng.normal(0.0, 2.0, n)
    want, got = _answer(client, model, x), _answer(client, model, c * x)
    for key in KEYS:
        np.testing.assert_allclose(got[key] / c, want[key], rtol=1e-5, atol=1e-5 * np.abs(want[key]).max())
    width = want["hi-80"] - want["lo-80"]
    np.testing.assert_allclose((got["hi-80"] - got["lo-80"]) / c, width, rtol=1e-3)


@pytest.mark.parametrize("c", [1e-20, 1e-12])
def test_a_tiny_still_series_keeps_intervals_of_no_width(client: TestClient, c: float) -> None:
    cycle = 100.0 + 10.0 * np.sin(2 * np.pi * np.arange(12) / 12)
    got = _answer(client, "pretrained-monthly", c * np.tile(cycle, 10))
    np.testing.assert_allclose(got["forecast"] / c, np.tile(cycle, 2)[:24], rtol=1e-5)
    assert np.all(got["hi-80"] - got["lo-80"] <= 1e-6 * c * cycle.max()), got
