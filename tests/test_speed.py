"""The machine-speed helper the time-bounded tests scale by (tests/utils/speed.py)."""

from __future__ import annotations

from tests.utils import speed


def test_the_slowdown_is_measured_once_and_never_tightens_a_bound() -> None:
    s = speed.slowdown()
    assert 1.0 <= s <= speed.MAX_SLOWDOWN
    assert speed.slowdown() == s and speed.measured()  # once per session
    assert speed.scaled(2.0) == 2.0 * s >= 2.0
