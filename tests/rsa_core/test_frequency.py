"""rsa_core.frequency: a series' frequency from its timestamps (the gaps decide; zoned days and months on
the wall clock across daylight saving), from a pandas/TimeGPT alias, or assumed from a start alone; and
the paths that read a frequency (the exporter's file reader, the client's `forecast(df)` without a model,
the service's `POST /v1/forecast`) call these functions, not copies of them."""

from __future__ import annotations

import inspect
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest
from rsa_client import Client

import app.protocols.rsa_v1.zero_shot
import export.data.panels
import export.data.reading
import export.data.timestamps
import rsa_core.frequency
from rsa_core.frequency import (
    Frequency,
    frequency_name,
    infer_frequency,
    infer_step,
    off_grid,
    parse_alias,
    read_start,
)

BERLIN = "Europe/Berlin"


@pytest.mark.parametrize(
    ("freq", "start", "alias", "name", "pandas"),
    [
        ("MS", "2019-01-01", "1MS", "monthly", "MS"),
        ("ME", "2019-01-31", "1ME", "monthly", "ME"),
        ("QS", "2019-01-01", "3MS", "quarterly", "QS"),
        ("QS-OCT", "2019-10-01", "3MS", "quarterly", "QS"),
        ("QE", "2019-03-31", "3ME", "quarterly", "QE"),
        ("YS", "2001-01-01", "12MS", "yearly", "YS"),
        ("YE", "2001-12-31", "12ME", "yearly", "YE"),
        ("W-SUN", "2019-01-06", "7D", "weekly", "W"),
        ("D", "2019-01-01", "1D", "daily", "D"),
        ("h", "2019-01-01", "1h", "hourly", "h"),
        ("15min", "2019-01-01", "15min", None, "15min"),
        ("2MS", "2019-01-01", "2MS", None, "2MS"),
    ],
)
@pytest.mark.parametrize("tz", [None, "UTC", BERLIN, "Australia/Sydney"])
def test_the_gaps_of_pandas_ranges_decide(
    freq: str, start: str, alias: str, name: str | None, pandas: str, tz: str | None
) -> None:
    """Every pandas range of the frequency, naive or zoned (Berlin and Sydney cross daylight saving over
    these ranges), as a DatetimeIndex, a Series and stdlib datetimes."""
    index = pd.date_range(start, periods=40, freq=freq, tz=tz)
    for times in (index, pd.Series(index), list(index.to_pydatetime())):
        found = infer_frequency(times)
        assert found is not None and (found.alias, found.name, found.freq) == (alias, name, pandas), times
        assert off_grid(times, found) is None
    assert frequency_name(pandas) == name and parse_alias(pandas) == parse_alias(alias)


def test_zoned_month_starts_are_not_read_on_their_instants() -> None:
    """Berlin's month starts as UTC instants fall on the last day of the month before, at 22:00 or 23:00:
    judged there they step no calendar month (the most common gap, 31 days, wins); on the wall clock,
    monthly. Daily midnights step 23 and 25 hours across the changes: daily either way."""
    months = pd.date_range("2019-01-01", periods=24, freq="MS", tz=BERLIN)
    utc = months.tz_convert("UTC").tz_localize(None).to_numpy()
    assert infer_step(utc) == ("31D", 31 * 86_400.0)
    assert infer_frequency(months) == Frequency("1MS", rsa_core.frequency.MEAN_MONTH_S)
    days = pd.date_range("2019-03-20", periods=20, freq="D", tz=BERLIN)
    gaps = set(
        np.diff(days.tz_convert("UTC").tz_localize(None).to_numpy()).astype("timedelta64[h]").astype(int)
    )
    assert gaps == {23, 24} and infer_frequency(days).name == "daily"  # type: ignore[union-attr]


def test_hours_across_the_changes_step_on_the_instants() -> None:
    """An hourly zoned series repeats a wall-clock hour in autumn and skips one in spring: its instants
    step one hour throughout, and a missing hour is found."""
    for start in ("2019-03-30 12:00", "2019-10-26 12:00"):
        hours = pd.date_range(start, periods=48, freq="h", tz=BERLIN)
        found = infer_frequency(hours)
        assert found == Frequency("1h", 3600.0)
        assert off_grid(hours, found) is None and off_grid(hours.delete(30), found) == 30


