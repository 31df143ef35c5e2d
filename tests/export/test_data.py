"""Tests for export/data/: CSV validation, split protocols, scaling and windows."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from export.data import (
    ETT_DIR,
    DataError,
    Dataset,
    Split,
    StandardScaler,
    load_csv,
    load_dataset,
)

ETTH1_SHA256 = "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066"
ETTH2_SHA256 = "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b"
ETT_COLUMNS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def synthetic_csv(
    tmp_path: Path, n: int, freq: str = "1h", name: str = "data.csv", columns: tuple[str, ...] = ("a", "OT")
) -> Path:
    """A regular series of ``n`` rows with distinct, deterministic values per column."""
    stamps = pd.date_range("2020-01-01", periods=n, freq=freq)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({c: rng.normal(loc=i, scale=i + 1, size=n) for i, c in enumerate(columns)})
    frame.insert(0, "date", stamps.strftime("%Y-%m-%d %H:%M:%S"))
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def good_rows(n: int = 5) -> list[str]:
    return [f"2016-07-01 {h:02d}:00:00,{h}.5,{10 + h}" for h in range(n)]


@pytest.fixture(scope="module")
def etth1() -> Dataset:
    return load_dataset(ETT_DIR / "ETTh1.csv", input_length=96, horizon=96, mode="M")


@pytest.fixture(scope="module")
def etth1_frame() -> pd.DataFrame:
    return pd.read_csv(ETT_DIR / "ETTh1.csv")


# --------------------------------------------------------------------------------------------------
# bundled ETT files
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "digest"), [("ETTh1.csv", ETTH1_SHA256), ("ETTh2.csv", ETTH2_SHA256)])
def test_bundled_files_are_verbatim(name: str, digest: str) -> None:
    path = ETT_DIR / name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert digest in (ETT_DIR / "README.md").read_text(encoding="utf-8")
    license_text = (ETT_DIR / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("Creative Commons Attribution-NoDerivatives 4.0")


def test_etth1_series(etth1: Dataset, etth1_frame: pd.DataFrame) -> None:
    series = etth1.series
    assert series.name == "ETTh1"
    assert series.sha256 == ETTH1_SHA256
    assert series.columns == ETT_COLUMNS
    assert series.values.shape == (17420, 7)
    assert series.values.dtype == np.float64
    np.testing.assert_array_equal(series.values, etth1_frame[ETT_COLUMNS].to_numpy(np.float64))
    assert series.timestamps.dtype == np.dtype("datetime64[ns]")
    assert series.timestamps[0] == np.datetime64("2016-07-01T00:00:00")
    assert series.timestamps[-1] == np.datetime64("2018-06-26T19:00:00")
    assert series.frequency == "1h"
    assert series.frequency_seconds == 3600


def test_etth1_borders_and_windows(etth1: Dataset) -> None:
    assert etth1.protocol == "ett-hour"
    assert etth1.mode == "M"
    assert etth1.target == "OT"
    assert etth1.channels == ETT_COLUMNS
    assert etth1.borders == {"train": (0, 8640), "val": (8640 - 96, 11520), "test": (11520 - 96, 14400)}
    assert etth1.train.num_windows == 8640 - 96 - 96 + 1 == 8449
    assert etth1.val.num_windows == (11520 - 8544) - 192 + 1 == 2785
    assert etth1.test.num_windows == 2785
    expected_ranges = [(etth1.train, (0, 8640)), (etth1.val, (8544, 11520)), (etth1.test, (11424, 14400))]
    for split, (start, end) in expected_ranges:
        assert split.data.shape == (end - start, 7)
        assert split.data.dtype == np.float32
        np.testing.assert_array_equal(split.timestamps, etth1.series.timestamps[start:end])
        expected = etth1.scaler.transform(etth1.series.values[start:end]).astype(np.float32)
        np.testing.assert_array_equal(split.data, expected)


def test_etth1_scaler_fit_on_train_rows(etth1: Dataset, etth1_frame: pd.DataFrame) -> None:
    train = etth1_frame[ETT_COLUMNS].iloc[:8640]
    np.testing.assert_allclose(etth1.scaler.mean, train.mean().to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(etth1.scaler.std, train.std(ddof=0).to_numpy(), rtol=1e-12)
    data = etth1.train.data.astype(np.float64)
    np.testing.assert_allclose(data.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(data.std(axis=0), 1.0, atol=1e-5)


def test_etth1_windows_match_manual_slices(etth1: Dataset) -> None:
    for split in (etth1.train, etth1.val, etth1.test):
        idx = np.array([0, 1, 17, split.num_windows // 2, split.num_windows - 1])
        x, y = split.windows(idx)
        assert x.shape == (len(idx), 96, 7)
        assert y.shape == (len(idx), 96, 7)
        assert x.dtype == torch.float32
        assert y.dtype == torch.float32
        for k, i in enumerate(idx):
            np.testing.assert_array_equal(x[k].numpy(), split.data[i : i + 96])
            np.testing.assert_array_equal(y[k].numpy(), split.data[i + 96 : i + 192])
        # a torch index gives the same result
        x_t, y_t = split.windows(torch.from_numpy(idx))
        assert torch.equal(x_t, x)
        assert torch.equal(y_t, y)


def test_etth1_first_test_window_input_reaches_into_val(etth1: Dataset) -> None:
    # the first test target row is row 11520, the first row after the validation range
    _x, y = etth1.test.windows(np.array([0]))
    expected = etth1.scaler.transform(etth1.series.values[11520:11616]).astype(np.float32)
    np.testing.assert_array_equal(y[0].numpy(), expected)


def test_etth1_univariate(etth1: Dataset) -> None:
    ds = load_dataset(ETT_DIR / "ETTh1.csv", input_length=96, horizon=24, mode="S")
    assert ds.channels == ["OT"]
    assert ds.train.data.shape == (8640, 1)
    assert ds.borders == etth1.borders
    ot = ETT_COLUMNS.index("OT")
    assert ds.scaler.mean[0] == pytest.approx(etth1.scaler.mean[ot], rel=1e-12)
    assert ds.scaler.std[0] == pytest.approx(etth1.scaler.std[ot], rel=1e-12)
    x, y = ds.test.windows(np.array([3]))
    assert x.shape == (1, 96, 1)
    assert y.shape == (1, 24, 1)


def test_ett_protocol_needs_enough_rows(tmp_path: Path) -> None:
    path = synthetic_csv(tmp_path, 1000, name="ETTh1.csv")
    with pytest.raises(DataError, match=r"ett-hour.*14400 rows"):
        load_dataset(path, 24, 24)
    # the ratio protocol can still be asked for explicitly
    assert load_dataset(path, 24, 24, protocol="ratio-70-10-20").protocol == "ratio-70-10-20"


# --------------------------------------------------------------------------------------------------
# ratio protocol, frequency, timestamp column detection
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1000, 1003, 457])
def test_ratio_protocol_borders(tmp_path: Path, n: int) -> None:
    L, H = 48, 12
    ds = load_dataset(synthetic_csv(tmp_path, n), L, H)
    num_train, num_test = int(n * 0.7), int(n * 0.2)
    num_val = n - num_train - num_test
    assert ds.protocol == "ratio-70-10-20"
    assert ds.borders == {
        "train": (0, num_train),
        "val": (num_train - L, num_train + num_val),
        "test": (n - num_test - L, n),
    }
    assert ds.train.num_windows == num_train - L - H + 1
    assert ds.val.num_windows == num_val - H + 1
    assert ds.test.num_windows == num_test - H + 1
    assert ds.channels == ["a", "OT"]
    # scaler: training rows only
    train = ds.series.values[:num_train]
    np.testing.assert_allclose(ds.scaler.mean, train.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ds.scaler.std, train.std(axis=0), rtol=1e-12)
    assert not np.allclose(ds.scaler.mean, ds.series.values.mean(axis=0), rtol=1e-12)


@pytest.mark.parametrize(
    ("freq", "alias", "seconds"),
    [
        ("1h", "1h", 3600),
        ("15min", "15min", 900),
        ("1D", "1D", 86400),
        ("30s", "30s", 30),
        ("2h", "2h", 7200),
    ],
)
def test_frequency_inference(tmp_path: Path, freq: str, alias: str, seconds: float) -> None:
    series = load_csv(synthetic_csv(tmp_path, 50, freq=freq))
    assert series.frequency == alias
    assert series.frequency_seconds == seconds
    assert pd.Timedelta(series.frequency).total_seconds() == seconds


@pytest.mark.parametrize(
    ("pandas_freq", "alias", "months"),
    [("MS", "1MS", 1), ("ME", "1ME", 1), ("QS", "3MS", 3), ("QE", "3ME", 3), ("YS", "12MS", 12)],
)
def test_calendar_frequencies_are_months_not_fixed_days(
    tmp_path: Path, pandas_freq: str, alias: str, months: int
) -> None:
    """Monthly, quarterly and yearly data step whole months (they were stored as 31D, 92D, 365D), in an
    alias pandas itself reads back to the same dates; frequency_seconds is the nominal mean step."""
    stamps = pd.date_range(
        "2001-01-01" if pandas_freq.endswith("S") else "2001-01-31", periods=30, freq=pandas_freq
    )
    rows = [f"{t.date()},{i}" for i, t in enumerate(stamps)]
    series = load_csv(write_csv(tmp_path / f"{pandas_freq}.csv", "date,value", rows))
    assert series.frequency == alias
    assert series.frequency_seconds == pytest.approx(months * 365.2425 * 86_400 / 12)
    again = pd.date_range(stamps[0], periods=len(stamps), freq=series.frequency)
    assert list(again) == list(stamps)


def test_a_cycle_is_refused_for_calendar_data(tmp_path: Path) -> None:
    """A cycle's phase counts fixed steps: monthly data gets none ("auto" finds none, a number is
    refused), while the REM heads still follow the data's year (θ = 2π/12)."""
    from export.train import TrainConfig, resolve_auto

    stamps = pd.date_range("1990-01-01", periods=120, freq="MS")
    rows = [f"{t.date()},{np.sin(i)}" for i, t in enumerate(stamps)]
    csv = write_csv(tmp_path / "monthly.csv", "date,value", rows)
    ds = load_dataset(csv, input_length=12, horizon=3, target="value")
    shape = {"input_length": 12, "horizon": 3}
    cfg = TrainConfig(data=str(csv), model={**shape, "cycle_period": 12})
    with pytest.raises(ValueError, match=r"calendar months \(1MS\).*cycle_period to 0"):
        resolve_auto(cfg, ds)
    auto = dataclasses.replace(cfg, model={**shape, "cycle_period": "auto", "theta_init": "auto"})
    resolved = resolve_auto(auto, ds).model
    assert resolved["cycle_period"] == 0 and resolved["theta_init"] == pytest.approx(2 * np.pi / 12)
    fixed = dataclasses.replace(cfg, model={**shape, "cycle_period": 0})
    assert resolve_auto(fixed, ds).model["cycle_period"] == 0


