"""Tests for export/data/: CSV validation, split protocols, scaling and windows (the reader's refusals:
test_data_refusals.py)."""

from __future__ import annotations

import dataclasses
import hashlib
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
from tests.utils.csv_files import hourly, synthetic_csv, write_csv

ETTH1_SHA256 = "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066"
ETTH2_SHA256 = "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b"
ETT_COLUMNS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]


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


def test_semicolons_and_decimal_commas_are_detected_and_said(tmp_path: Path) -> None:
    rows = [f"{t};{i},5;{2 * i},25" for i, t in enumerate(hourly(12))]
    series = load_csv(write_csv(tmp_path / "export.csv", "date;load;price", rows))
    assert series.columns == ["load", "price"]
    np.testing.assert_allclose(series.values[3], [3.5, 6.25])
    assert series.notes == ("delimiter ';' detected", "decimal commas were read as decimal points")


def test_a_text_column_is_named_with_the_flag_that_leaves_it_out(tmp_path: Path) -> None:
    rows = [f"{t},{i},site-{i % 2}" for i, t in enumerate(hourly(12))]
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
    rows = [f"{t},{v}" for t, v in zip(hourly(10), values, strict=True)]
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
        tmp_path / "text.csv", "date,v", [f"{t},{v}" for t, v in zip(hourly(3), "1a3", strict=True)]
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
    path = write_csv(tmp_path / "short.csv", "date,v", [f"{t},{i}" for i, t in enumerate(hourly(30))])
    with pytest.raises(DataError, match=r"--input-length, --horizon"):
        load_dataset(path, 24, 12)
