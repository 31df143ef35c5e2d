"""`export.panel train`'s default cycle by the series' step (without --period): half-hourly and
15-minute data got no cycle before (period 1, as fpp2's elecdemand would have been trained without its
day); steps finer than 15 minutes get none still, and the summary says which --period gives a day."""

from __future__ import annotations

import pytest

from export.global_models.cli import MAX_DAILY_STEPS, _cycle_note, period_of


@pytest.mark.parametrize(
    ("frequency", "period"),
    [
        ("1MS", 12),
        ("3ME", 4),
        ("12MS", 1),
        ("1D", 7),
        ("7D", 52),
        ("1h", 24),
        ("2h", 12),
        ("30min", 48),
        ("12h", 2),
        ("15min", 96),
        ("5min", 1),
        ("7min", 1),
        ("1min", 1),
        ("2D", 1),
    ],
)
def test_the_default_cycle_of_each_step(frequency: str, period: int) -> None:
    assert period_of(frequency) == period


def test_a_finer_step_is_told_the_period_of_its_day() -> None:
    (line,) = _cycle_note("5min", 1, None)
    assert "--period 288" in line and str(MAX_DAILY_STEPS) in line
    assert _cycle_note("5min", 1, 1) == []  # asked for: nothing to say
    assert _cycle_note("30min", 48, None) == [] and _cycle_note("7min", 1, None) == []  # 7 minutes: no day