def test_missing_steps_are_refused_with_their_lines_or_inserted_and_filled(tmp_path: Path) -> None:
    """A gap in the grid is an error naming its lines and the fix; with a fill the missing steps become
    rows, filled, so that every later row keeps its true time."""
    stamps = list(pd.date_range("2020-01-01", periods=20, freq="15min"))
    del stamps[5:8]  # a gap of three steps
    rows = [f"{t},{i}" for i, t in enumerate(stamps)]
    path = write_csv(tmp_path / "gap.csv", "date,v", rows)
    with pytest.raises(DataError) as info:
        load_csv(path)
    assert str(info.value) == (
        "gap.csv: 3 step(s) of 15min have no row (the series steps 15min, its most common step): "
        "2020-01-01 01:15:00 to 2020-01-01 01:45:00 (between lines 6 and 7). Every later row would be taken "
        "for an earlier step; add rows for them, or pass --fill linear, ffill or zero (config: fill) to "
        "insert them and fill their values"
    )
    series = load_csv(path, fill="linear")
    assert series.frequency == "15min" and series.frequency_seconds == 900 and series.inserted_steps == 3
    np.testing.assert_array_equal(series.timestamps, pd.date_range("2020-01-01", periods=20, freq="15min"))
    np.testing.assert_allclose(series.values[3:10, 0], [3, 4, 4.25, 4.5, 4.75, 5, 6])
    assert series.notes == (
        "3 missing step(s) of 15min inserted as rows and filled (linear): 2020-01-01 01:15:00 to "
        "2020-01-01 01:45:00 (between lines 6 and 7); the longest gap was 3 step(s)",
    )
    np.testing.assert_allclose(load_csv(path, fill="ffill").values[4:9, 0], [4, 4, 4, 4, 5])


