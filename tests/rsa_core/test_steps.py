"""rsa_core's time rules on their own, on the cases that made copies disagree: fixed steps across both
daylight-saving changes (elapsed time, shown with each date's own offset), calendar months on the first and
the last day in UTC and on a zone's wall clock, steps back, the year-9999 edge, naive times read across the
autumn repeat and the spring gap, and a future table's rows against the steps a forecast reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from rsa_core.calendar import CalendarStep, calendar_step
from rsa_core.future import FutureProblem, future_rows_problem
from rsa_core.steps import forecast_timestamps, shifted, steps_after
from rsa_core.wallclock import localize

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3600.0


def utc64(when: datetime, unit: str = "us") -> np.datetime64:
    """An aware datetime as a naive-UTC datetime64."""
    return np.datetime64(when.astimezone(UTC).replace(tzinfo=None), unit)


@pytest.mark.parametrize(
    ("start", "shown"),
    [
        # spring: +01:00 until 02:00, when the clocks jump to 03:00 (+02:00)
        (datetime(2023, 3, 26, 0, 0, tzinfo=BERLIN), ["01:00:00+01:00", "03:00:00+02:00", "04:00:00+02:00"]),
        # autumn: +02:00 until 03:00, when the clocks go back to 02:00 (+01:00): 02:00 is shown twice
        (datetime(2023, 10, 29, 0, 0, tzinfo=BERLIN), ["01:00:00+02:00", "02:00:00+02:00", "02:00:00+01:00"]),
    ],
    ids=["spring", "autumn"],
)
def test_an_hourly_forecast_across_a_change_steps_elapsed_hours(start: datetime, shown: list[str]) -> None:
    got = forecast_timestamps(start, 1, 3, HOUR, None, BERLIN)
    assert [t.isoformat() for t in got] == [f"{start.date().isoformat()}T{s}" for s in shown]
    instants = [start.astimezone(UTC), *(t.astimezone(UTC) for t in got)]
    assert all(b - a == timedelta(hours=1) for a, b in pairwise(instants))


@pytest.mark.parametrize("unit", ["s", "us", "ns"])
def test_fixed_steps_on_arrays_are_the_datetime_rule_in_any_unit(unit: str) -> None:
    starts = [datetime(2023, 3, 25, 22, 0, tzinfo=BERLIN), datetime(2023, 10, 28, 23, 30, tzinfo=BERLIN)]
    last = np.array([utc64(s, unit) for s in starts])
    got = steps_after(last, 6, 1800.0)
    assert got.dtype == last.dtype
    for i, s in enumerate(starts):
        want = forecast_timestamps(s, 1, 6, 1800.0, None, BERLIN)
        assert [utc64(w, unit) for w in want] == list(got[i])


@pytest.mark.parametrize("frequency", ["1MS", "3MS", "12MS", "1ME", "3ME"])
def test_calendar_steps_in_utc_are_calendarstep_advance(frequency: str) -> None:
    months = calendar_step(frequency)
    assert months is not None
    day = 31 if months.month_end else 1
    stamps = []
    for year, month in [(2019, 11), (2020, 1), (2023, 12), (1999, 2)]:
        first = datetime(year, month, 1, 5, 30, tzinfo=UTC)
        last_day = (first.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
        stamps.append(first.replace(day=min(day, last_day.day)))
    got = shifted(np.array([utc64(s) for s in stamps]), [-2, 1, 2, 3, 13], 0.0, months)
    for i, s in enumerate(stamps):
        want = [utc64(months.advance(s, k)) for k in (-2, 1, 2, 3, 13)]
        assert list(got[i]) == want


def test_a_month_end_step_lands_on_each_months_last_day() -> None:
    got = steps_after(np.array(["2020-01-31T05:00"], "datetime64[s]"), 4, 0.0, CalendarStep(1, True))
    assert [str(t) for t in got[0]] == [
        "2020-02-29T05:00:00",
        "2020-03-31T05:00:00",
        "2020-04-30T05:00:00",
        "2020-05-31T05:00:00",
    ]


def test_calendar_steps_in_a_zone_keep_the_wall_clock_across_daylight_saving() -> None:
    """Midnight on the 1st in Berlin is 23:00 UTC in winter and 22:00 UTC in summer."""
    start = datetime(2023, 1, 1, tzinfo=BERLIN)
    got = steps_after(np.array([utc64(start)]), 4, 0.0, CalendarStep(3, False), BERLIN)[0]
    want = ["2023-03-31T22:00:00", "2023-06-30T22:00:00", "2023-09-30T22:00:00", "2023-12-31T23:00:00"]
    assert [str(t.astype("datetime64[s]")) for t in got] == want
    assert [utc64(t) for t in forecast_timestamps(start, 1, 4, 0.0, CalendarStep(3, False), BERLIN)] == list(
        got
    )


@pytest.mark.parametrize("zone", [None, BERLIN])
def test_a_calendar_step_past_year_9999_overflows(zone: ZoneInfo | None) -> None:
    last = np.array(["9999-10-01T00:00"], "datetime64[us]")
    with pytest.raises(OverflowError, match="year 10000"):
        steps_after(last, 4, 0.0, CalendarStep(1, False), zone)
    assert str(steps_after(last, 2, 0.0, CalendarStep(1, False), None)[0, -1]) == "9999-12-01T00:00:00.000000"


def test_naive_times_are_read_across_the_autumn_repeat_in_order_and_the_spring_gap_flagged() -> None:
    stamps = np.array(
        [
            "2023-10-29T01:30",
            "2023-10-29T02:00",
            "2023-10-29T02:30",
            "2023-10-29T02:00",  # the clock has gone back: standard time now
            "2023-10-29T02:30",
            "2023-10-29T03:00",
            "2023-10-29T02:30",  # a new series: its first reading is summer time again
            "2023-03-26T02:30",  # a time the spring change skips
        ],
        "datetime64[ns]",
    )
    starts = np.array([True, False, False, False, False, False, True, True])
    utc, skipped = localize(stamps, "Europe/Berlin", starts)
    assert [str(t.astype("datetime64[m]")) for t in utc[:7]] == [
        "2023-10-28T23:30",
        "2023-10-29T00:00",
        "2023-10-29T00:30",
        "2023-10-29T01:00",
        "2023-10-29T01:30",
        "2023-10-29T02:00",
        "2023-10-29T00:30",
    ]
    assert skipped.tolist() == [False] * 7 + [True]


def test_a_future_tables_rows_are_exactly_the_steps_after_the_last_timestamp() -> None:
    want = steps_after(np.array(["2023-10-29T00:00"], "datetime64[ns]"), 3, HOUR)[0]
    assert future_rows_problem(want.copy(), want) is None
    assert future_rows_problem(None, want) == FutureProblem("missing", 0)
    assert future_rows_problem(want[:0], want) == FutureProblem("missing", 0)
    assert future_rows_problem(want[:2], want) == FutureProblem("count", 2)
    moved = want.copy()
    moved[2] += np.timedelta64(1, "h")
    assert future_rows_problem(moved, want) == FutureProblem("row", 3, 2)


@pytest.mark.parametrize(
    ("start", "step_s", "months", "zone"),
    [
        (datetime(2021, 3, 20, 0, 0, tzinfo=BERLIN), 86400.0, None, BERLIN),  # daily across spring forward
        (datetime(2021, 10, 30, 1, 30, tzinfo=BERLIN), 1800.0, None, BERLIN),  # half-hourly, autumn
        (datetime(2020, 1, 31, tzinfo=UTC), 0.0, CalendarStep(1, True), None),  # month ends
        (datetime(2020, 1, 1, tzinfo=BERLIN), 0.0, CalendarStep(3, False), BERLIN),  # quarters in a zone
        (datetime(2020, 1, 1, 0, 0), 3600.0, None, None),  # naive hourly
    ],
)
def test_a_values_time_depends_on_its_position_alone(
    start: datetime, step_s: float, months: CalendarStep | None, zone: ZoneInfo | None
) -> None:
    """What a backtest's windows rely on (app/protocols/rsa_v1/evaluation.py `_window_stamps`): the times
    of values t .. t + h − 1 are a slice of one longer list of times, for any first value t."""
    whole = forecast_timestamps(start, 3, 60, step_s, months, zone)
    for t in (3, 4, 17, 40):
        assert forecast_timestamps(start, t, 20, step_s, months, zone) == whole[t - 3 : t - 3 + 20]
