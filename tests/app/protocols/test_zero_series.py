"""A series of zeros (a product that has not sold) forecasts zeros from every shipped global model,
with intervals of no width, through /v1: the read-out's un-scaling is 0 for an all-zero window
(app/artifacts/readout/windows.py `output_scales`), and the local half forecasts its zeros."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
