"""The single-series reader (export/data/reading.py `load_csv`) judges a zoned file's steps as the panel
reader does (issue 46, item 8): whole days and months on the wall clock as written, kept as UTC
instants; steps under a day on the instants. A daily series across a daylight-saving change steps 23 or
25 hours as instants, and a month start east of UTC is the last day of the month before in UTC: both
were refused as irregular ("resample the file")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from export.data.errors import DataError
from export.data.reading import load_csv


def write(path: Path, stamps: list[str]) -> Path:
    values = np.arange(len(stamps), dtype=float) + 10
    pd.DataFrame({"date": stamps, "y": values}).to_csv(path, index=False)
    return path


def instants(local: pd.DatetimeIndex | list[str], zone: str) -> np.ndarray:
    index = pd.DatetimeIndex(local).tz_localize(zone).tz_convert("UTC").tz_localize(None)
    return index.to_numpy().astype("datetime64[ns]")


def test_a_daily_series_across_the_spring_change_is_daily_on_the_wall_clock(tmp_path: Path) -> None:
    days = pd.date_range("2024-03-25", "2024-04-05", freq="D")  # Berlin: clocks forward on 31 March
    csv = write(tmp_path / "daily.csv", [d.strftime("%Y-%m-%d") for d in days])
    series = load_csv(csv, timezone="Europe/Berlin")
    assert series.frequency == "1D" and series.frequency_seconds == 86_400
    np.testing.assert_array_equal(series.timestamps.astype("datetime64[ns]"), instants(days, "Europe/Berlin"))
    steps = np.diff(series.timestamps.astype("datetime64[h]").astype(np.int64))
    assert sorted(set(steps.tolist())) == [23, 24]  # the instants step 23 hours once: the wall clock a day


def test_a_missing_day_across_the_autumn_change_is_filled_at_local_midnight(tmp_path: Path) -> None:
    days = pd.date_range("2024-10-20", "2024-11-02", freq="D")  # Berlin: clocks back on 27 October
    kept = days.delete(8)  # 28 October, the day after the change
    csv = write(tmp_path / "gap.csv", [d.strftime("%Y-%m-%d 00:00") for d in kept])
    with pytest.raises(DataError, match=r"have no row.*2024-10-28"):
        load_csv(csv, timezone="Europe/Berlin")
    series = load_csv(csv, timezone="Europe/Berlin", fill="linear")
    assert series.inserted_steps == 1 and series.frequency == "1D"
    np.testing.assert_array_equal(series.timestamps.astype("datetime64[ns]"), instants(days, "Europe/Berlin"))
    assert series.values[8, 0] == pytest.approx((series.values[7, 0] + series.values[9, 0]) / 2)


def test_month_starts_east_of_utc_are_monthly(tmp_path: Path) -> None:
    months = pd.date_range("2022-01-01", periods=30, freq="MS")  # in UTC: the last day before, 15:00
    csv = write(tmp_path / "monthly.csv", [m.strftime("%Y-%m-%d") for m in months])
    series = load_csv(csv, timezone="Asia/Tokyo")
    assert series.frequency == "1MS"
    np.testing.assert_array_equal(series.timestamps.astype("datetime64[ns]"), instants(months, "Asia/Tokyo"))


def test_an_hourly_series_still_steps_elapsed_hours_across_the_change(tmp_path: Path) -> None:
    """Under a day the instants are judged: the spring gap's hour is refused by name, the hours around
    it read as one hourly grid."""
    hours = pd.date_range("2024-03-30 22:00", "2024-03-31 05:00", freq="h")
    csv = write(tmp_path / "gap_hour.csv", [h.strftime("%Y-%m-%d %H:%M") for h in hours])
    with pytest.raises(DataError, match="does not exist in Europe/Berlin"):
        load_csv(csv, timezone="Europe/Berlin")
    kept = [h for h in hours if h.hour != 2]
    series = load_csv(
        write(tmp_path / "hourly.csv", [h.strftime("%Y-%m-%d %H:%M") for h in kept]), timezone="Europe/Berlin"
    )
    assert series.frequency == "1h" and series.inserted_steps == 0
