"""The validation every global read-out's choices are made on, and the hybrid's local half chosen on it.

**Validation origins.** Each series' last H values are held out (origin 0), then its last H + H//2
(origin 1): the read-out is fitted on what precedes each origin and scored by MASE on the H values after
it, and a choice is made on the mean over origins. One origin let one common shock decide (many series'
last windows share calendar time; ../shared/docs/global-models.md §7).

**In-distribution scoring.** A series whose history before an origin is shorter than `train_min` (the
values a training window needs) is forecast there from a window no training window looks like (more of
it masked than any the read-out learned from), so its validation error says nothing about the test,
where the series is longer. Measured on M3 monthly cut to 30-80 values per series (issue 43): the 413 such
series scored MASE 4.3-5.0 at L >= 24 against 1.84 at L = 12, and the search chose L = 12, the worst but
one on test (1.073 against 1.019 at L = 24); scored on the other series it chose L = 36 (1.039). Those
series are left out of the score when at least half the series remain; otherwise all are scored.

**The hybrid** (app/artifacts/local_models.py): the read-out's forecast averaged with two local models
fitted per series at request time, Theta and the damped trend, in equal thirds (SCUM's and the
StatisticalEnsemble's rule: an unweighted combination of unlike models; weights fitted on one validation
window were worse on test on 4 of 7 competition sets, /tmp measurements of issue 43's notes). The only
choice made on validation is how many of the last values the local models read (`LOCAL_PERIODS`): a
long window holds seasons that have since changed (Tourism monthly Theta: MASE 1.61 at 48 values,
1.49 at 120, 1.75 at all 309).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.artifacts.local_models import LocalSpec
from app.inference.metrics import mase

__all__ = [
    "LOCAL_MEMBERS",
    "LOCAL_PERIODS",
    "Origin",
    "local_min_values",
    "local_search",
    "origins",
    "tail_windows",
]

LOCAL_MEMBERS = ("theta", "damped")
LOCAL_WEIGHTS = (1 / 3, 1 / 3)  # the read-out's is the remaining third
# The local models' window, in periods of the cycle (in steps of 4 without one): a monthly model tries
# 24 ... 120 values.
LOCAL_PERIODS = (2, 3, 4, 6, 8, 10)
N_ORIGINS = 2


@dataclass(frozen=True)
class Origin:
    """One validation origin: the series' parts before it, which series they are, the H values after
    it [S, H], and which series are scored (in distribution)."""

    fit_part: list[Any]
    keep: list[int]
    held: np.ndarray
    scored: np.ndarray

    def score(self, forecast: np.ndarray, period: int) -> float:
        """Mean MASE of `forecast` [S, H] over the scored series."""
        values = [np.asarray(getattr(v, "values", v), dtype=np.float64) for v in self.fit_part]
        s = mase(values, self.held, forecast, period)
        return float(s[self.scored].mean())


def origins(
    series: Sequence[Any],
    horizon: int,
    history: int,
    train_min: int,
    cut: Callable[[Any, int], Any],
    n_origins: int = N_ORIGINS,
) -> list[Origin]:
    """The validation origins of `series` (`cut(v, k)`: v without its last k values): origin j holds out
    the last H + j·(H // 2) values; a series is kept where `history` values remain before it. An origin
    after the first is used only where some series still holds a training window before it."""
    out = []
    for j in range(n_origins):
        back = horizon + j * max(horizon // 2, 1)
        keep = [i for i, v in enumerate(series) if len(v) >= history + back]
        if not keep:
            break
        parts = [cut(series[i], back) for i in keep]
        if j and not any(len(p) >= train_min + horizon for p in parts):
            break  # no training window before this origin: the earlier origins decide
        values = [np.asarray(getattr(series[i], "values", series[i]), dtype=np.float64) for i in keep]
        start = back - horizon
        held = np.array([v[len(v) - back : len(v) - start] for v in values])
        long_enough = np.array([len(p) >= train_min for p in parts])
        scored = long_enough if long_enough.sum() * 2 >= len(parts) else np.ones(len(parts), dtype=bool)
        out.append(Origin(parts, keep, held, scored))
    return out


def tail_windows(series: Sequence[Any], length: int) -> np.ndarray:
    """The last `length` values of each series [S, length], NaN before a short series' start."""
    x = np.full((len(series), length), np.nan)
    for i, v in enumerate(series):
        tail = np.asarray(getattr(v, "values", v), dtype=np.float64)[-length:]
        x[i, length - len(tail) :] = tail
    return x


def local_min_values(period: int) -> int:
    """The fewest observed values a series needs for the local models: two cycles (their seasonal
    adjustment needs two), at least 4."""
    return max(2 * period, 4)


def local_search(
    val: Sequence[Origin], global_forecasts: Sequence[np.ndarray], period: int, horizon: int
) -> tuple[LocalSpec, dict[str, float]]:
    """The local window, chosen by the hybrid's mean validation MASE over the origins (each origin's
    read-out forecasts `global_forecasts[j]`), and the validation scores: `global` (the read-out alone)
    and `local_<length>` per window tried."""
    unit = period if period > 1 else 4
    scores: dict[str, float] = {
        "global": float(np.mean([o.score(g, period) for o, g in zip(val, global_forecasts, strict=True)]))
    }
    best: tuple[float, LocalSpec] | None = None
    for k in LOCAL_PERIODS:
        spec = LocalSpec(LOCAL_MEMBERS, LOCAL_WEIGHTS, k * unit, period, horizon, local_min_values(period))
        per = []
        for o, g in zip(val, global_forecasts, strict=True):
            windows = tail_windows(o.fit_part, spec.length)
            per.append(o.score(spec.combine(g, windows), period))
        scores[f"local_{spec.length}"] = float(np.mean(per))
        if best is None or scores[f"local_{spec.length}"] < best[0]:
            best = (scores[f"local_{spec.length}"], spec)
    assert best is not None
    return best[1], scores
