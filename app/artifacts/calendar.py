"""Calendar frequencies: stepping whole months from a stamp on a month's first or last day.

Monthly, quarterly and yearly data step by months, not by a fixed number of seconds: after 2009-07-01 a
quarter later is 2009-10-01, which no fixed step of days gives every time. The manifest says so with a
`frequency` of the form `CALENDAR_FREQUENCY` (`3MS`: every 3 months, on the 1st), and the service steps
forecast timestamps with the calendar. Plain datetime arithmetic: the serving image has no pandas.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime

from app.artifacts.contract import CALENDAR_FREQUENCY


@dataclass(frozen=True)
class CalendarStep:
    months: int
    month_end: bool  # stamps on the last day of the month ("ME"), else on the first ("MS")

    @property
    def anchor(self) -> str:
        return "the last day of a month" if self.month_end else "the first day of a month"

    def on_anchor(self, when: datetime) -> bool:
        last = calendar.monthrange(when.year, when.month)[1]
        return when.day == (last if self.month_end else 1)

    def advance(self, when: datetime, steps: int) -> datetime:
        """`when` (on the anchor) moved `steps` x `months` months, on the same anchor and time of day.
        OverflowError past year 9999."""
        index = when.year * 12 + when.month - 1 + steps * self.months
        year, month = divmod(index, 12)
        if not 1 <= year <= 9999:
            raise OverflowError(f"year {year} is out of range")
        day = calendar.monthrange(year, month + 1)[1] if self.month_end else 1
        return when.replace(year=year, month=month + 1, day=day)


def calendar_step(frequency: str | None) -> CalendarStep | None:
    """The calendar step a manifest's `frequency` names, or None for a fixed step."""
    match = CALENDAR_FREQUENCY.fullmatch(frequency or "")
    if match is None:
        return None
    return CalendarStep(months=int(match["months"]), month_end=match["anchor"] == "E")
