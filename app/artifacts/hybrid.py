"""The hybrid global model's combination: the read-out's forecast and the local members'
(app/artifacts/local_models.py) weighted per series, as a version's manifest (`panel.local`) and its
graph read it.

The members' weights are the manifest's, or, with a `Tilt`, each series' own: the base weights moved by
five features of its window (`series_features`; fitted on validation by export/global_models/hybrid.py
`fit_tilt`), computed here in numpy at request time like the members, so every path serves the same weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from app.artifacts.local_models import (
    LONG_CYCLES,
    MEMBERS,
    _observed,
    fit_forecast,
    observed_counts,
    seasonal_indices,
    whole_rows,
)
from app.artifacts.readout.windows import still_cycles

__all__ = [
    "FEATURES",
    "LOCAL_SCHEMA",
    "SPLIT_SCHEMA",
    "LocalSpec",
    "Tilt",
    "series_features",
    "softmax_weights",
]

# -- the series features that tilt the combination's weights ----------------------------------------

# What `series_features` measures on each window, in this order (FFORMA's idea, Montero-Manso et al.
# 2020: which member does well depends on a series' features, so the weights are a function of them).
FEATURES = ("log_length", "log_noise", "trend_r2", "season", "diff_acf1")


def series_features(x: np.ndarray, period: int) -> np.ndarray:
    """[S, len(FEATURES)] of windows x [S, L] (the missing start NaN), from the observed values alone:
    the log of their count; the log of their first differences' standard deviation over their mean
    absolute value (the noise); the R² of a straight line through them (the trend); the standard
    deviation of the log seasonal indices `seasonal_indices` finds (0 where a series is not adjusted or
    has no cycle: the season); the lag-1 autocorrelation of the differences. A window of one value
    has 0 for each but its length. Cheap beside the members: the 1,428 M3 monthly windows of 120
    values in 0.020 s against the six members' 0.98 s (median of 5 and 2 runs, load average 9)."""
    x = np.asarray(x, dtype=np.float64)
    S, L = x.shape
    x0, m, n = _observed(x)
    nn = np.maximum(n, 1)
    mean = x0.sum(1) / nn
    level = np.abs(x0).sum(1) / nn
    d = x[:, 1:] - x[:, :-1]
    dm = ~np.isnan(d)
    dn = np.maximum(dm.sum(1), 1)
    dc = np.where(dm, d - np.where(dm, d, 0.0).sum(1, keepdims=True) / dn[:, None], 0.0)
    sd = np.sqrt((dc * dc).sum(1) / dn)
    noise = np.log(np.maximum(sd / np.maximum(level, 1e-300), 1e-4))
    t = np.where(
        m, np.arange(L, dtype=np.float64)[None, :] - (np.where(m, np.arange(L), 0).sum(1) / nn)[:, None], 0.0
    )
    y = np.where(m, x0 - mean[:, None], 0.0)
    den = (t * t).sum(1) * (y * y).sum(1)
    r2 = np.where(den > 0, (t * y).sum(1) ** 2 / np.where(den > 0, den, 1.0), 0.0)
    season = np.log(seasonal_indices(x, period)).std(1) if period >= 2 else np.zeros(S)
    var = (dc * dc).sum(1)
    acf1 = np.where(var > 0, (dc[:, 1:] * dc[:, :-1]).sum(1) / np.where(var > 0, var, 1.0), 0.0)
    return np.stack([np.log(nn), np.where(dm.any(1), noise, 0.0), r2, season, acf1], 1)