def test_rows_off_the_grid_are_refused(tmp_path: Path) -> None:
    stamps = list(pd.date_range("2020-01-01", periods=12, freq="h"))
    stamps[6] += pd.Timedelta(minutes=17)
    path = write_csv(tmp_path / "off.csv", "date,v", [f"{t},{i}" for i, t in enumerate(stamps)])
    for fill in ("none", "linear"):  # no fill can put a row on the grid
        with pytest.raises(
            DataError,
            match=r"off\.csv line 8: timestamp 2020-01-01 06:17:00 is not a whole number of steps of 1h "
            r".*, nor are 1 other rows; the rows must lie on one regular grid",
        ):
            load_csv(path, fill=fill)


def test_daily_dates_without_time(tmp_path: Path) -> None:
    rows = [f"2021-03-{d:02d},{d}" for d in range(1, 11)]
    series = load_csv(write_csv(tmp_path / "daily.csv", "day,value", rows))  # first column by parsing
    assert series.columns == ["value"]
    assert series.frequency == "1D"
    assert series.frequency_seconds == 86400


def test_timestamp_column_by_name_anywhere(tmp_path: Path) -> None:
    rows = [f"{i},2020-01-01 0{i}:00:00,{i * 2}" for i in range(5)]
    series = load_csv(write_csv(tmp_path / "x.csv", "a,TimeStamp,b", rows))
    assert series.columns == ["a", "b"]
    np.testing.assert_array_equal(series.values, [[i, i * 2] for i in range(5)])


