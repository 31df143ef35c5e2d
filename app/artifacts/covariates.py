"""Covariates of a global read-out (issue 36): the one home of their layout, shared by the exporter (which
trains on it) and the service (which feeds it).

A covariate model's graph takes, beside `window`, one input `covariates` float32 [batch, D]: each
series' raw covariate values laid out as

    past:   L steps x P past-only covariates (step-major; NaN before a short series' start)
    future: H steps x (F future-known covariates + the calendar columns), step-major
    static: the static covariates, numeric as they are, categorical one-hot over their training categories

The graph standardises them by the training statistics (constants) and reads them linearly: the past
through the same REM kernels as the target, the future steps and the statics as they are. The calendar
columns are derived from each horizon step's timestamp (in the model's time zone): nothing else knows the
calendar, so the service computes them here, from the request's `start`, as the trainer did from the
file's timestamps. Plain numpy and zoneinfo: the serving image has no pandas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

__all__ = [
    "CALENDAR_FEATURES",
    "EFFECTS",
    "CovariateLayout",
    "StaticCovariate",
    "calendar_columns",
    "calendar_values",
]

# The calendar features a model may derive from timestamps, and the columns each adds per horizon step.
# Hour of day as two harmonics (a smooth daily profile in four numbers, whatever the step); day of week
# and month one-hot (a Sunday is not "between" Saturday and Monday for demand); holiday a 0/1 flag.
CALENDAR_FEATURES: dict[str, tuple[str, ...]] = {
    "hour": ("hour_sin1", "hour_cos1", "hour_sin2", "hour_cos2"),
    "dayofweek": tuple(f"dayofweek_{d}" for d in range(7)),  # Monday = 0
    "month": tuple(f"month_{m}" for m in range(1, 13)),
    "holiday": ("holiday",),
}


EFFECTS = ("relative", "additive", "both")


def calendar_columns(features: Sequence[str]) -> tuple[str, ...]:
    return tuple(c for f in features for c in CALENDAR_FEATURES[f])


def _local(stamps: np.ndarray, timezone: str | None) -> list[datetime]:
    """datetime64 UTC instants -> naive local wall-clock datetimes in `timezone` (UTC when None)."""
    us = np.asarray(stamps, dtype="datetime64[us]").astype(np.int64)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    zone = ZoneInfo(timezone) if timezone else UTC
    return [(epoch + timedelta(microseconds=int(u))).astimezone(zone).replace(tzinfo=None) for u in us]


def _holiday_dates(country: str, years: Sequence[int]) -> set[Any]:
    import importlib

    try:
        holidays = importlib.import_module("holidays")  # optional: only models with a holiday calendar
    except ImportError:  # declared in requirements/serve.txt; never downloaded at run time
        raise ValueError(
            f"calendar feature 'holiday' ({country}) needs the `holidays` package (pip install holidays)"
        ) from None
    try:
        return set(holidays.country_holidays(country, years=sorted(set(years))).keys())
    except NotImplementedError:
        raise ValueError(f"the holidays package knows no country {country!r}") from None


def calendar_values(
    stamps: np.ndarray, features: Sequence[str], timezone: str | None = None, country: str | None = None
) -> np.ndarray:
    """The calendar columns [n, C] (`calendar_columns(features)`, in order) of datetime64 UTC instants,
    read in local time of `timezone`; `holiday` needs `country`."""
    local = _local(stamps, timezone)
    n = len(local)
    cols: list[np.ndarray] = []
    for f in features:
        if f == "hour":
            day = np.array([(t.hour * 3600 + t.minute * 60 + t.second) / 86_400 for t in local])
            a = 2 * np.pi * day
            cols += [np.sin(a), np.cos(a), np.sin(2 * a), np.cos(2 * a)]
        elif f == "dayofweek":
            dow = np.array([t.weekday() for t in local], dtype=np.int64)
            cols += [(dow == d).astype(np.float64) for d in range(7)]
        elif f == "month":
            month = np.array([t.month for t in local], dtype=np.int64)
            cols += [(month == m).astype(np.float64) for m in range(1, 13)]
        elif f == "holiday":
            if not country:
                raise ValueError("calendar feature 'holiday' needs a country (--holidays)")
            days = _holiday_dates(country, [t.year for t in local]) if n else set()
            cols.append(np.array([t.date() in days for t in local], dtype=np.float64))
        else:
            raise ValueError(f"unknown calendar feature {f!r}; known: {sorted(CALENDAR_FEATURES)}")
    return np.stack(cols, 1) if cols else np.zeros((n, 0))


@dataclass(frozen=True)
class StaticCovariate:
    """A per-series covariate: numeric (`categories` None) or categorical over its training categories
    (one-hot; a category not seen in training is refused)."""

    name: str
    categories: tuple[str, ...] | None = None

    @property
    def width(self) -> int:
        return 1 if self.categories is None else len(self.categories)

    def encode(self, value: Any) -> np.ndarray:
        """Raises ValueError saying what was wrong with `value`."""
        if self.categories is None:
            if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
                raise ValueError(f"must be a finite number, got {value!r}")
            return np.array([float(value)])
        key = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
        if key is None or key not in self.categories:
            raise ValueError(f"must be one of the training categories {list(self.categories)}, got {value!r}")
        return (np.array(self.categories) == key).astype(np.float64)


@dataclass(frozen=True)
class CovariateLayout:
    """Which covariates a model reads and where each lies in the `covariates` input; with the training
    statistics (`mean`, `std` [D]) that standardise them."""

    input_length: int
    horizon: int
    past: tuple[str, ...] = ()
    future: tuple[str, ...] = ()
    calendar: tuple[str, ...] = ()  # CALENDAR_FEATURES names
    static: tuple[StaticCovariate, ...] = ()
    holidays: str | None = None  # the country of the `holiday` calendar feature
    timezone: str | None = None  # where the calendar is read (the model's time zone)
    mean: tuple[float, ...] = field(default=())
    std: tuple[float, ...] = field(default=())
    # How a covariate moves the forecast (`EFFECTS`): "relative" in units of each window's scale (the
    # target is divided by it: a promotion adds a share of the level, what one model over series of any
    # level can learn); "additive" in the target's own units (the covariate features, and a constant,
    # divided by the window's scale before the read-out: temperature adds megawatts whatever the level;
    # for one series, or series of one unit); "both" reads each both ways.
    effect: str = "relative"
    # The target's typical level (the median over training series of their mean |value|): additive
    # features are g · unit / scale, of order one as the ridge penalty expects, not of order 1 / level.
    unit: float = 1.0

    def __post_init__(self) -> None:
        if self.effect not in EFFECTS:
            raise ValueError(f"effect must be one of {list(EFFECTS)}, got {self.effect!r}")
        unknown = [f for f in self.calendar if f not in CALENDAR_FEATURES]
        if unknown:
            raise ValueError(f"unknown calendar features {unknown}; known: {sorted(CALENDAR_FEATURES)}")
        if "holiday" in self.calendar and not self.holidays:
            raise ValueError("calendar feature 'holiday' needs a country (--holidays)")
        names = [*self.past, *self.future, *(s.name for s in self.static)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"covariates {dup} are named twice")

    @property
    def future_columns(self) -> tuple[str, ...]:
        return (*self.future, *calendar_columns(self.calendar))

    @property
    def static_width(self) -> int:
        return sum(s.width for s in self.static)

    @property
    def width(self) -> int:
        """D, the `covariates` input's width."""
        return (
            self.input_length * len(self.past) + self.horizon * len(self.future_columns) + self.static_width
        )

    def assemble(
        self,
        past: np.ndarray | None,
        future: np.ndarray | None,
        horizon_stamps: np.ndarray | None,
        static: np.ndarray | None,
    ) -> np.ndarray:
        """The raw `covariates` rows [n, D] (float64): past [n, L, P] (NaN before a short series' start),
        future [n, H, F] of the named future covariates, horizon_stamps [n, H] datetime64 UTC instants of
        the horizon steps (for the calendar; None without one), static [n, S] already encoded
        (`encode_static`)."""
        L, H = self.input_length, self.horizon
        parts: list[np.ndarray] = []
        n = next(len(a) for a in (past, future, horizon_stamps, static) if a is not None)
        if self.past:
            assert past is not None and past.shape[1:] == (L, len(self.past))
            parts.append(past.reshape(n, -1))
        if self.future_columns:
            blocks = []
            if self.future:
                assert future is not None and future.shape[1:] == (H, len(self.future))
                blocks.append(future)
            if self.calendar:
                assert horizon_stamps is not None
                cal = calendar_values(horizon_stamps.reshape(-1), self.calendar, self.timezone, self.holidays)
                blocks.append(cal.reshape(n, H, -1))
            parts.append(np.concatenate(blocks, 2).reshape(n, -1))
        if self.static:
            assert static is not None and static.shape[1:] == (self.static_width,)
            parts.append(static)
        return np.concatenate(parts, 1) if parts else np.zeros((n, 0))

    def encode_static(self, values: Mapping[str, Any]) -> np.ndarray:
        """One series' statics {name: value} -> [S] (ValueError naming the covariate)."""
        out = []
        for s in self.static:
            if s.name not in values:
                raise ValueError(f"static covariate {s.name!r} is missing")
            try:
                out.append(s.encode(values[s.name]))
            except ValueError as e:
                raise ValueError(f"static covariate {s.name!r} {e}") from None
        return np.concatenate(out) if out else np.zeros(0)

    def standardise(self, raw: np.ndarray) -> np.ndarray:
        """(raw − mean) / std, NaN (a short series' missing start) read as 0, the training mean."""
        z = (raw - np.asarray(self.mean)) / np.asarray(self.std)
        return np.where(np.isnan(z), 0.0, z)

    def scaled_features(self, g: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """The read-out's covariate features of `g` [n, G] (readout_matrix's) for windows of `scale` [n]:
        by `effect`, g as it is, [g / scale, 1 / scale], or both."""
        inv = self.unit / scale[:, None]
        additive = np.concatenate([g * inv, inv], 1)
        if self.effect == "relative":
            return g
        return additive if self.effect == "additive" else np.concatenate([g, additive], 1)

    def readout_matrix(self, kernels: np.ndarray) -> np.ndarray:
        """[D, G]: the standardised covariates -> the read-out's covariate features: each past covariate
        through the REM kernels [K, L] (the target's), each future column per step and each static as
        they are."""
        L, P = self.input_length, len(self.past)
        K = kernels.shape[0]
        rest = self.width - L * P
        out = np.zeros((self.width, P * K + rest))
        for p in range(P):  # past rows are step-major: row l * P + p
            out[np.arange(L) * P + p, p * K : (p + 1) * K] = kernels.T
        out[L * P :, P * K :] = np.eye(rest)
        return out

    def describe(self) -> list[dict[str, Any]]:
        """The model's covariates as metadata lists them: name, kind, dtype, categories, whether each
        horizon step needs them."""
        rows: list[dict[str, Any]] = []
        rows += [
            {"name": n, "kind": "past", "dtype": "float", "categories": None, "horizon": False}
            for n in self.past
        ]
        rows += [
            {"name": n, "kind": "future", "dtype": "float", "categories": None, "horizon": True}
            for n in self.future
        ]
        rows += [
            {"name": f, "kind": "calendar", "dtype": "derived", "categories": None, "horizon": True}
            for f in self.calendar
        ]
        rows += [
            {
                "name": s.name,
                "kind": "static",
                "dtype": "float" if s.categories is None else "category",
                "categories": None if s.categories is None else list(s.categories),
                "horizon": False,
            }
            for s in self.static
        ]
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "input_length": self.input_length,
            "horizon": self.horizon,
            "past": list(self.past),
            "future": list(self.future),
            "calendar": list(self.calendar),
            "static": [
                {"name": s.name, "categories": None if s.categories is None else list(s.categories)}
                for s in self.static
            ],
            "holidays": self.holidays,
            "timezone": self.timezone,
            "mean": list(self.mean),
            "std": list(self.std),
            "effect": self.effect,
            "unit": self.unit,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CovariateLayout:
        return cls(
            input_length=int(d["input_length"]),
            horizon=int(d["horizon"]),
            past=tuple(d.get("past") or ()),
            future=tuple(d.get("future") or ()),
            calendar=tuple(d.get("calendar") or ()),
            static=tuple(
                StaticCovariate(s["name"], None if s.get("categories") is None else tuple(s["categories"]))
                for s in d.get("static") or ()
            ),
            holidays=d.get("holidays"),
            timezone=d.get("timezone"),
            mean=tuple(float(x) for x in d.get("mean") or ()),
            std=tuple(float(x) for x in d.get("std") or ()),
            effect=str(d.get("effect") or "relative"),
            unit=float(d.get("unit") or 1.0),
        )