@dataclass(frozen=True)
class Tilt:
    """Per-series weights from the series' features (the manifest's `panel.local.tilt`): a series'
    weights are the softmax of log(the base weights: the read-out's 1 − Σ w, then the members') plus
    `coef` [1 + members][FEATURES] times its features standardised by `center` and `scale` (all 0: the
    base weights). Fitted on the validation origins (export/global_models/hybrid.py `fit_tilt`)."""

    center: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        F = len(FEATURES)
        if len(self.center) != F or len(self.scale) != F or any(len(r) != F for r in self.coef):
            raise ValueError(f"a tilt needs {F} features' center, scale and coefficients ({list(FEATURES)})")
        if not all(np.isfinite(v) for r in (self.center, self.scale, *self.coef) for v in r):
            raise ValueError("a tilt's center, scale and coefficients must be finite")
        if any(v <= 0 for v in self.scale):
            raise ValueError(f"a tilt's feature scales must be > 0, got {self.scale}")

    def logits(self, features: np.ndarray) -> np.ndarray:
        """[S, 1 + members]: the tilt's addition to the log base weights."""
        z = (features - np.asarray(self.center)) / np.asarray(self.scale)
        return z @ np.asarray(self.coef, dtype=np.float64).T


def softmax_weights(base: np.ndarray, tilt: np.ndarray) -> np.ndarray:
    """Rows of softmax(log base + tilt): base [K] > 0, tilt [S, K]."""
    z = np.log(base)[None, :] + tilt
    z = np.exp(z - z.max(1, keepdims=True))
    return z / z.sum(1, keepdims=True)


# -- the hybrid's local half, as a version's manifest and its graph read it ----------------------------

LOCAL_SCHEMA = 1  # of the manifest's `panel.local` block without a tilt
TILT_SCHEMA = 2  # with one (a server of schema 1 alone refuses it, rather than serve other weights)
# With a `long_period`, a tilt or not (`tilt` present or absent): a server of schemas 1 and 2 alone refuses
# it, rather than serve the members decomposed by the cycle alone.
LONG_SCHEMA = 3
# With a `short_length` beside the long period: a server of schemas 1-3 alone refuses it, rather than fit
# every series on the long window.
SPLIT_SCHEMA = 4


