"""POST /v1/models/{name}/fit_forecast against a real service process: the read-out refitted on the
histories sent equals the exporter's fit on them (export/global_models/model.py), interval levels with too few
windows are named, every limit answers 4xx naming its field and limit, a version without refit settings is
refused, and a refit is published (API key and explicit control only) as a version the service loads and
serves with the same forecasts."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from app.artifacts.readout import ReadoutSpec, calibration_tail
from app.inference.refit import FitTooLong, run_fit
from app.inference.windows import input_bound
from export.global_models.calibration import calibrate_global
from export.global_models.model import GlobalModel, fit_global
from tests.app.live import live_service
from tests.utils.panel import HORIZON, NAME, PERIOD, publish, store

KEY = "fit-test-key"
LIMITS = {
    "RSA_MAX_FIT_SERIES": "8",
    "RSA_MAX_FIT_HISTORY": "3000",
    "RSA_MAX_FIT_VALUES": "12000",
}


@dataclass(frozen=True)
class Served:
    url: str
    model: GlobalModel
    repo: Path

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=60, **kwargs)


def _old_version(repo: Path) -> None:
    """Version 2: version 1 as exported before the `readout` block (the block removed)."""
    old = repo / NAME / "2"
    shutil.copytree(repo / NAME / "1", old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["readout"]
    manifest["version"] = 2
    (old / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GlobalModel]:
    folder = tmp_path_factory.mktemp("fit")
    repo, model = publish(folder)
    _old_version(repo)
    return repo, model


@pytest.fixture(scope="module")
def served(published: tuple[Path, GlobalModel], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    repo, model = published
    log = tmp_path_factory.mktemp("fit-log") / "service.log"
    with live_service(repo, log, **LIMITS) as service:
        yield Served(service.url, model, repo)


@pytest.fixture(scope="module")
def controlled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A second repository served with an API key and explicit model control."""
    folder = tmp_path_factory.mktemp("fit-control")
    repo, model = publish(folder)
    env = {"RSA_API_KEYS": KEY, "RSA_MODEL_CONTROL": "explicit"}
    with live_service(repo, folder / "service.log", **env) as service:
        yield Served(service.url, model, repo)


def histories(n: int = 3, months: int = 60) -> list[np.ndarray]:
    return [store(200 + i, months - 5 * i) for i in range(n)]


def body(series: list[np.ndarray], **extra: Any) -> dict[str, Any]:
    return {
        "series": [
            {"id": f"s{i}", "start": "2015-01-01", "values": v.tolist()} for i, v in enumerate(series)
        ],
        **extra,
    }


def latest(repo: Path) -> int:
    return max(int(p.name) for p in (repo / NAME).iterdir() if p.name.isdigit())


def test_the_refit_is_the_exporters_fit_on_the_same_histories(served: Served) -> None:
    series = histories()
    r = served.post(f"/v1/models/{NAME}/versions/1/fit_forecast", body(series, horizon=4))
    assert r.status_code == 200, r.text
    answer = r.json()
    want = fit_global(series, served.model.config, served.model.input_length).forecast(series)[:, :4]
    got = np.array([f["forecast"] for f in answer["forecasts"]])[:, :, 0]
    np.testing.assert_allclose(got, want, rtol=1e-6)  # float32 answers of the float64 fit
    assert [f["id"] for f in answer["forecasts"]] == ["s0", "s1", "s2"]
    assert answer["forecasts"][0]["timestamps"][0].startswith("2020-01-01")  # 60 months after 2015-01
    assert answer["fit"]["series"] == 3 and answer["fit"]["published"] is None
    assert answer["fit"]["windows"] == sum(len(v) - HORIZON + 1 - 2 * PERIOD for v in series)
    # A refit is not the served model: other series, other weights.
    served_fc = served.model.forecast(series)[:, :4]
    assert np.abs(got - served_fc).max() > 1e-3


