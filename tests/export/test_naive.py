"""The naive references beside every test MSE: last value and seasonal naive, scored as the model is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from export.data import load_dataset
from export.naive import naive_references, season, skill, summary


def _csv(path: Path, stamps: pd.DatetimeIndex, values: np.ndarray) -> Path:
    rows = [f"{t.date() if t == t.normalize() else t},{v:.6f}" for t, v in zip(stamps, values, strict=True)]
    path.write_text("date,v\n" + "\n".join(rows) + "\n")
    return path


def test_references_equal_their_definitions_on_every_test_window(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    stamps = pd.date_range("2021-01-01", periods=400, freq="D")
    weekly = np.tile([1.0, 2.0, 0.5, 3.0, 1.5, 4.0, 0.0], 60)[:400]
    ds = load_dataset(_csv(tmp_path / "w.csv", stamps, weekly + 0.1 * rng.standard_normal(400)), 28, 10)
    refs = naive_references(ds, ds.test)
    assert refs.seasonal_naive.period == 7 and refs.windows == ds.test.num_windows
    x, y = (t.numpy() for t in ds.test.windows(np.arange(ds.test.num_windows)))
    last = x[:, -1:, :]
    seasonal = x[:, [28 - 7 + (h % 7) for h in range(10)], :]
    mean = np.zeros_like(y)  # the training mean on the standardised scale
    assert refs.mean is not None
    for score, forecast in ((refs.last_value, last), (refs.seasonal_naive, seasonal), (refs.mean, mean)):
        err = forecast - y
        assert score.mse == pytest.approx(float((err**2).mean()), rel=1e-6)
        assert score.mae == pytest.approx(float(np.abs(err).mean()), rel=1e-6)
    # the weekly pattern repeats: one season back beats the last value by far
    assert refs.seasonal_naive.mse < 0.1 * refs.last_value.mse


def test_the_season_is_the_cycle_else_the_calendar_year_else_the_spectrum(tmp_path: Path) -> None:
    months = pd.date_range("2001-01-01", periods=120, freq="MS")
    ds = load_dataset(_csv(tmp_path / "m.csv", months, np.sin(np.arange(120))), 24, 6)
    assert season(ds) == (12, "a calendar year")
    assert season(ds, cycle_period=6) == (6, "the model's cycle")
    hours = pd.date_range("2021-01-01", periods=24 * 40, freq="h")
    ds = load_dataset(_csv(tmp_path / "h.csv", hours, np.sin(2 * np.pi * np.arange(960) / 24)), 48, 12)
    assert season(ds) == (24, "the training data's dominant period")


def test_the_summary_line_names_both_references_and_the_skill() -> None:
    from dataclasses import replace

    from export.reports import Metrics, NaiveReferences, SeasonalNaiveScore

    refs = NaiveReferences(
        last_value=Metrics(1.3),
        seasonal_naive=SeasonalNaiveScore(0.29, 0.4, 7, "the model's cycle"),
        windows=191,
    )
    assert skill(0.19, 0.29) == pytest.approx(1 - 0.19 / 0.29)
    assert summary(0.19, refs) == (
        "naive references on the same 191 test windows: last value MSE 1.3000, seasonal naive (period 7) "
        "MSE 0.2900: the model's MSE is 34% below the better one"
    )
    assert summary(0.35, refs).endswith("the model's MSE is 21% ABOVE the better one")
    # With the training mean beside them (issue 35: "44% below naive" for a model that predicts the mean).
    refs = replace(refs, mean=Metrics(1.0))
    assert summary(0.98, refs).endswith(
        "the model's MSE is 238% ABOVE the better one; the training mean MSE 1.0000: 2% below it"
    )
    refs = replace(refs, seasonal_naive=replace(refs.seasonal_naive, mse=1.75))
    assert summary(0.98, refs).endswith(
        "the model's MSE is 25% below the better one; the training mean MSE 1.0000: 2% below it"
    )