@dataclass(frozen=True)
class LocalSpec:
    """The local half of a hybrid global model (the manifest's `panel.local` block): which members, each
    one's weight in the forecast (the global read-out's is 1 − their sum), the window's last `length`
    steps they read, and the fewest observed values a series needs for them (fewer: the read-out alone,
    and the answer says so). With a `tilt`, those weights are each series' base, tilted by its features
    (`series_weights`)."""

    members: tuple[str, ...]
    weights: tuple[float, ...]
    length: int
    period: int
    horizon: int
    min_values: int
    tilt: Tilt | None = None
    # A multiple of the cycle (a week of hours on hourly data) that the members on adjusted values
    # decompose a series by where its window holds LONG_CYCLES of it and shows it (`seasonal_factors`);
    # None: the cycle's decomposition only.
    long_period: int | None = None
    # With a long period: the window's last steps the members read for a series it does not decompose
    # (`fit_forecast`'s `short_length`); None: the whole `length` for every series.
    short_length: int | None = None

    def __post_init__(self) -> None:
        unknown = [m for m in self.members if m not in MEMBERS]
        if unknown or len(self.members) != len(self.weights) or not self.members:
            raise ValueError(f"local members must be among {list(MEMBERS)}, one weight each: {self}")
        if any(w < 0 for w in self.weights) or sum(self.weights) > 1 + 1e-9:
            raise ValueError(f"local weights must be >= 0 and sum to at most 1, got {self.weights}")
        if self.length < 2 or self.horizon < 1 or self.period < 1 or self.min_values < 2:
            raise ValueError(f"local length, horizon, period or min_values out of range: {self}")
        if self.long_period is not None and (
            self.long_period <= self.period
            or self.long_period % self.period
            or self.length < LONG_CYCLES * self.long_period
        ):
            raise ValueError(
                f"local long_period must be a multiple of the period above it, the window at least "
                f"{LONG_CYCLES} of it: {self}"
            )
        if self.short_length is not None and (
            self.long_period is None or not 2 <= self.short_length < self.length
        ):
            raise ValueError(f"local short_length needs a long period and must lie in [2, length): {self}")
        if self.tilt is not None:
            if len(self.tilt.coef) != len(self.members) + 1:
                raise ValueError(f"a tilt needs one row per member and one for the read-out: {self}")
            if min(self.weights) <= 0 or self.share >= 1:
                raise ValueError(f"a tilted combination's base weights must all be > 0: {self.weights}")

    @property
    def share(self) -> float:
        return float(sum(self.weights))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.tilt is None:
            del d["tilt"]
        if self.long_period is None:
            del d["long_period"]
        if self.short_length is None:
            del d["short_length"]
        if self.short_length is not None:
            schema = SPLIT_SCHEMA
        elif self.long_period is not None:
            schema = LONG_SCHEMA
        else:
            schema = TILT_SCHEMA if self.tilt else LOCAL_SCHEMA
        return {"schema": schema, **d}

    @classmethod
    def from_json(cls, d: Any) -> LocalSpec:
        """ValueError saying what is wrong when `d` is not a `local` block of this schema."""
        known = (LOCAL_SCHEMA, TILT_SCHEMA, LONG_SCHEMA, SPLIT_SCHEMA)
        if not isinstance(d, dict) or d.get("schema") not in known:
            found = d.get("schema") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"not a local block of schema {', '.join(map(str, known))} (found {found!r})")
        try:
            tilt = None
            long = d["schema"] in (LONG_SCHEMA, SPLIT_SCHEMA)
            if d["schema"] == TILT_SCHEMA or (long and "tilt" in d):
                t = d["tilt"]
                tilt = Tilt(
                    center=tuple(float(v) for v in t["center"]),
                    scale=tuple(float(v) for v in t["scale"]),
                    coef=tuple(tuple(float(v) for v in row) for row in t["coef"]),
                )
            return cls(
                members=tuple(str(m) for m in d["members"]),
                weights=tuple(float(w) for w in d["weights"]),
                length=int(d["length"]),
                period=int(d["period"]),
                horizon=int(d["horizon"]),
                min_values=int(d["min_values"]),
                tilt=tilt,
                long_period=int(d["long_period"]) if long else None,
                short_length=int(d["short_length"]) if d["schema"] == SPLIT_SCHEMA else None,
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"the local block is incomplete or malformed: {e!r}") from None

    def whole(self, x: np.ndarray) -> np.ndarray | None:
        """Which series [S] of windows x [S, length] the members read whole (`whole_rows`): None where
        every one is (no short length). Computed once per window by `feed` and `skipped` and passed on."""
        return whole_rows(x, self.long_period, self.short_length)

    def forecasts(self, x: np.ndarray, whole: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Each member's forecast [S, H] of windows x [S, length] (the missing start NaN), fitted as this
        block says (`fit_forecast` with its long period and short length; `whole`: `self.whole(x)`)."""
        return fit_forecast(
            x, self.period, self.horizon, self.members, self.long_period, self.short_length, whole
        )

    def long_note(self) -> str:
        """How the members decompose a series by the long period, for the exporter's line and the
        manifest's description ("" without one)."""
        if self.long_period is None:
            return ""
        note = f"decomposed by {self.long_period} steps where a series holds {LONG_CYCLES} of them"
        if self.short_length is not None:
            note += f", any other series by its cycle over its last {self.short_length} values"
        return note

    def _tail(self, windows: np.ndarray) -> np.ndarray:
        """The last `length` steps [S, length] of windows [S, W] or [S, W, 1], float64."""
        return np.asarray(windows, dtype=np.float64).reshape(len(windows), -1)[:, -self.length :]

    def observed(self, windows: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
        """Per series, the observed values the members read: of the window's last `length` steps, or of
        its last `short_length` for a series the long period does not decompose (`observed_counts`;
        `whole`: `self.whole` of that tail, if known)."""
        return observed_counts(self._tail(windows), self.long_period, self.short_length, whole)

    def read_length(self, windows: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
        """Per series, how many of the window's last steps the members read: `length`, or `short_length`
        for a series the long period does not decompose (`whole` as `observed`'s)."""
        x = self._tail(windows)
        if whole is None:
            whole = self.whole(x)
        if whole is None or self.short_length is None:
            return np.full(len(x), self.length)
        return np.where(whole, self.length, self.short_length)

    def skipped(self, windows: np.ndarray) -> list[str | None]:
        """Per series, why it gets the read-out alone (fewer than `min_values` observed values), else
        None: the answer's note (`local_models` in a /v1 forecast)."""
        x = self._tail(windows)
        whole = self.whole(x)
        return [
            None
            if n >= self.min_values
            else f"the global read-out alone: {n} observed values in the last {k} steps, "
            f"the local models ({', '.join(self.members)}) need {self.min_values}"
            for n, k in zip(
                self.observed(x, whole).tolist(), self.read_length(x, whole).tolist(), strict=True
            )
        ]

    def series_weights(self, windows: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
        """[S, 1 + members]: each series' weights, the read-out's first: (1 − Σ w, w...) without a tilt,
        tilted by its features with one; (1, 0, ...) for a series of fewer than `min_values` observed
        values where its members read (`observed`; `whole` as its) of windows [S, W] or [S, W, 1]."""
        x = self._tail(windows)
        base = np.array([1.0 - self.share, *self.weights])
        out = np.repeat(base[None], len(x), 0)
        if self.tilt is not None:
            out = softmax_weights(base, self.tilt.logits(series_features(x, self.period)))
        enough = self.observed(x, whole) >= self.min_values
        out[~enough] = np.eye(len(base))[0]
        return out

    def feed(self, windows: np.ndarray, still_length: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The graph's `local` [S, H] (the members' weighted forecasts) and `local_weight` [S, 1] (their
        summed weight; 0, and `local` 0, for a series of fewer than `min_values` observed values) of
        windows [S, W] or [S, W, 1] (the missing start NaN), float64. With a tilt, each series' own
        weights (`series_weights`): the graph's read-out weight 1 − local_weight is per series already.

        `still_length`: the read-out's input length L where it holds a still window (readout.hold_still:
        a read-out without covariates), else None. A window still over its last L values is then held by
        the members too (their forecast its last cycle), so the hybrid forecasts it as the read-out does,
        inside the intervals of no width its spread of 0 gives: with the members' own forecasts, 24 months
        of 100 + 10·sin(2πt/12) had come back as 96.2, 97.6, 98.6 ... from pretrained-monthly (the cycle:
        100, 105, 108.7 ...), 8 quarters of a cycle and a cycle below zero the same way (the service,
        2026-12-06)."""
        full = np.asarray(windows, dtype=np.float64).reshape(len(windows), -1)
        x = full[:, -self.length :]
        whole = self.whole(x)  # the seasonality test at the long period, once for all below
        enough = self.observed(x, whole) >= self.min_values
        fitted = None if whole is None else whole[enough]
        local = np.zeros((len(x), self.horizon))
        if self.tilt is not None:
            w = self.series_weights(x, whole)
            if enough.any():
                fc = self.forecasts(x[enough], fitted)
                local[enough] = sum(w[enough, 1 + i, None] * fc[m] for i, m in enumerate(self.members))
            weight = 1.0 - w[:, :1]
        else:
            if enough.any():
                fc = self.forecasts(x[enough], fitted)
                local[enough] = sum(w * fc[m] for m, w in zip(self.members, self.weights, strict=True))
            weight = np.where(enough, self.share, 0.0)[:, None]
        if still_length is not None:
            still, cycle = self.held(full, still_length)
            local = np.where(still[:, None], weight * cycle, local)
        return local, weight

    def held(self, windows: np.ndarray, still_length: int) -> tuple[np.ndarray, np.ndarray]:
        """(still [S], the last cycle repeated [S, H]) of windows [S, W] (the missing start NaN) over their
        last `still_length` values: the read-out's still rule (readout.still_cycles)."""
        tail = np.asarray(windows, dtype=np.float64).reshape(len(windows), -1)[:, -still_length:]
        m = ~np.isnan(tail)
        return still_cycles(np.where(m, tail, 0.0), m.astype(np.float64), self.period, self.horizon)

    def combine(
        self, global_forecast: np.ndarray, windows: np.ndarray, still_length: int | None
    ) -> np.ndarray:
        """The hybrid's forecast [S, H] from the read-out's [S, H] and the windows it read (float64: the
        exporter's numpy model; the graph computes the same in float32); `still_length` as `feed`'s."""
        local, weight = self.feed(windows, still_length)
        return global_forecast * (1.0 - weight) + local
