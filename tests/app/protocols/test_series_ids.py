"""A series' `id` names its answer, so two series of one request may not share one: every /v1 route that
takes series refuses a repeated id with a 422 naming both places (until 2026-12-06 each was answered,
twice under one name). Series without an id stay apart by their position."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[3]
MODEL = "pretrained-monthly"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with running_client(make_settings(ROOT / "model_repository", models=[MODEL])) as c:
        yield c


def _values(level: float) -> list[float]:
    t = np.arange(96)
    return [float(v) for v in level + 10 * np.sin(2 * np.pi * t / 12) + 0.5 * (t % 5)]


@pytest.mark.parametrize("action", ["forecast", "cross_validation", "detect_anomalies", "fit_forecast"])
def test_a_repeated_id_is_refused_naming_both_series(client: TestClient, action: str) -> None:
    series = [{"id": "a", "values": _values(100)}, {"id": "b", "values": _values(50)}]
    series.append({"id": "a", "values": _values(200)})
    r = client.post(f"/v1/models/{MODEL}/{action}", json={"series": series})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "series", error
    assert "series[2].id 'a' repeats series[0].id" in error["message"], error


def test_series_without_ids_or_with_distinct_ones_are_answered_in_order(client: TestClient) -> None:
    series = [{"values": _values(100)}, {"values": _values(100)}, {"id": "a", "values": _values(200)}]
    r = client.post(f"/v1/models/{MODEL}/forecast", json={"series": series})
    assert r.status_code == 200, r.text
    answers = r.json()["forecasts"]
    assert [a["id"] for a in answers] == [None, None, "a"]
    assert answers[0]["forecast"] == answers[1]["forecast"] != answers[2]["forecast"]
