"""Seasonal cycles from the training data: the dominant period, and the per-phase mean profile.

The forecaster's cycle table Q [period, channels] starts at the mean of the training rows at each
phase (CycleNet learns it from zero; starting at the mean is the same fixed point, reached at once),
and ``cycle_period: auto`` reads the period off the training data's spectrum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from export.data import Split
from models import RSAForecaster

__all__ = ["DetectedCycle", "cycle_name", "detect_cycle", "dominant_period", "fit_cycle"]

# A peak this close to a whole number of rows is that number (the spectrum's bins are rows/k apart).
_WHOLE = 0.25
# A harmonic's fundamental must hold at least this share of the peak's power: a weekly pattern with
# sharp edges on daily data puts power at 1/7 as well as at 3/7, while a cycle of 11.4 rows (yearly
# sunspot counts) has none at a third of its frequency, and so is not read as a 34-row cycle.
_FUNDAMENTAL_SHARE = 0.02


@dataclass(frozen=True)
class DetectedCycle:
    """The training data's strongest cycle: `detected` rows between repeats as the spectrum reads it
    (refined between its bins), the whole `period` a cycle table and the seasonal naive use, and `rule`,
    how the one follows from the other, in words."""

    period: int
    detected: float
    rule: str

    @property
    def whole(self) -> bool:
        return self.rule.startswith(("whole", "harmonic"))


def detect_cycle(values: np.ndarray, max_period: int) -> DetectedCycle:
    """The period (in rows, 2..max_period, and at most half the rows) of the strongest spectral peak,
    power summed over channels, and how it was read.

    Three rules, in order. A peak within a quarter row of a whole number is that number. A season of P
    rows with sharp edges (a Saturday peak, a Sunday low) can put more power at a harmonic h/P than at
    1/P itself, whose period P/h is then not whole (7/3 = 2.33 days): a peak that is not whole is such a
    harmonic where a whole multiple of it (up to max_period) is within a quarter row of a whole number
    AND the spectrum has power at that multiple's own frequency (at least `_FUNDAMENTAL_SHARE` of the
    peak's). Otherwise the cycle is not a whole number of rows (11.4 years of yearly sunspot counts):
    the period is its nearest whole number (at least 2), and the rule says by how much the phase drifts
    each cycle."""
    rows = values.shape[0]
    max_period = min(max_period, rows // 2)  # a period shows only where it repeats: at least twice
    if max_period < 2:
        raise ValueError(f"{rows} rows are too few to detect a period (at least 4 are needed)")
    centred = values - values.mean(axis=0, keepdims=True)
    power = (np.abs(np.fft.rfft(centred, axis=0)) ** 2).sum(axis=1)  # (rows//2 + 1,)
    k = np.arange(len(power))
    # Frequencies k whose period rows/k lies in [2, max_period]; k = 0 (the mean) is excluded.
    ok = (k >= rows / max_period) & (k > 0)
    best = int(k[ok][np.argmax(power[ok])])
    peak = rows / best
    detected = rows / _refine(power, best)
    if abs(peak - round(peak)) <= _WHOLE:
        return DetectedCycle(max(2, round(peak)), detected, f"whole: the spectrum's peak is {peak:.2f} rows")
    for h in range(2, int(max_period / peak) + 1):
        if abs(h * peak - round(h * peak)) <= _WHOLE:
            at = best / h  # the multiple's own frequency, between two bins
            share = float(power[[int(np.floor(at)), int(np.ceil(at))]].max() / power[best])
            if share >= _FUNDAMENTAL_SHARE:
                period = round(h * peak)
                return DetectedCycle(
                    period,
                    detected,
                    f"harmonic: the peak at {peak:.2f} rows is harmonic {h} of a {period}-row cycle "
                    f"({100 * share:.0f}% of its power at {period} rows too)",
                )
    period = max(2, round(detected))
    return DetectedCycle(
        period,
        detected,
        f"not whole: a cycle of {detected:.2f} rows, rounded to {period} (a cycle table and the seasonal "
        f"naive need whole rows; the phase drifts {abs(detected - period):.2f} rows a cycle)",
    )


def _refine(power: np.ndarray, best: int) -> float:
    """The peak's frequency between bins: the vertex of the parabola through the log power of the peak
    bin and its neighbours (the bin itself at the ends of the spectrum)."""
    if best < 1 or best + 1 >= len(power):
        return float(best)
    a, b, c = np.log(np.maximum(power[best - 1 : best + 2].astype(np.float64), 1e-300))
    den = a - 2 * b + c
    return float(best + (0.5 * (a - c) / den if np.isfinite(den) and den < 0 else 0.0))


def dominant_period(values: np.ndarray, max_period: int) -> int:
    """`detect_cycle`'s whole period."""
    return detect_cycle(values, max_period).period


def cycle_name(period: int, step_seconds: float | None, detected: float | None = None) -> str:
    """What a cycle of `period` steps is, by its length in time: daily, weekly or yearly (a 52-week or a
    12-month period is yearly, not daily), else "seasonal" with its length (in days, in years from two
    years on). A detected cycle that is not a whole number of steps (`detected`, e.g. 11.4 yearly rows
    of sunspot counts) is named by its own length, with the whole period it was rounded to. Calendar
    steps (months) give no fixed step: their period 12 (months) or 4 (quarters) is a year."""
    if step_seconds is None or step_seconds <= 0:
        return "yearly" if period in (4, 12) else "seasonal"
    steps = detected if detected is not None else float(period)
    days = steps * step_seconds / 86400
    if detected is None or abs(detected - period) < 1e-9:
        for name, length in (("daily", 1.0), ("weekly", 7.0), ("yearly", 365.25)):
            if abs(days - length) <= 0.02 * length:  # 52 weeks are 364 days: within 2% of a year
                return name
    span = f"{days / 365.25:.3g} years" if days >= 2 * 365.25 else f"{days:g} days"
    rounded = (
        f", rounded to {period} steps" if detected is not None and abs(detected - period) >= 1e-9 else ""
    )
    return f"seasonal ({span}{rounded})" if days >= 1 else "seasonal"


@torch.no_grad()
def fit_cycle(model: RSAForecaster, split: Split) -> None:
    """Set the model's cycle table to the mean of ``split``'s rows at each phase."""
    if model.cycle is None:
        raise ValueError("fit_cycle needs a model with cycle_period > 0")
    period = model.cfg.cycle_period
    rows = split.data.shape[0]
    phase = split.phases(np.arange(rows), period).numpy()
    missing = sorted(set(range(period)) - set(phase.tolist()))
    if missing:
        raise ValueError(f"{split.name}: no rows at cycle phases {missing[:5]}; period {period} is too long")
    table = np.stack([split.data[phase == p].mean(axis=0) for p in range(period)])
    model.cycle.copy_(torch.from_numpy(table))
