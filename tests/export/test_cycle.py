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
