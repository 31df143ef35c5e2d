"""Cycle phases of windows, the dominant period of the training data, and the cycle table's start."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from export.cycle import dominant_period, fit_cycle
from export.data import Split, load_dataset
from models import ModelConfig, RSAForecaster


def test_phases_are_the_utc_hour_for_hourly_data():
    stamps = np.datetime64("2016-07-01T05:00") + np.arange(100).astype("timedelta64[h]")
    split = Split("val", np.zeros((100, 1)), stamps, input_length=4, horizon=2, step_seconds=3600.0)
    assert split.phases([0, 1, 19, 20], 24).tolist() == [5, 6, 0, 1]
    # a weekly cycle of hourly data: 2016-07-01 is a Friday; the epoch was a Thursday
    assert split.phases([0], 168).tolist() == [(24 + 5)]


def test_phases_need_a_step():
    split = Split("x", np.zeros((10, 1)), np.arange(10).astype("datetime64[h]"), input_length=2, horizon=1)
    with pytest.raises(ValueError, match="step_seconds"):
        split.phases([0], 24)


def test_dominant_period_of_etth1_is_a_day():
    ds = load_dataset("data/ETT/ETTh1.csv", 96, 96)
    assert dominant_period(ds.train.data, 96) == 24
    assert ds.train.step_seconds == 3600


def test_dominant_period_of_a_synthetic_weekly_signal():
    t = np.arange(7 * 200)
    rng = np.random.default_rng(0)
    values = np.stack([np.sin(2 * np.pi * t / 7), 0.1 * rng.standard_normal(len(t))], axis=1)
    assert dominant_period(values, 30) == 7
    assert dominant_period(values[:20], 30) == 7  # up to half the rows: a period must repeat
    with pytest.raises(ValueError, match="too few"):
        dominant_period(values[:3], 30)


def tiny_cycle_model(period: int) -> RSAForecaster:
    heads = (1, 0, 0, 0, 0, 0)
    return RSAForecaster(
        ModelConfig(
            input_length=4, horizon=2, channels=2, d_model=4, n_heads=2, rem_heads=heads, cycle_period=period
        )
    )


def test_fit_cycle_is_the_mean_at_each_phase():
    stamps = np.datetime64("2020-01-01T00:00") + np.arange(48).astype("timedelta64[h]")
    data = np.arange(48, dtype=np.float64)[:, None] * np.array([[1.0, -2.0]])
    split = Split("train", data, stamps, input_length=4, horizon=2, step_seconds=3600.0)
    model = tiny_cycle_model(24)
    fit_cycle(model, split)
    # hour h holds rows h and h + 24: mean h + 12
    expected = (np.arange(24) + 12.0)[:, None] * np.array([[1.0, -2.0]])
    np.testing.assert_allclose(model.cycle.detach().numpy(), expected, rtol=1e-6)
    too_long = tiny_cycle_model(96)
    with pytest.raises(ValueError, match="no rows at cycle phases"):
        fit_cycle(too_long, split)
    assert torch.is_tensor(model.cycle)


@pytest.mark.parametrize("model", [{"cycle_period": "weekly"}, {"cycle_period": -1}, {"theta_init": "daily"}])
def test_train_config_rejects_bad_cycle_settings(model):
    from export.train import TrainConfig

    with pytest.raises(ValueError, match=r"cycle_period|theta_init"):
        TrainConfig(model=model)


def test_auto_settings_resolve_from_the_training_data():
    import math

    from export.train import TrainConfig, resolve_auto

    ds = load_dataset("data/ETT/ETTh1.csv", 96, 24)
    cfg = resolve_auto(TrainConfig(model={"cycle_period": "auto", "theta_init": "auto"}), ds)
    assert cfg.model["cycle_period"] == 24 and cfg.model["theta_init"] == pytest.approx(2 * math.pi / 24)


def test_a_cycle_of_11_4_rows_is_reported_as_such_not_rounded_to_34():
    """A sine of 11.4 rows over 340 rows peaks at the bin of 340/30 = 11.33 rows, which the harmonic rule
    alone read as a third of a 34-row cycle; the spectrum has no power at 34 rows, so the cycle is what
    it is: 11.4 rows (refined between bins), used as 11, and the rule says so."""
    from export.cycle import detect_cycle

    t = np.arange(340)
    values = np.sin(2 * np.pi * t / 11.4)[:, None] + 0.1 * np.random.default_rng(1).standard_normal((340, 1))
    cycle = detect_cycle(values, 96)
    assert cycle.period == 11 and cycle.detected == pytest.approx(11.4, abs=0.1) and not cycle.whole
    assert cycle.rule.startswith("not whole: a cycle of 11.3") and "rounded to 11" in cycle.rule
    assert dominant_period(values, 96) == 11


def test_a_sharp_weekly_pattern_peaking_at_its_third_harmonic_is_weekly():
    """A Saturday high and a Sunday low put the most power at 3/7 (2.33 days) but some at 1/7 too: a
    harmonic of a 7-day cycle, as before."""
    from export.cycle import detect_cycle

    rng = np.random.default_rng(0)
    values = np.tile([0, 0, 0, 0, 0, 1, -1], 120).astype(float)[:, None] + 0.05 * rng.standard_normal(
        (840, 1)
    )
    cycle = detect_cycle(values, 30)
    assert (cycle.period, cycle.whole) == (7, True) and cycle.detected == pytest.approx(7 / 3, abs=0.01)
    assert cycle.rule.startswith("harmonic: the peak at 2.33 rows is harmonic 3 of a 7-row cycle")


def test_yearly_sunspot_counts_have_an_11_year_cycle_named_in_years():
    """statsmodels' yearly sunspot counts (1700-2008, a test dependency): an 11-year cycle, named by its
    length in years, never "daily"; a detected 11.4 rows names its own length and the rounding."""
    from statsmodels.datasets import sunspots

    from export.cycle import cycle_name, detect_cycle

    values = sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(dtype=np.float64)[:, None]
    cycle = detect_cycle(values, 96)
    assert cycle.period == 11 and 10.5 < cycle.detected < 11.5
    year = 365.25 * 86400
    assert cycle_name(cycle.period, year) == "seasonal (11 years)"
    assert cycle_name(11, year, detected=11.4) == "seasonal (11.4 years, rounded to 11 steps)"
    assert cycle_name(52, 7 * 86400, detected=52.0) == "yearly"


def test_the_naive_reference_says_how_a_non_whole_season_was_rounded():
    from export.naive import summary
    from export.reports import Metrics, NaiveReferences, SeasonalNaiveScore

    rule = "not whole: a cycle of 11.40 rows"
    naive = NaiveReferences(Metrics(1.0), SeasonalNaiveScore(0.5, 0.6, 11, "the dominant period", rule), 3)
    assert "seasonal naive (period 11; not whole: a cycle of 11.40 rows) MSE 0.5000" in summary(0.4, naive)
