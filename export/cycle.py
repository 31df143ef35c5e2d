"""Seasonal cycles from the training data: the dominant period, and the per-phase mean profile.

The forecaster's cycle table Q [period, channels] starts at the mean of the training rows at each
phase (CycleNet learns it from zero; starting at the mean is the same fixed point, reached at once),
and ``cycle_period: auto`` reads the period off the training data's spectrum.
"""

from __future__ import annotations

import numpy as np
import torch

from export.data import Split
from models import RSAForecaster

__all__ = ["dominant_period", "fit_cycle"]


def dominant_period(values: np.ndarray, max_period: int) -> int:
    """The period (in rows, 2..max_period, and at most half the rows) of the strongest spectral peak,
    power summed over channels.

    A season of P rows puts power at the frequencies h/P; a season with sharp edges (a Saturday peak, a
    Sunday low) can put more at a harmonic than at 1/P itself, whose period P/h is then not a whole number
    of rows (7/3 = 2.33 days). A peak more than a quarter row from a whole number is read as such a
    harmonic: the period is the smallest whole multiple of it (up to max_period) that is a whole number."""
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
    if abs(peak - round(peak)) > 0.25:
        for h in range(2, int(max_period / peak) + 1):
            if abs(h * peak - round(h * peak)) <= 0.25:
                return round(h * peak)
    return max(2, round(peak))


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
