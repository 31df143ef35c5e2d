"""How many validation windows prediction intervals need, and which levels a given number can calibrate.

Split conformal (docs/intervals.md) takes, for level a, the ⌈(n + 1)·a⌉-th smallest of the n calibration
scores as the width. Two rules follow from that, applied by training (a warning, with the number) and by
the export (which calibrates only what they allow, and says so):

1. **A level needs its rank.** When ⌈(n + 1)·a⌉ > n there is no such order statistic: the width would be
   the largest residual seen, with no coverage guarantee (with 2 windows, the "99%" bound is the larger
   of two residuals). Such a level is not calibrated: 99% needs 99 windows, 95% 19, 90% 9, 80% 4, 50% 1
   (`min_windows`).
2. **Fewer than MIN_CALIBRATION_WINDOWS (30) windows: no intervals at all.** Given its n calibration
   scores, the coverage a split-conformal interval attains on new data is itself random: Beta(k, n + 1 − k)
   with k = ⌈(n + 1)·a⌉ (Vovk 2012; Angelopoulos & Bates 2021, §3.2). Its standard deviation
   (`coverage_spread`) at n = 30 is 7.0 points at 80%, 5.2 at 90% and 3.1 at 95%; at n = 15 (H = 96 on
   three years of daily data) 9.5 at 80% and 5.9 at 90% (95% has no rank there); at n = 4, 16.3 points
   at 80%. Below 30, what an "80%" interval covers depends more on which windows happened to calibrate
   it than on the level: not a number to publish. And windows of stride 1 overlap, so their scores are
   far from independent and the real spread is wider still: 30 is a floor, not a guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["MIN_CALIBRATION_WINDOWS", "calibration_plan", "coverage_spread", "min_windows"]

MIN_CALIBRATION_WINDOWS = 30


def _rank(n: int, level: float) -> int:
    """The order statistic split conformal takes for `level` (percent) out of n scores."""
    return math.ceil((n + 1) * level / 100 - 1e-9)  # the tolerance keeps (99 + 1)·0.99 at 99


def min_windows(level: float) -> int:
    """The fewest calibration windows whose conformal rank for `level` (percent) exists."""
    n = 1
    while _rank(n, level) > n:
        n += 1
    return n


def coverage_spread(n: int, level: float) -> float:
    """Standard deviation, in percentage points, of the coverage a split-conformal interval calibrated on
    n exchangeable scores attains on new data: that of Beta(k, n + 1 − k), k = ⌈(n + 1)·a⌉."""
    k = min(_rank(n, level), n)
    a, b = k, n + 1 - k
    return 100 * math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))


def calibration_plan(n: int, levels: Sequence[float]) -> tuple[list[float], str]:
    """The levels `n` validation windows can calibrate (none below MIN_CALIBRATION_WINDOWS), and a line
    saying what was calibrated from how many windows, or why not."""
    if n < MIN_CALIBRATION_WINDOWS:
        return [], (
            f"no prediction intervals: the validation split has {n} window(s), fewer than the "
            f"{MIN_CALIBRATION_WINDOWS} that calibration needs (with {max(n, 1)}, an 80% interval's coverage "
            f"on new data varies by ±{coverage_spread(max(n, 1), 80):.0f} points with the windows drawn; "
            "docs/intervals.md); use a shorter horizon or input length (--horizon, --input-length) or a "
            "longer file"
        )
    kept = [level for level in levels if min_windows(level) <= n]
    dropped = [level for level in levels if level not in kept]
    note = f"intervals at levels {', '.join(f'{v:g}' for v in kept)} calibrated on {n} validation windows"
    if dropped:
        needs = ", ".join(f"{v:g}% needs {min_windows(v)}" for v in dropped)
        note += f" (not {', '.join(f'{v:g}' for v in dropped)}: {needs})"
    return kept, note
