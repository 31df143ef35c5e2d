"""Your own data, from a written CSV to a served forecast, for each case that used to go silently wrong:
the forecast's timestamps are checked against the real calendar, and the served numbers against the
trained model on the same window (so the cycle's phase is the real weekday).

- a monthly file written DD/MM/YYYY (read month-first it was 1-12 January, a daily series);
- a daily file written DD/MM/YYYY (the 13th decides the order);
- a shop's daily sales with no row for its closed days (every later row was a step early);
- a 150-row file (its "99%" intervals came from 2 windows) beside one with enough windows;
- a non-negative column (its lower bounds went below zero).

One module-scoped repository: five tiny trainings (1 epoch, threads=1) and exports, one service.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fastapi.testclient import TestClient

from export.checkpoint import load_checkpoint
from export.data import DataError, load_dataset
from export.evaluate import load_for_checkpoint, predict
from export.onnx import export_model
from export.train import TrainConfig, train
from tests.app.conftest import make_settings, running_client

TINY = {"d_model": 8, "d_ff": 16, "n_heads": 2, "rem_heads": [1, 1, 0, 0, 0, 0]}


@dataclass(frozen=True)
class Case:
    csv: Path
    L: int
    H: int
    options: dict[str, Any]
    model: dict[str, Any]


def _write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def _weekly(days: pd.DatetimeIndex, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    profile = np.array([1.0, 0.9, 0.95, 1.05, 1.2, 1.5, 0.6])[days.day_of_week]
    return 100 * profile * rng.lognormal(0, 0.05, len(days))


def cases(folder: Path) -> dict[str, Case]:
    months = pd.date_range("2010-01-01", periods=72, freq="MS")
    monthly = 50 + 10 * np.sin(2 * np.pi * np.arange(72) / 12) + np.random.default_rng(0).normal(0, 1, 72)
    days = pd.date_range("2021-01-04", periods=420, freq="D")
    daily = _weekly(days, 1)
    shop_days = pd.date_range("2020-12-01", periods=460, freq="D")
    shop = _weekly(shop_days, 2)
    closed = ((shop_days.month == 12) & (shop_days.day == 25)) | (
        (shop_days.month == 1) & (shop_days.day == 1)
    )
    spend = np.where(np.random.default_rng(3).uniform(size=420) < 0.25, 0.0, _weekly(days, 4) * 0.3)
    weekly = {**TINY, "cycle_period": "auto"}

    def rows(stamps: pd.DatetimeIndex, values: np.ndarray, form: str = "%Y-%m-%d") -> list[str]:
        return [f"{t:{form}},{v:.2f}" for t, v in zip(stamps, values, strict=True)]

    open_days = ~closed
    return {
        "monthly": Case(
            _write(folder / "monthly.csv", "date,sales", rows(months, monthly, "%d/%m/%Y")),
            12, 3, {"dayfirst": True}, TINY,
        ),
        "daily": Case(
            _write(folder / "daily.csv", "date,sales", rows(days, daily, "%d/%m/%Y")), 28, 7, {}, weekly
        ),
        "closed": Case(
            _write(folder / "shop.csv", "date,sales", rows(shop_days[open_days], shop[open_days])),
            28, 7, {"fill": "zero"}, weekly,
        ),
        "short": Case(
            _write(folder / "short.csv", "date,sales", rows(days[:150], daily[:150])), 14, 7, {}, TINY
        ),
        "spend": Case(_write(folder / "spend.csv", "date,spend", rows(days, spend)), 28, 7, {}, weekly),
    }  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Case], Path, TestClient]]:
    root = tmp_path_factory.mktemp("own-data")
    all_cases = cases(root)
    repository = root / "repo"
    for name, case in all_cases.items():
        cfg = TrainConfig(
            data=str(case.csv),
            model={**case.model, "input_length": case.L, "horizon": case.H},
            epochs=1,
            batch_size=32,
            threads=1,
            progress=False,
            out=str(root / "runs"),
            name=name,
            plot_windows=1,
            **case.options,
        )
        run = train(cfg)
        export_model(run / "checkpoint.safetensors", repository, name, verify_batch_sizes=(1,))
    with running_client(make_settings(repository)) as client:
        yield all_cases, root, client


def _last_window(root: Path, name: str) -> tuple[np.ndarray, pd.Timestamp, np.ndarray, pd.Timestamp]:
    """The last test window as the file (filled) holds it: raw rows, its first stamp, the trained
    model's forecast on the raw scale, and the stamp of the window's last row."""
    model, info = load_checkpoint(root / "runs" / name / "checkpoint.safetensors")
    ds = load_for_checkpoint(info)
    i = ds.test.num_windows - 1
    start = ds.borders["test"][0] + i
    rows = ds.series.values[start : start + ds.test.input_length]
    with torch.no_grad():
        scaled, _ = predict(model, ds.test, torch.tensor([i]))
    forecast = ds.scaler.inverse_transform(scaled[0].numpy())
    stamps = ds.series.timestamps
    return rows, pd.Timestamp(stamps[start]), forecast, pd.Timestamp(stamps[start + ds.test.input_length - 1])


def _forecast(client: TestClient, name: str, rows: np.ndarray, start: pd.Timestamp, **extra: Any) -> Any:
    body = {"series": [{"values": rows.tolist(), "start": start.isoformat()}], **extra}
    return client.post(f"/v1/models/{name}/forecast", json=body)


def _served_matches_the_model_on_the_real_calendar(served, name: str, step: str) -> dict[str, Any]:
    cases_, root, client = served
    rows, start, expected, last = _last_window(root, name)
    r = _forecast(client, name, rows, start)
    assert r.status_code == 200, r.text
    out = r.json()["forecasts"][0]
    H = cases_[name].H
    calendar = pd.date_range(last, periods=H + 1, freq=step)[1:]
    assert out["timestamps"] == [f"{t.date()}T00:00:00Z" for t in calendar]
    np.testing.assert_allclose(out["forecast"], expected, rtol=1e-4, atol=1e-3)
    return out


def test_a_monthly_file_written_day_first_is_served_on_month_starts(served) -> None:
    cases_, root, _ = served
    with pytest.raises(DataError, match=r"ambiguous date '01/02/2010'.*--dayfirst or --monthfirst"):
        load_dataset(cases_["monthly"].csv, 12, 3)  # without the flag: refused, not read as days
    manifest = json.loads((root / "repo" / "monthly" / "1" / "manifest.json").read_text())
    assert manifest["frequency"] == "1MS" and manifest["dataset"]["dayfirst"] is True
    _served_matches_the_model_on_the_real_calendar(served, "monthly", "MS")


def test_a_daily_file_written_day_first_keeps_its_weekdays(served) -> None:
    """The 13th decides the order; the weekly cycle's phase is the real weekday (the served forecast is
    the trained model's on the same window), and the timestamps are the next days."""
    manifest = json.loads((served[1] / "repo" / "daily" / "1" / "manifest.json").read_text())
    assert (manifest["frequency"], manifest["cycle"]["period"]) == ("1D", 7)
    _served_matches_the_model_on_the_real_calendar(served, "daily", "D")