def test_intervals_come_from_the_histories_own_windows_and_say_which_levels_have_none(
    served: Served,
) -> None:
    series = [store(300, 2000)]  # 99.9% needs 999 windows: half the series held out, 995 windows
    r = served.post(f"/v1/models/{NAME}/versions/1/fit_forecast", body(series, level=[80, 99.9]))
    assert r.status_code == 200, r.text
    answer = r.json()
    f = answer["forecasts"][0]
    assert "lo-80" in f and "hi-80" in f and "lo-99.9" not in f
    assert np.all(np.array(f["lo-80"]) < np.array(f["forecast"]))
    assert answer["fit"]["levels"] == [80]
    assert answer["fit"]["calibration_windows"] == 1000 - HORIZON + 1
    assert "too few" in answer["fit"]["no_interval"]["99.9"]
    assert "needs at least 999" in answer["fit"]["no_interval"]["99.9"]


@pytest.mark.parametrize(
    ("months", "levels", "windows"),
    [
        # 99 windows wanted, 33 each: each tail stops at its last training window (train_min + H = 30
        # values before it): 25 + 20 + 15 windows. (The 20% held out before: 7 + 6 + 5.)
        ((60, 55, 50), [80.0, 95.0], 60),
        ((300,), [80.0], 99),  # 99 windows whatever the levels (20%: 55; [80] alone needs 4)
    ],
)
def test_a_fit_calibrates_as_an_export_of_the_same_series_does(
    published: tuple[Path, GlobalModel], months: tuple[int, ...], levels: list[float], windows: int
) -> None:
    """One rule holds out the calibration tail (`calibration_tail`): a fit on request gets the widths an
    export of the same series and levels writes, from at least 99 windows in all where the series allow
    them, whatever levels it asks."""
    repo, model = published
    spec = ReadoutSpec.from_json(json.loads((repo / NAME / "1" / "manifest.json").read_text())["readout"])
    series = [store(400 + i, n) for i, n in enumerate(months)]
    refit = run_fit(spec, series, HORIZON, levels, budget_s=60.0)
    exported, _ = calibrate_global(model, series, levels)
    assert refit.intervals is not None and exported is not None
    assert refit.calibration_windows == exported["calibration"]["windows"]
    np.testing.assert_array_equal(np.asarray(refit.intervals["widths"]), np.asarray(exported["widths"]))
    tail = calibration_tail(list(months), HORIZON, spec.min_history, spec.fit.train_min, levels)[0]
    assert refit.calibration_windows == sum(tail(n) - HORIZON + 1 for n in months) == windows


@pytest.mark.parametrize(
    ("make", "status", "field", "limit"),
    [
        (lambda: body(histories(9)), 422, "series", 8),
        (lambda: body([store(1, 3001)]), 422, "series[0].values", 3000),
        (lambda: body([store(i, 2500) for i in range(5)]), 422, "series", 12000),
        (lambda: body(histories(), level=[100]), 422, "level[0]", [0, 100]),
        (lambda: body([store(1, 30)], horizon=HORIZON + 1), 422, "horizon", HORIZON),
        (lambda: body([store(1, 5)]), 422, "series[0].values", 12),  # below min_history
        (lambda: body([store(1, 20)]), 422, "series", 2 * PERIOD + HORIZON),  # no training window
        (lambda: {"series": [{"values": [1.0, None] * 20}]}, 422, "series[0].values[1]", None),
        (lambda: body(histories(), publish={"model": NAME}), 403, "publish", None),
        (lambda: {"series": []}, 422, "series", None),
        # Past what the float32 graph takes (input_bound, the forecast's rule): 1e20 times a series was
        # fitted and answered a third of itself until 2026-12-06.
        (lambda: body([np.full(60, 1e300)]), 422, "series[0].values[0]", "bound"),
        (lambda: body([np.r_[np.ones(30), np.full(30, 1e308)]]), 422, "series[0].values[30]", "bound"),
        (lambda: body([histories()[0], 1e20 * histories()[1]]), 422, "series[1].values[0]", "bound"),
        (lambda: {**body(histories()), "extra": 1}, 422, "extra", None),
    ],
)
def test_bad_input_names_the_field_and_the_limit_and_writes_nothing(
    served: Served, make: Any, status: int, field: str, limit: Any
) -> None:
    before = sorted(p.name for p in (served.repo / NAME).iterdir())
    r = served.post(f"/v1/models/{NAME}/versions/1/fit_forecast", make())
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["field"] == field
    if limit == "bound":  # the largest |value| the model's window may hold
        limit = input_bound(served.model.window_length)
    if limit is not None:
        assert error["limit"] == limit
    assert sorted(p.name for p in (served.repo / NAME).iterdir()) == before


