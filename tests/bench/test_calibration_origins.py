"""bench.calibration_origins (issue 43): a smoke run, and that its hold-out column is the served coverage."""

from __future__ import annotations

import numpy as np
import pytest

from app.artifacts.conformal import conformal_quantile
from app.inference.metrics import seasonal_naive
from bench.calibration_origins import ORIGINS, learned_factor, main
from bench.competition_data import load_competition
from bench.competition_ours import ours_config
from export.global_models.calibration import calibrate_global, interval_halfwidths, series_spread
from export.global_models.search import train_global
from export.results_competitions import load_runs


def test_the_learned_factor_is_the_smallest_that_covers_the_level() -> None:
    scores = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]])
    widths = np.array([10.0, 10.0])
    c = learned_factor(scores, widths, level=80.0)  # 8 of the 10 ratios at or below it
    assert c == pytest.approx(0.8)
    assert (scores <= c * widths).mean() == pytest.approx(0.8)
    assert (scores <= 0.99 * c * widths).mean() < 0.8


def test_a_smoke_run_reports_every_origin_and_the_served_coverage(tmp_path) -> None:
    out = tmp_path / "origins.json"
    report = main(["--data", "Tourism:quarterly", "--limit", "60", "--json", str(out)])
    (r,) = report["results"]
    assert out.exists() and r["series"] == 60 and list(r["median_score"]) == list(ORIGINS)
    assert load_runs(tmp_path) == []  # beside the competitions runs, not read as one
    assert all(r["windows"][o] > 0 for o in ORIGINS) and r["windows"]["test"] == 60
    served = r["coverage_80_one_origin_ahead"]["-H on test"]
    # the served intervals, as bench.competitions scores them: calibrate_global's widths
    comp = load_competition("Tourism", "quarterly", limit=60)
    model = train_global(comp.train, ours_config(comp), local=True)
    intervals, _ = calibrate_global(model, comp.train, [80.0])
    half = interval_halfwidths(intervals, model, comp.train)[0]
    assert served == pytest.approx(float((np.abs(comp.test - model.forecast(comp.train)) <= half).mean()))
    assert r["learned_factor"]["test"]["c"] > 0.0 and 0.0 <= r["learned_factor"]["test"]["coverage"] <= 1.0
    # the seasonal naive, calibrated alike: widths from the histories' last H values, on the hold-out
    H, p = comp.horizon, comp.period
    before = [v[:-H] for v in comp.train]
    cal = np.abs(np.array([v[-H:] for v in comp.train]) - [seasonal_naive(b, H, p) for b in before])
    widths = conformal_quantile(cal / series_spread(model, before)[:, None], 0.8)
    test = (
        np.abs(comp.test - [seasonal_naive(v, H, p) for v in comp.train])
        / series_spread(model, comp.train)[:, None]
    )
    naive = r["seasonal_naive_coverage_80_one_origin_ahead"]["-H on test"]
    assert naive == pytest.approx(float((test <= widths[None, :]).mean()))