def test_timestamp_column_given(tmp_path: Path) -> None:
    rows = [f"{i},2020-01-01 0{i}:00:00,{i * 2}" for i in range(5)]
    path = write_csv(tmp_path / "x.csv", "a,when,b", rows)
    series = load_csv(path, timestamp_column="when")
    assert series.columns == ["a", "b"]
    with pytest.raises(DataError, match=r"x\.csv line 1, column 'nope': no such timestamp column"):
        load_csv(path, timestamp_column="nope")


def test_crlf_bom_and_blank_trailing_lines(tmp_path: Path) -> None:
    path = tmp_path / "win.csv"
    path.write_bytes(b"\xef\xbb\xbfdate,v\r\n2020-01-01 00:00:00,1\r\n2020-01-01 01:00:00,2\r\n\r\n")
    series = load_csv(path)
    assert series.columns == ["v"]
    assert series.values[:, 0].tolist() == [1.0, 2.0]
    assert series.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    bad = tmp_path / "winbad.csv"
    bad.write_bytes(b"date,v\r\n2020-01-01 00:00:00,1\r\n2020-01-01 01:00:00,\r\n")
    with pytest.raises(DataError, match=r"line 3, column 'v': missing value"):
        load_csv(bad)


def test_timezone_offsets_are_converted_to_utc(tmp_path: Path) -> None:
    rows = ["2020-01-01T02:00:00+02:00,1", "2020-01-01T01:00:00+00:00,2", "2020-01-01T04:00:00+02:00,3"]
    series = load_csv(write_csv(tmp_path / "tz.csv", "date,v", rows))
    assert series.timestamps[0] == np.datetime64("2020-01-01T00:00:00")
    assert series.frequency == "1h"


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
# StandardScaler and Split
# --------------------------------------------------------------------------------------------------


