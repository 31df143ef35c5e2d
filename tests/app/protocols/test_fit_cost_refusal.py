"""A fit whose estimated cost passes RSA_MAX_FIT_SECONDS is refused before it starts (issue 46, item 6):
fit_forecast and a backtest's refits answer 422 `fit_too_long` naming their field and the limit, and no
fit runs; within the budget they are served, the fit in a worker process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.protocols.rsa_v1 import evaluation, fitting
from tests.app.conftest import make_settings, running_client
from tests.utils.panel import NAME, publish, store

pytestmark = pytest.mark.slow  # trains and exports a model (tests/tiers.py: a trained model is slow)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return publish(tmp_path_factory.mktemp("fit-cost"))[0]


@pytest.fixture(scope="module")
def client(repo: Path) -> Iterator[TestClient]:
    # 10 µs: any fit of these series is estimated past it (3 series of 60 values: about 0.2 ms)
    with running_client(make_settings(repo, max_fit_seconds=1e-5)) as c:
        yield c


def series(n: int = 3, months: int = 60) -> list[dict[str, Any]]:
    return [{"id": f"s{i}", "values": store(200 + i, months).tolist()} for i in range(n)]


def test_a_fit_estimated_past_the_budget_is_refused_before_it_runs(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(fitting, "run_fit", lambda *a: ran.append("fit"))
    monkeypatch.setattr(evaluation, "run_backtest_refits", lambda *a: ran.append("backtest"))
    for route, body, field in (
        ("fit_forecast", {"series": series()}, "series"),
        ("cross_validation", {"series": series(), "n_windows": 2, "refit": True}, "refit"),
    ):
        r = client.post(f"/v1/models/{NAME}/versions/1/{route}", json=body)
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["code"] == "fit_too_long" and error["field"] == field and error["limit"] == 1e-5
        assert "RSA_MAX_FIT_SECONDS" in error["message"] and "before it started" in error["message"]
    assert ran == []


def test_within_the_budget_the_fit_runs_in_a_worker(repo: Path) -> None:
    with running_client(make_settings(repo, max_fit_seconds=30.0)) as c:
        r = c.post(f"/v1/models/{NAME}/versions/1/fit_forecast", json={"series": series()})
        assert r.status_code == 200, r.text
        assert np.isfinite(np.array([f["forecast"] for f in r.json()["forecasts"]], float)).all()


def test_with_every_fit_slot_taken_a_fit_is_refused_before_its_body_is_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """503 with Retry-After naming the limit, even for a body that is not JSON: the route asks for a slot
    before it reads and parses what was sent (issue 46: refused fits' bodies took the cores from
    forecasts). A slot free again: the same body is read and refused as malformed."""
    from app.inference import refit

    with running_client(make_settings(repo, max_fits_in_flight=2)) as c:
        monkeypatch.setattr(refit, "_in_flight", 2)
        r = c.post(f"/v1/models/{NAME}/versions/1/fit_forecast", content=b"{not json")
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] and r.json()["error"]["limit"] == 2
        monkeypatch.setattr(refit, "_in_flight", 0)
        r = c.post(f"/v1/models/{NAME}/versions/1/fit_forecast", content=b"{not json")
        assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json", r.text
