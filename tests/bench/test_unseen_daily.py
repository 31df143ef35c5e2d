"""bench.unseen_daily: the daily series read onto their grid, the origins cut by the daily setting, and a
smoke run scored through the service's `pretrained-daily`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.unseen_daily import DAILY, daily_series, main
from bench.unseen_hourly import cut


def test_the_series_are_read_onto_a_daily_grid() -> None:
    series = daily_series()
    assert len(series) == 31
    assert {k.split(":")[0] for k in series} == {
        "elecdaily",
        "hyndsight",
        "pr_deaths",
        "cholera",
        "nox",
        "meltemp",
        "clemson",
        "weather",
    }
    assert len(series["elecdaily:Demand"]) == len(series["hyndsight:views"]) == 365
    assert len(series["pr_deaths:deaths"]) == 1201 and len(series["meltemp:max"]) == 730
    nox = {k: v for k, v in series.items() if k.startswith("nox:")}
    assert len(nox) == 13 and all(len(v) == 366 for v in nox.values())
    assert any(np.isnan(v).any() for v in nox.values())  # missing days kept
    weather = [v for k, v in series.items() if k.startswith("weather:")]
    assert len(weather) == 9 and all(360 <= len(v) <= 365 for v in weather)


def test_the_daily_origins_step_back_by_days_and_hold_the_horizon() -> None:
    values = np.arange(300.0)
    cases = cut({"a:x": values}, origins=3, step=9, context=182, setting=DAILY)
    assert [c.origin for c in cases] == [0, 9, 18]
    assert all(len(c.history) == 182 and len(c.future) == DAILY.horizon == 14 for c in cases)
    np.testing.assert_array_equal(cases[1].future, values[300 - 14 - 9 : 300 - 9])


@pytest.mark.slow
def test_a_smoke_run_scores_the_daily_model_and_a_peer_on_the_same_cases(tmp_path: Path) -> None:
    out = tmp_path / "daily.json"
    report = main(["--origins", "1", "--peers", "SeasonalNaive", "--json", str(out)])
    assert json.loads(out.read_text()) == report
    assert report["model"] == "pretrained-daily" and report["horizon"] == 14
    cases = len(cut(daily_series(), 1, 9, 182, DAILY))
    assert report["cases"] == cases >= 25  # each series' last 14 days where all are observed
    ours, naive = report["results"].values()
    for row in (ours, naive):
        assert row["mase"] > 0 and 0 <= row["coverage_80"] <= 1
        assert sum(s["cases"] for s in row["per_source"].values()) == cases
    # the served widths follow each series' scale (the spread at lag 1 where the read-out's window of
    # L = 7 holds no pair a week apart): before, they were one absolute width and covered 21% at 80%
    assert ours["coverage_80"] > 0.5