def test_scaler_constant_column_and_round_trip() -> None:
    x = np.array([[0.1, 1.0], [0.1, 2.0], [0.1, 4.0]])
    scaler = StandardScaler().fit(x)
    assert scaler.std[0] == 1.0
    z = scaler.transform(x)
    np.testing.assert_array_equal(z[:, 0], 0.0)
    np.testing.assert_allclose(z[:, 1].mean(), 0.0, atol=1e-12)
    np.testing.assert_allclose(z[:, 1].std(), 1.0)
    np.testing.assert_allclose(scaler.inverse_transform(z), x)
    # dtype preserved for float32, extra leading dims broadcast
    z32 = scaler.transform(x.astype(np.float32)[None])
    assert z32.dtype == np.float32
    assert z32.shape == (1, 3, 2)
    restored = StandardScaler.from_dict(scaler.to_dict())
    np.testing.assert_array_equal(restored.mean, scaler.mean)
    np.testing.assert_array_equal(restored.std, scaler.std)
    with pytest.raises(ValueError, match="last dimension 2"):
        scaler.transform(np.zeros((3, 3)))
    with pytest.raises(RuntimeError, match="not fitted"):
        StandardScaler().transform(x)


def test_split_windows_bounds() -> None:
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    split = Split("val", data, np.arange(10).astype("datetime64[h]"), input_length=3, horizon=2)
    assert split.num_windows == 6
    x, y = split.windows(np.arange(6))
    assert x[-1, :, 0].tolist() == [10.0, 12.0, 14.0]
    assert y[-1, :, 0].tolist() == [16.0, 18.0]
    assert x.is_contiguous()
    assert y.is_contiguous()
    for bad in ([6], [-1]):
        with pytest.raises(IndexError, match=r"\[0, 6\)"):
            split.windows(np.array(bad))
    x0, y0 = split.windows(np.array([], dtype=np.int64))
    assert x0.shape == (0, 3, 2)
    assert y0.shape == (0, 2, 2)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(2, 40),
    channels=st.integers(1, 3),
    length=st.integers(1, 10),
    horizon=st.integers(1, 10),
    data=st.data(),
)
def test_windows_equal_manual_slicing(
    rows: int, channels: int, length: int, horizon: int, data: st.DataObject
) -> None:
    L, H = length, horizon
    values = np.random.default_rng(rows).normal(size=(rows, channels)).astype(np.float32)
    split = Split("train", values, np.arange(rows).astype("datetime64[m]"), input_length=L, horizon=H)
    assert split.num_windows == max(0, rows - L - H + 1)
    if split.num_windows == 0:
        return
    idx = np.array(data.draw(st.lists(st.integers(0, split.num_windows - 1), min_size=1, max_size=8)))
    x, y = split.windows(idx)
    for k, i in enumerate(idx):
        np.testing.assert_array_equal(x[k].numpy(), values[i : i + L])
        np.testing.assert_array_equal(y[k].numpy(), values[i + L : i + L + H])


def test_sub_second_frequency_keeps_its_fraction() -> None:
    from export.data import _infer_frequency

    stamps = np.array([0, 250_000_000, 500_000_000, 750_000_000], dtype="datetime64[ns]")
    assert _infer_frequency(stamps) == ("250ms", 0.25)


def _hourly(n: int, start: str = "2021-01-01") -> list[pd.Timestamp]:
    return list(pd.date_range(start, periods=n, freq="h"))


def test_semicolons_and_decimal_commas_are_detected_and_said(tmp_path: Path) -> None:
    rows = [f"{t};{i},5;{2 * i},25" for i, t in enumerate(_hourly(12))]
    series = load_csv(write_csv(tmp_path / "export.csv", "date;load;price", rows))
    assert series.columns == ["load", "price"]
    np.testing.assert_allclose(series.values[3], [3.5, 6.25])
    assert series.notes == ("delimiter ';' detected", "decimal commas were read as decimal points")