def test_closed_days_are_inserted_so_every_later_row_keeps_its_date(served) -> None:
    cases_, root, _ = served
    _, info = load_checkpoint(root / "runs" / "closed" / "checkpoint.safetensors")
    series = load_for_checkpoint(info).series
    real = pd.date_range("2020-12-01", periods=460, freq="D")
    np.testing.assert_array_equal(series.timestamps, real)  # the rows after 25/12 and 1/1 on their dates
    closed = [real.get_loc(pd.Timestamp(d)) for d in ("2020-12-25", "2021-01-01", "2021-12-25", "2022-01-01")]
    assert (series.values[closed, 0] == 0).all() and series.inserted_steps == 4  # --fill zero
    with pytest.raises(
        DataError, match=r"4 step\(s\) of 1D have no row.*2020-12-25 \(between lines 25 and 26\)"
    ):
        load_dataset(cases_["closed"].csv, 28, 7)  # without a fill: refused, naming the lines
    _served_matches_the_model_on_the_real_calendar(served, "closed", "D")


def test_intervals_need_enough_validation_windows(served) -> None:
    """150 rows leave 9 validation windows: no intervals (a 422 saying so), where they were the largest of
    a handful of residuals; 420 rows leave 36: 50-95% calibrated, 99% (which needs 99) refused."""
    _, root, client = served
    short = json.loads((root / "repo" / "short" / "1" / "manifest.json").read_text())
    assert short["intervals"] is None
    report = json.loads((root / "runs" / "short" / "report.json").read_text())
    assert report["windows"]["val"] == 9 and report["calibration"].startswith(
        "no prediction intervals: the validation split has 9 window(s), fewer than the 30"
    )
    rows, start, _, _ = _last_window(root, "short")
    r = _forecast(client, "short", rows, start, level=[80])
    assert r.status_code == 422 and r.json()["error"]["code"] == "no_calibrated_intervals"
    daily = json.loads((root / "repo" / "daily" / "1" / "manifest.json").read_text())["intervals"]
    assert daily["levels"] == [50, 80, 90, 95] and daily["calibration"]["windows"] == 36
    rows, start, _, _ = _last_window(root, "daily")
    assert _forecast(client, "daily", rows, start, level=[95]).status_code == 200
    r = _forecast(client, "daily", rows, start, level=[99])
    assert r.status_code == 422 and r.json()["error"]["code"] == "interval_not_calibrated"


def test_a_column_that_is_never_negative_gets_no_negative_bounds(served) -> None:
    _, root, client = served
    manifest = json.loads((root / "repo" / "spend" / "1" / "manifest.json").read_text())
    assert manifest["intervals"]["nonnegative"] == [True]
    assert manifest["dataset"]["nonnegative_rule"].startswith(
        "detected: no negative value and at least 5% zeros"
    )
    rows, start, _, _ = _last_window(root, "spend")
    out = _forecast(client, "spend", rows, start, level=[95]).json()["forecasts"][0]
    forecast, lo, hi = (np.asarray(out[k]) for k in ("forecast", "lo-95", "hi-95"))
    width = np.asarray(manifest["intervals"]["widths"][manifest["intervals"]["levels"].index(95)])
    assert (forecast - width < 0).any()  # unclipped, some lower bound would be negative ...
    np.testing.assert_allclose(lo, np.maximum(forecast - width, 0), rtol=1e-6, atol=1e-4)  # ... it is 0
    np.testing.assert_allclose(hi, np.maximum(forecast + width, 0), rtol=1e-6, atol=1e-4)
