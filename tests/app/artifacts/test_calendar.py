"""Calendar frequencies: whole months from a month's first or last day, and a manifest that says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.artifacts.calendar import CalendarStep, calendar_step


def test_the_alias_names_months_and_anchor() -> None:
    assert calendar_step("3MS") == CalendarStep(3, month_end=False)
    assert calendar_step("12MS") == CalendarStep(12, month_end=False)
    assert calendar_step("1ME") == CalendarStep(1, month_end=True)
    for fixed in (None, "1h", "92D", "7D", "0MS", "MS", "3QS", "1min"):
        assert calendar_step(fixed) is None, fixed


def test_quarters_years_and_month_ends_land_on_the_calendar() -> None:
    q = CalendarStep(3, month_end=False)
    start = datetime(2009, 7, 1, tzinfo=UTC)
    assert [q.advance(start, k) for k in range(1, 5)] == [
        datetime(2009, 10, 1, tzinfo=UTC),
        datetime(2010, 1, 1, tzinfo=UTC),
        datetime(2010, 4, 1, tzinfo=UTC),
        datetime(2010, 7, 1, tzinfo=UTC),
    ]
    y = CalendarStep(12, month_end=False)
    assert y.advance(datetime(2008, 1, 1), 1) == datetime(2009, 1, 1)  # not 2008-12-20 (365 days × …)
    m = CalendarStep(1, month_end=True)
    jan = datetime(2024, 1, 31, 6, 30, tzinfo=timezone(timedelta(hours=2)))
    ends = [m.advance(jan, k) for k in range(1, 4)]
    assert [(d.month, d.day) for d in ends] == [(2, 29), (3, 31), (4, 30)]  # 2024 is a leap year
    assert all(d.hour == 6 and d.minute == 30 and d.utcoffset() == timedelta(hours=2) for d in ends)
    assert m.on_anchor(datetime(2023, 2, 28)) and not m.on_anchor(datetime(2024, 2, 28))
    assert q.on_anchor(start) and not q.on_anchor(datetime(2009, 7, 2))
    with pytest.raises(OverflowError):
        y.advance(datetime(9999, 1, 1), 1)
