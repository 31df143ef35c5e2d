"""Dates as people write them, each form with the step of a column written so (month starts unless said):
what tests/client/test_written_dates.py and tests/batch/test_written_times.py read through the client and
the batch scorer, against the exporter's reading of the same text in a file."""

from __future__ import annotations

FORMS = {
    "ISO": lambda t: t.date().isoformat(),
    "Jan 2015": lambda t: f"{t:%b %Y}",
    "2015 Jan": lambda t: f"{t:%Y %b}",
    "Jan-15": lambda t: f"{t:%b-%y}",
    "2015Q1": lambda t: f"{t.year}Q{t.quarter}",
    "Q1 2015": lambda t: f"Q{t.quarter} {t.year}",
    "13/01/2015": lambda t: f"{t:%d/%m/%Y}",  # day-first, days above 12 decide it
    "1991 W06": lambda t: f"{t.isocalendar().year} W{t.isocalendar().week:02d}",
    # R's time() of a monthly and a quarterly ts, to R's 15 significant digits (fpp2's a10 and ausbeer)
    "1991.58333333333": lambda t: f"{t.year + (t.month - 1) / 12:.15g}",
    "1956.25": lambda t: f"{t.year + (t.month - 1) / 12:.15g}",
}
STEPS = {"2015Q1": "QS", "Q1 2015": "QS", "13/01/2015": "D", "1991 W06": "W-MON", "1956.25": "QS"}