def test_a_text_column_is_named_with_the_flag_that_leaves_it_out(tmp_path: Path) -> None:
    rows = [f"{t},{i},site-{i % 2}" for i, t in enumerate(_hourly(12))]
    path = write_csv(tmp_path / "mixed.csv", "date,value,site", rows)
    with pytest.raises(DataError, match=r"column 'site': not a number: 'site-0' \(.*--drop site\)"):
        load_csv(path)
    assert load_csv(path, drop=["site"]).columns == ["value"]
    assert load_csv(path, keep=["value"]).columns == ["value"]  # or name the ones to use
    with pytest.raises(DataError, match=r"cannot drop \['nope'\]: no such column"):
        load_csv(path, drop=["nope"])
    with pytest.raises(DataError, match=r"cannot keep \['nope'\]: no such column"):
        load_csv(path, keep=["nope"])


def test_missing_values_are_refused_unless_a_fill_is_asked_for(tmp_path: Path) -> None:
    values = ["1", "2", "", "4", "NA", "NA", "7", "8", "9", "10"]
    rows = [f"{t},{v}" for t, v in zip(_hourly(10), values, strict=True)]
    path = write_csv(tmp_path / "gaps.csv", "date,v", rows)
    with pytest.raises(
        DataError, match=r"gaps\.csv line 4, column 'v': missing value; fill gaps with --fill"
    ):
        load_csv(path)
    linear = load_csv(path, fill="linear")
    np.testing.assert_allclose(linear.values[:, 0], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert linear.notes == ("3 missing value(s) filled (linear)",)
    np.testing.assert_allclose(load_csv(path, fill="ffill").values[:, 0], [1, 2, 2, 4, 4, 4, 7, 8, 9, 10])
    with pytest.raises(DataError, match="fill must be one of"):
        load_csv(path, fill="mean")
    text = write_csv(
        tmp_path / "text.csv", "date,v", [f"{t},{v}" for t, v in zip(_hourly(3), "1a3", strict=True)]
    )
    with pytest.raises(DataError, match="not a number: 'a'"):  # text is never "missing", fill or not
        load_csv(text, fill="linear")


def test_time_zone_offsets_are_converted_to_utc_and_said(tmp_path: Path) -> None:
    rows = [
        f"{t.isoformat()},{i}"
        for i, t in enumerate(pd.date_range("2021-03-27", periods=48, freq="h", tz="Europe/Berlin"))
    ]
    series = load_csv(write_csv(tmp_path / "dst.csv", "time,v", rows))
    assert "timestamps with UTC offsets were converted to UTC" in series.notes
    assert series.frequency == "1h"  # across the DST change: hours in UTC stay one apart


def test_too_few_rows_names_the_flags(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "short.csv", "date,v", [f"{t},{i}" for i, t in enumerate(_hourly(30))])
    with pytest.raises(DataError, match=r"--input-length, --horizon"):
        load_dataset(path, 24, 12)


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


def test_bare_years_with_the_column_named(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "y.csv", "year,gdp", [f"{y},{i}" for i, y in enumerate(range(2017, 2020))])
    series = load_csv(path, timestamp_column="year")
    assert series.frequency == "12MS"  # three years without a leap day are still years, not 365D


def test_thousands_separators_are_named_not_taken_for_text(tmp_path: Path) -> None:
    cells = ["577.92", '"1,577.92"', "12.5", '"2,001.00"', "3"]
    rows = [f"{t},{c}" for t, c in zip(_hourly(5), cells, strict=True)]
    with pytest.raises(DataError) as info:
        load_csv(write_csv(tmp_path / "sales.csv", "date,sales", rows))
    assert str(info.value) == (
        "sales.csv line 3, column 'sales': not a number: '1,577.92': thousands separators (',') are not "
        "read; write the column's numbers without them (1577.92) (and 1 more in this column)"
    )
    assert "--drop" not in str(info.value)  # never suggest leaving out what may be the target
    semicolons = [f"{t};{c}" for t, c in zip(_hourly(3), ["1.577,92", "3,5", "4"], strict=True)]
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
