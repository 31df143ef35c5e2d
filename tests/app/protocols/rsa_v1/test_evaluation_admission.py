"""Backtests and anomaly checks use their version's evaluation queue (issue 46, item 5): /v1's
cross_validation and detect_anomalies submit as evaluation work, forecasts do not, and evaluation past
RSA_MAX_EVALUATIONS_IN_FLIGHT answers 503 naming the limit while forecasts are still served."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.errors import Overloaded
from tests.app.conftest import engine_of, make_settings, running_client, runtime_of
from tests.app.fakes import ToySpec, intervals_block, write_version

TOY = "/v1/models/toy"
LEVELS = [50.0, 80.0]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    repo = tmp_path_factory.mktemp("evaluation_admission")
    block = intervals_block(LEVELS, np.full((len(LEVELS), 4, 3), 1.0))
    write_version(repo, ToySpec(version=1, manifest_overrides={"intervals": block}))
    with running_client(make_settings(repo, max_evaluations_in_flight=1, retry_after_s=2)) as c:
        yield c


def values(n: int) -> list[list[float]]:
    return np.random.default_rng(n).normal(10, 3, size=(n, 3)).round(3).tolist()


BACKTEST = {"series": [{"values": values(20)}], "horizon": 2, "n_windows": 3}
ANOMALIES = {"series": [{"values": values(20)}], "last": 4}
FORECAST = {"series": [{"values": values(8)}]}


def test_evaluation_routes_submit_as_evaluation_and_forecasts_do_not(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    batcher = engine_of(client)._batcher("toy", 1)
    seen: list[bool] = []
    submit = batcher.submit

    async def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(bool(args[3] if len(args) > 3 else kwargs.get("evaluation", False)))
        return await submit(*args, **kwargs)

    monkeypatch.setattr(batcher, "submit", spy)
    for route, body, evaluation in (
        ("cross_validation", BACKTEST, True),
        ("detect_anomalies", ANOMALIES, True),
        ("forecast", FORECAST, False),
    ):
        seen.clear()
        r = client.post(f"{TOY}/{route}", json=body)
        assert r.status_code == 200, r.text
        assert seen and set(seen) == {evaluation}, (route, seen)


def test_evaluation_past_its_slots_is_refused_naming_the_limit_and_forecasts_are_served(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    batcher = engine_of(client)._batcher("toy", 1)
    monkeypatch.setattr(batcher, "_evaluations", 1)  # one backtest in flight: the limit here
    for route, body in (("cross_validation", BACKTEST), ("detect_anomalies", ANOMALIES)):
        r = client.post(f"{TOY}/{route}", json=body)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "2"
        error = r.json()["error"]
        assert error["code"] == "overloaded" and error["limit"] == 1
        assert "RSA_MAX_EVALUATIONS_IN_FLIGHT" in error["message"]
    assert client.post(f"{TOY}/forecast", json=FORECAST).status_code == 200
    monkeypatch.setattr(batcher, "_evaluations", 0)
    assert client.post(f"{TOY}/cross_validation", json=BACKTEST).status_code == 200


def test_the_settings_reach_the_batcher(client: TestClient) -> None:
    config = engine_of(client)._batcher("toy", 1).config
    assert (config.max_evaluations, config.evaluation_call_rows) == (1, 64)  # the setting, the default


def test_a_request_holds_its_slot_from_before_its_windows_to_its_answer(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The front end's slot (InferenceService.evaluating) is taken before any window is built and held
    across every submit of the request (an anomaly check's repair rounds): refused there, the engine is
    never asked."""
    service = runtime_of(client).service
    batcher = engine_of(client)._batcher("toy", 1)
    submitted: list[int] = []
    submit = batcher.submit

    async def spy(*args: Any, **kwargs: Any) -> Any:
        submitted.append(1)
        return await submit(*args, **kwargs)

    monkeypatch.setattr(batcher, "submit", spy)
    monkeypatch.setitem(service._evaluating, ("toy", 1), 1)
    r = client.post(f"{TOY}/detect_anomalies", json=ANOMALIES)
    assert r.status_code == 503 and "RSA_MAX_EVALUATIONS_IN_FLIGHT" in r.json()["error"]["message"]
    assert submitted == []
    monkeypatch.delitem(service._evaluating, ("toy", 1))
    assert client.post(f"{TOY}/detect_anomalies", json=ANOMALIES).status_code == 200
    assert submitted and service._evaluating == {}  # given back


def test_the_slot_is_one_per_request_and_given_back() -> None:
    from app.engine.catalog import VersionEntry
    from app.inference.service import InferenceService

    settings = make_settings(Path("."), max_evaluations_in_flight=1)
    service = InferenceService.__new__(InferenceService)
    service.settings, service._evaluating = settings, {}
    entry = VersionEntry.__new__(VersionEntry)
    object.__setattr__(entry, "name", "m")
    object.__setattr__(entry, "version", 3)

    async def scenario() -> None:
        async with service.evaluating(entry):
            assert service._evaluating == {("m", 3): 1}
            with pytest.raises(Overloaded) as refused:
                async with service.evaluating(entry):
                    pass
            assert refused.value.limit == 1
        assert service._evaluating == {}

    asyncio.run(scenario())