def test_the_most_common_gap_wins_and_off_grid_names_the_first_row_off_it() -> None:
    quarters = pd.date_range("2001-01-01", periods=20, freq="QS")
    gappy = quarters.delete([4, 9])
    found = infer_frequency(gappy)
    assert found is not None and found.name == "quarterly" and off_grid(gappy, found) == 4
    assert off_grid(quarters[::-1], Frequency("3MS", 0.0)) == 1  # backwards
    odd_day = quarters.insert(3, pd.Timestamp("2001-08-15"))
    assert off_grid(odd_day, Frequency("3MS", 0.0)) == 3
    assert infer_frequency(quarters[:1]) is None
    with pytest.raises(ValueError, match="at least two"):
        infer_step(quarters[:1].to_numpy())


def test_aliases_by_base_and_multiple() -> None:
    assert [frequency_name(f) for f in ("M", "m", "BMS", "3MS", "Q", "QE-DEC", "A", "AS-JUL", "12ME")] == [
        "monthly",
        "monthly",
        "monthly",
        "quarterly",
        "quarterly",
        "quarterly",
        "yearly",
        "yearly",
        "yearly",
    ]
    assert [frequency_name(f) for f in ("H", "60min", "3600s", "24h", "1D", "7D", "W-MON")] == [
        "hourly",
        "hourly",
        "hourly",
        "daily",
        "daily",
        "weekly",
        "weekly",
    ]
    # `ms` is milliseconds, `S` seconds: never months; nothing else is an alias
    assert parse_alias("ms") == (0, 1e-3) and parse_alias("S") == (0, 1.0) and parse_alias("MS") == (1, 0.0)
    for bad in ("", "0MS", "fortnightly", "SMS", "-1h", "1.5h"):
        assert frequency_name(bad) is None
    assert parse_alias("fortnightly") is None and parse_alias("2MS") == (2, 0.0)


def test_a_start_alone_is_only_assumed() -> None:
    new_year = read_start(datetime(2020, 1, 1))
    assert new_year.assumed == "monthly" and new_year.ambiguous
    assert {"quarterly", "yearly"} <= set(new_year.fits)
    zoned = read_start(datetime(2020, 7, 1, tzinfo=ZoneInfo(BERLIN)))
    assert zoned.assumed == "monthly"  # its wall clock: midnight on the 1st
    assert read_start(datetime(2020, 1, 1, 13)).assumed == "hourly"
    assert read_start(datetime(2020, 1, 1) + timedelta(minutes=15)).assumed == "hourly"
    assert read_start(datetime(2020, 1, 17)).assumed is None


# (module, the name it reads a frequency by, the core's object)
ONE_RULE = [
    (export.data.timestamps, "_infer_frequency", rsa_core.frequency.infer_step),
    (export.data.panels, "_infer_frequency", rsa_core.frequency.infer_step),
    (export.data.reading, "_infer_frequency", rsa_core.frequency.infer_step),  # its _step_clock
    (app.protocols.rsa_v1.zero_shot, "infer_frequency", rsa_core.frequency.infer_frequency),
    (app.protocols.rsa_v1.zero_shot, "frequency_name", rsa_core.frequency.frequency_name),
    (app.protocols.rsa_v1.zero_shot, "read_start", rsa_core.frequency.read_start),
    (app.protocols.rsa_v1.zero_shot, "off_grid", rsa_core.frequency.off_grid),
    # the module that holds the client's forecast without a model, wherever it lives
    (inspect.getmodule(Client.forecast_pretrained), "infer_frequency", rsa_core.frequency.infer_frequency),
]


@pytest.mark.parametrize(
    ("module", "name", "core"), ONE_RULE, ids=[f"{m.__name__}.{n}" for m, n, _ in ONE_RULE]
)
def test_each_path_reads_a_frequency_by_the_cores_rule(module: object, name: str, core: object) -> None:
    assert getattr(module, name) is core


def test_no_path_keeps_a_copy_of_the_rule() -> None:
    """The copies this module replaced are gone: the exporter's month and gap readers, the client's
    median-step alias and the service's alias table."""
    for module, gone in (
        (export.data.timestamps, ("_calendar_frequency", "_most_common_step", "_FREQ_UNITS")),
        (app.protocols.rsa_v1.zero_shot, ("ALIASES", "frequency_of_alias", "frequency_of_start")),
        (inspect.getmodule(Client.forecast_pretrained), ("_step_alias",)),
    ):
        assert not [name for name in gone if hasattr(module, name)], module
