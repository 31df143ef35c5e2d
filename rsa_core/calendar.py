"""Calendar frequencies: stepping whole months from a stamp on a month's first or last day.

Monthly, quarterly and yearly data step by months, not by a fixed number of seconds: after 2009-07-01 a
quarter later is 2009-10-01, which no fixed step of days gives every time. A model's manifest says so with
a `frequency` of the form `CALENDAR_FREQUENCY` (`3MS`: every 3 months, on the 1st), and every path steps
forecast timestamps with the calendar (`rsa_core.steps`). Plain datetime arithmetic: no pandas.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime

__all__ = ["CALENDAR_FREQUENCY", "CalendarStep", "calendar_step"]

# A frequency of whole calendar months, N months apart, stamped on the first day of the month
# ("MS") or on its last ("ME"), as pandas writes them: monthly "1MS", quarterly "3MS", yearly "12MS".
# Any other frequency is a fixed step of `frequency_seconds`.
CALENDAR_FREQUENCY = re.compile(r"(?P<months>[1-9][0-9]*)M(?P<anchor>[SE])")


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
