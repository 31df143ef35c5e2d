"""A backtest or anomaly check that cannot finish within the request's deadline on this host is refused
before it starts (issue 46): 422 `evaluation_too_long` naming its field (`n_windows`, `last`) and the
windows a series that would fit, where a maximal backtest on a loaded host used to be admitted and
answered 504 at the 30 s deadline. Driven by injected costs (the version's evaluation drain rate, the
refit estimate) and a 100 s deadline, so no answer depends on how fast this machine is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.protocols.rsa_v1 import evaluation
from tests.app.conftest import engine_of, make_settings, running_client
from tests.app.fakes import ToySpec, intervals_block, write_version
from tests.utils.panel import HORIZON, NAME, publish, store

TOY = "/v1/models/toy"
LEVELS = [50.0, 80.0]
DEADLINE_S = 100.0  # ADMIT_FRACTION (0.6) of it: 60 s, less what the request spent before its windows ran
ROW_S = 25.0  # injected: two windows (50 s) fit in 60 s, three (75 s) do not, whatever this machine's speed


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder = tmp_path_factory.mktemp("evaluation_cost")
    repo, _ = publish(folder)  # the stores' read-out: refittable
    block = intervals_block(LEVELS, np.full((len(LEVELS), 4, 3), 1.0))
    write_version(repo, ToySpec(version=1, manifest_overrides={"intervals": block}))
    with running_client(make_settings(repo, request_timeout_s=DEADLINE_S)) as c:
        yield c


def values(n: int) -> list[list[float]]:
    return np.random.default_rng(n).normal(10, 3, size=(n, 3)).round(3).tolist()


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("cross_validation", {"series": [{"values": values(20)}], "horizon": 2, "n_windows": 3}, "n_windows"),
        ("detect_anomalies", {"series": [{"values": values(20)}], "last": 3}, "last"),
    ],
)
def test_evaluation_past_the_deadline_at_the_measured_rate_is_refused_naming_its_field_and_what_fits(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, route: str, body: dict[str, Any], field: str
) -> None:
    batcher = engine_of(client)._batcher("toy", 1)
    monkeypatch.setattr(batcher.evaluation_drain, "row_seconds", ROW_S)
    calls = batcher.stats.session_calls
    r = client.post(f"{TOY}/{route}", json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "evaluation_too_long" and error["field"] == field and error["limit"] == 2
    assert (
        f"send {field} of at most 2" in error["message"] and "refused before it started" in error["message"]
    )
    assert batcher.stats.session_calls == calls  # nothing ran
    smaller = {**body, field: 2}
    r = client.post(f"{TOY}/{route}", json=smaller)
    assert r.status_code == 200, r.text


def test_two_series_are_told_the_windows_each_that_fit(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    batcher = engine_of(client)._batcher("toy", 1)
    monkeypatch.setattr(batcher.evaluation_drain, "row_seconds", ROW_S / 2)  # 4 rows fit: 2 windows each
    body = {"series": [{"values": values(20)}, {"values": values(21)}], "horizon": 2, "n_windows": 3}
    r = client.post(f"{TOY}/cross_validation", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["limit"] == 2


def test_a_refitting_backtest_estimated_past_the_deadline_is_refused_before_its_fits(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refit estimate (injected: 37.5 s per cutoff's fit) against 60% of the 100 s left: 3 cutoffs
    (112.5 s) refused naming n_windows and the 1 that fits; no fit slot was taken."""
    monkeypatch.setattr(evaluation, "estimated_seconds", lambda work: 3 * 37.5)
    taken: list[Any] = []
    monkeypatch.setattr(evaluation, "fit_in_slot", lambda *a, **k: taken.append(a))
    series = [{"id": f"s{i}", "values": store(i, 60).tolist()} for i in range(3)]
    body = {"series": series, "horizon": HORIZON, "n_windows": 3, "refit": True}
    r = client.post(f"/v1/models/{NAME}/cross_validation", json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "evaluation_too_long" and error["field"] == "n_windows" and error["limit"] == 1
    assert "send n_windows of at most 1" in error["message"] and "refit: false" in error["message"]
    assert taken == []