def test_a_version_without_refit_settings_cannot_be_refit(served: Served) -> None:
    r = served.post(f"/v1/models/{NAME}/versions/2/fit_forecast", body(histories()))
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "not_refittable" and error["field"] == "version"
    assert "cannot be refit" in error["message"]


def test_the_fit_stops_at_its_time_budget(published: tuple[Path, GlobalModel]) -> None:
    repo, _ = published
    manifest = json.loads((repo / NAME / "1" / "manifest.json").read_text())
    spec = ReadoutSpec.from_json(manifest["readout"])
    with pytest.raises(FitTooLong) as caught:
        run_fit(spec, histories(), HORIZON, [], budget_s=0.0)
    assert caught.value.field == "series" and caught.value.limit == 0.0
    assert "RSA_MAX_FIT_SECONDS" in caught.value.message


def test_a_published_refit_is_served_with_the_same_forecasts(controlled: Served) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    series = histories()
    assert controlled.post(f"/v1/models/{NAME}/fit_forecast", body(series)).status_code == 401
    bad = controlled.post(
        f"/v1/models/{NAME}/fit_forecast", body(series, publish={"model": ".."}), headers=auth
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "publish.model"
    assert latest(controlled.repo) == 1
    r = controlled.post(
        f"/v1/models/{NAME}/fit_forecast", body(series, level=[50], publish={"model": NAME}), headers=auth
    )
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["fit"]["published"] == {"model": NAME, "version": 2}
    manifest = json.loads((controlled.repo / NAME / "2" / "manifest.json").read_text())
    assert manifest["refit"]["from"] == {"model": NAME, "version": 1}
    assert manifest["readout"] is not None and manifest["intervals"]["levels"] == [50]
    load = httpx.post(f"{controlled.url}/v2/repository/models/{NAME}/load", headers=auth, timeout=60)
    assert load.status_code == 200, load.text
    served = controlled.post(
        f"/v1/models/{NAME}/versions/2/forecast", body(series, level=[50]), headers=auth
    ).json()
    for a, b in zip(served["forecasts"], answer["forecasts"], strict=True):
        np.testing.assert_allclose(a["forecast"], b["forecast"], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(a["hi-50"], b["hi-50"], rtol=1e-4, atol=1e-3)


def test_fits_past_the_in_flight_bound_are_refused_with_retry_after(
    published: tuple[Path, GlobalModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.inference import refit as fitting
    from tests.app.conftest import make_settings, running_client

    repo, _ = published
    with running_client(make_settings(repo, max_fits_in_flight=2, retry_after_s=3)) as client:
        monkeypatch.setattr(fitting, "_in_flight", 2)  # two fits running
        r = client.post(f"/v1/models/{NAME}/versions/1/fit_forecast", json=body(histories()))
        assert r.status_code == 503 and r.headers["retry-after"] == "3"
        assert r.json()["error"]["code"] == "overloaded" and r.json()["error"]["limit"] == 2
        monkeypatch.setattr(fitting, "_in_flight", 1)  # one free slot: served, and given back
        assert (
            client.post(f"/v1/models/{NAME}/versions/1/fit_forecast", json=body(histories())).status_code
            == 200
        )
        assert fitting._in_flight == 1
