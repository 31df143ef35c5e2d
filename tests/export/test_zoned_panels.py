"""The trainer reads zoned long files (issue 46, item 8): with `--timezone`, a series stepping whole days or
months is judged on its wall clock (monthly data east of UTC, daily data across a daylight-saving change
are regular), one stepping less than a day on its instants (an hourly series across the change is
regular, an hour really missing is not), and its timestamps stay UTC instants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from export.data.errors import DataError
from export.data.options import ReadOptions
from export.data.panels import load_panel
from export.global_models.cli import cli


def long_file(path: Path, stamps: pd.DatetimeIndex, n: int = 2, drop: str | None = None) -> Path:
    rows = []
    for i in range(n):
        values = 100 + 10 * np.sin(np.arange(len(stamps)) * 2 * np.pi / 12 + i) + i
        rows += [
            (f"s{i}", t.strftime("%Y-%m-%d %H:%M:%S"), round(float(v), 3))
            for t, v in zip(stamps, values, strict=True)
            if drop is None or not t.strftime("%Y-%m-%d %H:%M").startswith(drop)
        ]
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(path, index=False)
    return path


MONTHLY = pd.date_range("2018-01-01", periods=48, freq="MS")
DAILY = pd.date_range("2023-03-01", periods=60, freq="D")  # across 2023-03-26 (Berlin), 03-12 (New York)
HOURLY = pd.date_range("2023-03-25", periods=60, freq="h")


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Asia/Tokyo", "America/New_York", "Australia/Sydney"])
@pytest.mark.parametrize(("stamps", "alias"), [(MONTHLY, "1MS"), (DAILY, "1D")])
def test_zoned_days_and_months_are_regular_on_their_wall_clock(
    tmp_path: Path, zone: str, stamps: pd.DatetimeIndex, alias: str
) -> None:
    panel = load_panel(long_file(tmp_path / "long.csv", stamps), ReadOptions(timezone=zone))
    assert panel.frequency == alias and panel.timezone == zone
    series = panel.series[0]
    assert len(series) == len(stamps)
    # instants: the wall-clock times read in the zone, as UTC
    want = stamps.tz_localize(zone).tz_convert("UTC").tz_localize(None).to_numpy()
    np.testing.assert_array_equal(series.timestamps, want.astype("datetime64[ns]"))


def test_a_zoned_daily_gap_is_filled_on_the_wall_clock(tmp_path: Path) -> None:
    path = long_file(tmp_path / "long.csv", DAILY, drop="2023-03-27")  # the day after the change
    panel = load_panel(path, ReadOptions(timezone="Europe/Berlin", fill="linear"))
    got = panel.series[0].timestamps
    want = DAILY.tz_localize("Europe/Berlin").tz_convert("UTC").tz_localize(None).to_numpy()
    np.testing.assert_array_equal(got, want.astype("datetime64[ns]"))


def test_sub_daily_steps_are_judged_on_instants(tmp_path: Path) -> None:
    # Berlin skips 02:00 on 2023-03-26: the file has no such row, and the hours are regular.
    path = long_file(tmp_path / "berlin.csv", HOURLY, drop="2023-03-26 02")
    assert load_panel(path, ReadOptions(timezone="Europe/Berlin")).frequency == "1h"
    # Tokyo does not: the same file misses an hour.
    with pytest.raises(DataError, match="have no row"):
        load_panel(path, ReadOptions(timezone="Asia/Tokyo"))


@pytest.mark.slow  # trains a model (CPU seconds)
def test_export_panel_trains_on_monthly_data_east_of_utc(tmp_path: Path) -> None:
    data = long_file(tmp_path / "long.csv", MONTHLY, n=6)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--data",
            str(data),
            "--horizon",
            "6",
            "--input-periods",
            "2",
            "--timezone",
            "Europe/Berlin",
            "--no-local",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (out / "model.json").exists()
