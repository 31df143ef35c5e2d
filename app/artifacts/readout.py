"""The global REM read-out's computation, torch-free: its features, its ridge fit and its interval widths.

The one home of this code. The exporter (export/panel.py: `fit_global`, `GlobalModel.forecast`;
export/global_onnx.py: `calibrate_global`) and the service's fit on request (`/v1/.../fit_forecast`,
app/inference/refit.py) both call it, so a read-out refitted by the service is the one the
exporter would have fitted on the same series with the same settings.

Each window of L steps is divided by its own scale (the mean |value| of its last cycle); its features are
the last rows of a fixed REM bank applied to the normalised window (`rem_kernels`), its last `n_lags`
values and the share of the window that is missing; a ridge regression (`NormalEquations`, float64)
maps them to the H normalised future values. A version folder carries what a refit needs in its
manifest's `readout` block (`ReadoutSpec`, written by export/global_onnx.py; docs/artifacts.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from app.artifacts.conformal import conformal_quantile, level_fits
from app.artifacts.contract import window_scale
from app.artifacts.covariates import CovariateLayout
from app.artifacts.local_models import LocalSpec
from rsa_core.windows import tail_windows

__all__ = [
    "CACHE_ROWS",
    "READOUT_SCHEMA",
    "SCALE_FLOOR",
    "TINY",
    "Calibration",
    "CovariateRows",
    "FitSettings",
    "NormalEquations",
    "ReadoutSpec",
    "accumulate",
    "calibrate",
    "covariate_features",
    "features",
    "fit_weights",
    "forecast",
    "last_windows",
    "naive_error",
    "pooled_intervals",
    "rem_kernels",
    "series_windows",
    "service_spread",
    "solve_passes",
    "training_windows",
    "window_ends",
    "window_scales",
]

READOUT_SCHEMA = 1  # of the manifest's `readout` block
# Below this |value|, a window's scale falls back (to its mean |value|, then to 1): an all-zero window.
TINY = 1e-8
# A spread no real series has: the floor of each series' seasonal-naive error in the interval widths, so
# that a flat window's interval is (almost) the point, never a division by zero.
SCALE_FLOOR = 1e-9
# Windows gathered from consecutive series before they are added to the normal equations: bounds the
# memory (a few MiB at L = 72) whatever the number of series, and amortises the per-batch work.
BUFFER_ROWS = 8192
# Windows whose features a fit keeps between its IRLS passes (about 70 float64 numbers each with a
# monthly bank: 37 MiB at most) instead of computing them again each pass.
CACHE_ROWS = 65_536


class NormalEquations:
    """Weighted ridge regression t ≈ [f, 1]·W accumulated over batches, solved in float64."""

    def __init__(self, n_features: int, n_targets: int) -> None:
        self.gram = np.zeros((n_features + 1, n_features + 1))
        self.cross = np.zeros((n_features + 1, n_targets))
        self.t_sq = 0.0
        self.count = 0

    def add(self, f: np.ndarray, t: np.ndarray, w: np.ndarray) -> None:
        """f [n, F] features, t [n, T] targets, w [n, 1] row weights."""
        u = np.concatenate([np.asarray(f, dtype=np.float64), np.ones((f.shape[0], 1))], 1)
        t, w = np.asarray(t, dtype=np.float64), np.asarray(w, dtype=np.float64)
        uw = u * w
        self.gram += uw.T @ u
        self.cross += uw.T @ t
        self.t_sq += float((t * t * w).sum())
        self.count += t.size

    def solve(self, ridge: float) -> tuple[np.ndarray, float]:
        """(solution [F+1, T], the last row the bias; weighted mean squared residual)."""
        reg = ridge * np.eye(self.gram.shape[0])
        reg[-1, -1] = 0.0  # no penalty on the bias
        sol = np.linalg.solve(self.gram + reg, self.cross)
        # Weighted residual sum of squares: Σw·t² − 2·tr(solᵀ·cross) + tr(solᵀ·gram·sol).
        rss = self.t_sq - 2 * float((sol * self.cross).sum()) + float((sol * (self.gram @ sol)).sum())
        return sol, rss / self.count


def rem_kernels(heads: Sequence[Sequence[Any]], length: int) -> np.ndarray:
    """The last rows [K, L] of REM heads (rows [kind, dilation, λ or γ, θ], export/bank.py's
    `expand_bank`) over a window of `length` steps, as models/rem.py computes them (`lag_row`: lag > 0 on
    each head's lattice; λ^t, γ^t·cos(tθ), γ^t·sin(tθ)), each row scaled to unit norm so that one ridge
    penalty treats them alike."""
    rows = []
    lag = (length - 1) - np.arange(length)
    for kind, dilation, value, theta in heads:
        on = (lag > 0) & (lag % int(dilation) == 0)
        t = np.where(on, lag // int(dilation), 1).astype(np.float64)
        if kind == "regular":
            k = np.power(float(value), t)
        elif kind == "cyclic_cos":
            k = np.power(float(value), t) * np.cos(t * float(theta))
        else:
            k = np.power(float(value), t) * np.sin(t * float(theta))
        k = np.where(on, k, 0.0)
        norm = float(np.linalg.norm(k))
        rows.append(k / norm if norm > 0 else k)
    return np.array(rows, dtype=np.float64).reshape(-1, length)


@dataclass(frozen=True)
class FitSettings:
    """How the read-out is fitted (export/panel.py's `PanelConfig` says why each is what it is)."""

    horizon: int
    period: int
    n_lags: int
    ridge: float
    weighting: str  # "series" or "window"
    train_min: int  # observed values a training window needs
    row_scale: str  # "level" or "mase"
    mase_floor: float
    irls: int
    irls_floor: float


@dataclass(frozen=True)
class ReadoutSpec:
    """What a refit needs, as the manifest's `readout` block: the REM heads, the input length, the
    fewest values forecast, and the fit's settings."""

    heads: tuple[tuple[str, int, float, float], ...]
    input_length: int
    min_history: int
    fit: FitSettings

    def kernels(self) -> np.ndarray:
        return rem_kernels(self.heads, self.input_length)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": READOUT_SCHEMA,
            "heads": [list(h) for h in self.heads],
            "input_length": self.input_length,
            "min_history": self.min_history,
            **asdict(self.fit),
        }

    @classmethod
    def from_json(cls, d: Any) -> ReadoutSpec:
        """ValueError saying what is wrong when `d` is not a `readout` block of this schema."""
        if not isinstance(d, dict) or d.get("schema") != READOUT_SCHEMA:
            found = d.get("schema") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"not a readout block of schema {READOUT_SCHEMA} (found {found!r})")
        try:
            fit = FitSettings(
                horizon=int(d["horizon"]),
                period=int(d["period"]),
                n_lags=int(d["n_lags"]),
                ridge=float(d["ridge"]),
                weighting=str(d["weighting"]),
                train_min=int(d["train_min"]),
                row_scale=str(d["row_scale"]),
                mase_floor=float(d["mase_floor"]),
                irls=int(d["irls"]),
                irls_floor=float(d["irls_floor"]),
            )
            heads = tuple((str(k), int(dl), float(v), float(th)) for k, dl, v, th in d["heads"])
            return cls(heads, int(d["input_length"]), int(d["min_history"]), fit)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"the readout block is incomplete or malformed: {e!r}") from None


# -- windows and features -------------------------------------------------------------------------------


def window_scales(x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Per window: the mean |value| of its last cycle's observed steps (falling back to the whole
    window's, then to 1 for an all-zero window)."""
    last = max(period, 1)
    ax, am = np.abs(x[:, -last:]) * m[:, -last:], m[:, -last:]
    s = ax.sum(1) / np.maximum(am.sum(1), 1)
    whole = (np.abs(x) * m).sum(1) / np.maximum(m.sum(1), 1)
    s = np.where(s > TINY, s, whole)
    return np.where(s > TINY, s, 1.0)


def naive_error(x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Per window: the mean |x_t − x_{t−m}| over its observed pairs (m = the period, or 1 where the
    window holds no observed pair a period apart); 0 where it has no pair at all."""
    out = np.zeros(len(x))
    todo = np.ones(len(x), dtype=bool)
    for lag in (period, 1) if period > 1 else (1,):
        both = m[:, lag:] * m[:, :-lag]
        pairs = both.sum(1)
        err = (np.abs(x[:, lag:] - x[:, :-lag]) * both).sum(1) / np.maximum(pairs, 1)
        use = todo & (pairs > 0)
        out[use], todo = err[use], todo & ~use
    return out


def features(
    x: np.ndarray, m: np.ndarray, period: int, n_lags: int, kernels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(features [n, F], scales [n]) of raw windows x [n, L] whose observed steps are m [n, L]."""
    s = window_scales(x, m, period)
    u = np.where(m > 0, x / s[:, None], 0.0)  # the masked start reads as 0 (its share is a feature)
    lags = u[:, -n_lags:]
    missing = 1.0 - m.mean(1, keepdims=True)
    return np.concatenate([u @ kernels.T, lags, missing], 1), s


def covariate_features(
    layout: CovariateLayout, raw: np.ndarray, kernels: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """A covariate model's further features [n, G] of its raw `covariates` rows [n, D] for windows of
    `scale` [n]: standardised by the training statistics (a missing past start read as the training
    mean), each past covariate through the target's REM kernels, and read relative to the window's scale
    or in the target's units (`layout.effect`)."""
    return layout.scaled_features(layout.standardise(raw) @ layout.readout_matrix(kernels), scale)


@dataclass(frozen=True)
class CovariateRows:
    """What a fit of a covariate model reads besides the series: the layout, and `rows(i, ends)`, series
    i's raw `covariates` rows [len(ends), D] of its windows whose input ends at `ends` (the exporter's
    export/covariates.py `series_covariate_rows`)."""

    layout: CovariateLayout
    rows: Callable[[int, np.ndarray], np.ndarray]


def last_windows(histories: Sequence[np.ndarray], length: int) -> tuple[np.ndarray, np.ndarray]:
    """The last `length` values of each history [S, L] and their mask, the missing start masked (and 0;
    the one window rule, rsa_core.windows)."""
    held = np.array([min(len(h), length) for h in histories], dtype=np.int64).reshape(-1, 1)
    m = (np.arange(length) >= length - held).astype(np.float64)
    return tail_windows(histories, length, before=0.0), m


def window_ends(n: int, horizon: int, history: int) -> np.ndarray:
    """Where each training window of a series of n values ends (its input is v[end − L : end]): every end
    from max(history, 1) whose H targets lie in the series. `series_windows` draws these windows, and a
    covariate model's rows are cut at the same ends."""
    return np.arange(max(history, 1), n - horizon + 1)


def series_windows(
    v: np.ndarray, length: int, horizon: int, history: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every window of one series whose input has at least `history` values and whose H targets lie in
    it: inputs [n, L] (the start before the series masked), masks [n, L], targets [n, H]. Window i's
    input ends after value max(history, 1) + i."""
    n = len(v)
    ends = window_ends(n, horizon, history)
    if not len(ends):
        return None
    padded = np.concatenate([np.zeros(length), v])
    observed = np.concatenate([np.zeros(length), np.ones(n)])
    view = np.lib.stride_tricks.sliding_window_view
    x = view(padded, length)[ends]  # padded[end : end + L] = v[end - L : end]
    m = view(observed, length)[ends]
    t = view(v, horizon)[ends]
    return x, m, t


def forecast(
    weights: np.ndarray,
    histories: Sequence[np.ndarray],
    fit: FitSettings,
    kernels: np.ndarray,
    batch: int = 4096,
    layout: CovariateLayout | None = None,
    covariates: np.ndarray | None = None,
) -> np.ndarray:
    """The next H values [S, H] of each history (raw values, oldest first; shorter than L: masked at the
    start) by the read-out `weights` [F + 1, H]; a covariate model's `layout` with each history's raw
    `covariates` row [S, D]."""
    if (layout is None) != (covariates is None):
        raise ValueError("covariates are given to a model without them, or missing for one with them")
    length = kernels.shape[1]
    out = np.empty((len(histories), fit.horizon))
    for a in range(0, len(histories), batch):
        x, m = last_windows(histories[a : a + batch], length)
        f, s = features(x, m, fit.period, fit.n_lags, kernels)
        if layout is not None and covariates is not None:
            f = np.concatenate([f, covariate_features(layout, covariates[a : a + batch], kernels, s)], 1)
        out[a : a + len(x)] = (f @ weights[:-1] + weights[-1]) * s[:, None]
    return out


# -- the fit --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Batch:
    """One buffer of windows as every pass reads it: features, normalised targets, row weights (before
    IRLS) and each window's seasonal-naive error in units of its scale."""

    f: np.ndarray
    t: np.ndarray
    w: np.ndarray
    d: np.ndarray


def _batches(
    series: Iterable[np.ndarray], fit: FitSettings, kernels: np.ndarray, covariates: CovariateRows | None
) -> Iterator[_Batch]:
    length = kernels.shape[1]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    rows = 0
    mix = None if covariates is None else covariates.layout.readout_matrix(kernels)

    def batch() -> _Batch:
        x, m, t, w, c = (np.concatenate(p) for p in zip(*parts, strict=True))
        f, s = features(x, m, fit.period, fit.n_lags, kernels)
        if covariates is not None and mix is not None:  # covariate_features with the mix computed once
            layout = covariates.layout
            f = np.concatenate([f, layout.scaled_features(layout.standardise(c) @ mix, s)], 1)
        d = naive_error(x, m, fit.period) / s
        if fit.row_scale == "mase":  # errors in units of the window's own seasonal-naive error
            w = w / np.maximum(d, fit.mase_floor)[:, None] ** 2
        return _Batch(f, t / s[:, None], w, d)

    for i, v in enumerate(series):
        win = series_windows(np.asarray(v, dtype=np.float64), length, fit.horizon, fit.train_min)
        if win is None:
            continue
        x, m, t = win
        w = np.full((len(x), 1), 1.0 / len(x) if fit.weighting == "series" else 1.0)
        if covariates is not None:  # the windows' ends, as series_windows draws them
            c = covariates.rows(i, window_ends(len(v), fit.horizon, fit.train_min))
        else:
            c = np.zeros((len(x), 0))
        parts.append((x, m, t, w, c))
        rows += len(x)
        if rows >= BUFFER_ROWS:
            yield batch()
            parts, rows = [], 0
    if parts:
        yield batch()


def _equations(
    batches: Iterable[_Batch],
    fit: FitSettings,
    previous: np.ndarray | None,
    check: Callable[[], None] | None,
) -> NormalEquations | None:
    eq: NormalEquations | None = None
    for b in batches:
        w = b.w
        if previous is not None:  # IRLS toward the absolute error: weigh by 1 / |residual|
            r = np.abs(b.t - (b.f @ previous[:-1] + previous[-1])).mean(1)
            if fit.row_scale == "mase":
                r = r / np.maximum(b.d, fit.mase_floor)
            w = w / np.maximum(r, fit.irls_floor)[:, None]
        if eq is None:
            eq = NormalEquations(b.f.shape[1], fit.horizon)
        eq.add(b.f, b.t, w)
        if check is not None:
            check()
    return eq


def accumulate(
    series: Iterable[np.ndarray],
    fit: FitSettings,
    kernels: np.ndarray,
    previous: np.ndarray | None = None,
    check: Callable[[], None] | None = None,
    covariates: CovariateRows | None = None,
) -> NormalEquations | None:
    """One pass's normal equations over every window of `series` (None when none has a window), rows
    weighed by `fit`'s rules and, with `previous` (the last pass's solution), by IRLS."""
    return _equations(_batches(series, fit, kernels, covariates), fit, previous, check)


def fit_weights(
    series: Iterable[np.ndarray],
    fit: FitSettings,
    kernels: np.ndarray,
    check: Callable[[], None] | None = None,
    covariates: CovariateRows | None = None,
) -> np.ndarray:
    """The read-out [F + 1, H] fitted on every window of every series, read one at a time, once per pass:
    IRLS passes (`fit.irls` > 0) read them again, so they need a sequence; one pass takes any iterable.
    Series of at most CACHE_ROWS windows in all keep their features between passes (the same numbers,
    computed once: the service's fits); more are read again, so memory stays bounded. `check()` runs
    after each batch of windows (a time budget raises there). ValueError when no series has a window."""
    if fit.irls and not isinstance(series, Sequence):
        raise ValueError("cfg.irls > 0 reads the series once per pass: give a sequence, or set irls = 0")
    cached: list[_Batch] | None = None
    if fit.irls and isinstance(series, Sequence) and sum(training_windows(series, fit)) <= CACHE_ROWS:
        cached = list(_batches(series, fit, kernels, covariates))

    def equations(previous: np.ndarray | None) -> NormalEquations | None:
        batches = cached if cached is not None else _batches(series, fit, kernels, covariates)
        return _equations(batches, fit, previous, check)

    return solve_passes(fit, equations)


def solve_passes(
    fit: FitSettings, equations: Callable[[np.ndarray | None], NormalEquations | None]
) -> np.ndarray:
    """The read-out [F + 1, H] of `1 + fit.irls` passes: `equations(previous)` is one pass's normal
    equations over every window (weighed by the previous pass's solution; None on the first), or None
    where no series has a window; each pass is solved at `fit.ridge`. The one loop of the in-process fit
    (`fit_weights`) and of batch/fit.py's distributed one, which differ only in where the equations are
    summed. ValueError when no series has a window."""
    sol: np.ndarray | None = None
    for _ in range(1 + fit.irls):
        eq = equations(sol)
        if eq is None:
            raise ValueError(
                f"no series has a window: each needs at least train_history + horizon = "
                f"{fit.train_min} + {fit.horizon} values"
            )
        sol = eq.solve(fit.ridge)[0]
    assert sol is not None
    return sol


def training_windows(series: Sequence[np.ndarray], fit: FitSettings) -> list[int]:
    """How many training windows each series holds (`series_windows`' count at `fit.train_min`)."""
    return [max(0, len(v) - fit.horizon + 1 - max(fit.train_min, 1)) for v in series]


# -- interval widths ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """Interval widths calibrated on held-out windows: the manifest's `intervals` block (None when no
    level could be), the levels left out and why, and how many windows scored."""

    intervals: dict[str, Any] | None
    dropped: dict[float, str]
    windows: int
    series: int
    # Each scored window's |error| / spread [windows, H] (empty when none was scored): the exporter's
    # coverage report per series group (export/global_onnx.py).
    scores: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    # How many of `scores`' rows each series holding windows gave, in order.
    per_series: tuple[int, ...] = ()


def calibrate(
    series: Sequence[np.ndarray],
    spec: ReadoutSpec,
    levels: Sequence[float],
    tail: Callable[[int], int],
    check: Callable[[], None] | None = None,
    covariates: CovariateRows | None = None,
    local: LocalSpec | None = None,
    drift: bool = False,
) -> Calibration:
    """Split-conformal widths of a read-out of `spec`'s settings, per horizon step, pooled across series
    (of a hybrid's forecast, with its `local` half fitted on each window as the service fits it).

    Each series of n values holds out its last `tail(n)` (at least H) values: a read-out is fitted on what
    comes before, and every window whose H targets lie in the held-out part (its input at least
    min_history values) is forecast. Each absolute error is divided by the spread the service computes
    from the same window (`window_scale`: the window's mean |x_t − x_{t−period}| over observed values);
    per horizon step the conformal quantile of the pooled scores is the width, in units of that spread.
    A level needs ceil((n + 1)·level) <= n windows. With tail(n) = H this is the exporter's calibration
    (one window per series: its last H values). A covariate model's fit and forecasts read `covariates`
    (its rows indexed by the position of the series in `series`).

    `drift`: the same calibration again one origin earlier (every series H values shorter), and each
    level's widths times `drift_factor` of the two origins' scores on the series scored at both. On M3
    and Tourism (issue 43, the hybrid) the scores fall as the origin moves towards the end of the series
    (more history for the local models; the read-out's own age changed nothing), so the last origin's
    widths were too wide for the forecast served from the whole series: 80% intervals covered 80.9-85.2%
    on validation windows (each series' last H training values held out), 83.4% on average. The factor
    is at most 1 (`drift_factor`); the calibration block says which rule (`rule`) and the factors."""
    fit, L, H = spec.fit, spec.input_length, spec.fit.horizon
    W = L if local is None else max(L, local.length)  # the served window: the read-out reads its last L
    kernels = spec.kernels()
    arrays = [np.asarray(v, dtype=np.float64) for v in series]
    index = [i for i, v in enumerate(arrays) if len(v) >= spec.min_history + H]
    held = [(arrays[i], max(H, tail(len(arrays[i])))) for i in index]
    ordered = sorted(levels)

    def nothing(why: str, windows: int = 0, n_series: int = 0) -> Calibration:
        return Calibration(None, {float(lv): why for lv in ordered}, windows, n_series)

    if not held:
        return nothing(f"no series holds min_history + horizon = {spec.min_history} + {H} values")
    try:
        scores, counts = _held_out_scores(held, index, spec, W, kernels, check, covariates, local)
    except ValueError:
        return nothing(
            f"no series leaves train_history + horizon = {fit.train_min} + {H} values to fit on "
            "before its calibration tail"
        )
    n = len(scores)
    ok = [lv for lv in ordered if level_fits(n, lv)]
    dropped = {
        float(lv): f"{n} calibration windows are too few: level {lv:g} needs at least "
        f"{math.ceil(lv / (100 - lv)) if lv < 100 else 'infinitely many'}"
        for lv in ordered
        if lv not in ok
    }
    if not ok:
        return Calibration(None, dropped, n, len(held), scores, tuple(c for c in counts if c))
    factors, said = None, None
    if drift:
        factors, said = _drift(held, index, counts, scores, ok, spec, W, kernels, check, covariates, local)
    intervals = pooled_intervals(scores, ok, L, fit.period, factors)
    intervals["calibration"] = {
        "series": len(held),
        "windows": n,
        "pooled": "across series, per horizon step",
        "dropped_levels": list(dropped),
        "rule": "split_conformal" if factors is None else "split_conformal_drift",
        **({} if said is None else {"drift": said}),
    }
    return Calibration(intervals, dropped, n, len(held), scores, tuple(c for c in counts if c))


def _held_out_scores(
    held: Sequence[tuple[np.ndarray, int]],
    index: Sequence[int],
    spec: ReadoutSpec,
    window: int,
    kernels: np.ndarray,
    check: Callable[[], None] | None,
    covariates: CovariateRows | None,
    local: LocalSpec | None,
) -> tuple[np.ndarray, list[int]]:
    """`calibrate`'s scores [n, H] (|error| / the service's spread) of every window whose targets lie in
    the held-out tail k of each (series, k) in `held`, by a read-out fitted on what comes before, and how
    many windows each gave (0 for none; series `index[j]` of the caller's covariate rows). ValueError
    where no series leaves a training window before its tail."""
    fit, L, H = spec.fit, spec.input_length, spec.fit.horizon
    inner = (
        None
        if covariates is None
        else CovariateRows(covariates.layout, lambda j, ends: covariates.rows(index[j], ends))
    )
    weights = fit_weights([v[:-k] for v, k in held], fit, kernels, check, inner)
    xs, ms, ts, cs, counts = [], [], [], [], []
    for j, (v, k) in enumerate(held):
        win = series_windows(v, window, H, spec.min_history)
        if win is None:
            counts.append(0)
            continue
        first = max(len(v) - k - max(spec.min_history, 1), 0)  # windows whose input ends at n − k or later
        counts.append(len(win[0]) - first)
        xs.append(win[0][first:])
        ms.append(win[1][first:])
        ts.append(win[2][first:])
        if covariates is not None:
            cs.append(covariates.rows(index[j], window_ends(len(v), H, spec.min_history)[first:]))
    x_all, m_all, t = np.concatenate(xs), np.concatenate(ms), np.concatenate(ts)
    x, m = x_all[:, window - L :], m_all[:, window - L :]
    f, s = features(x, m, fit.period, fit.n_lags, kernels)
    if covariates is not None:
        f = np.concatenate([f, covariate_features(covariates.layout, np.concatenate(cs), kernels, s)], 1)
    predicted = (f @ weights[:-1] + weights[-1]) * s[:, None]
    if local is not None:  # the window as the service feeds it: float32, NaN before the series' start
        predicted = local.combine(predicted, np.where(m_all > 0, x_all, np.nan).astype(np.float32))
    errors = np.abs(t - predicted)  # [n, H]
    return errors / service_spread(x, m, fit.period)[:, None], counts


def drift_factor(later: np.ndarray, earlier: np.ndarray, level: float) -> float:
    """How much a level's pooled widths shrank from one origin to the next, H values later, on the same
    series: the geometric mean over the horizon steps of the conformal quantiles' ratio (later / earlier;
    steps where either is 0 left out), capped at 1. Measured on validation windows (each series' last H
    training values held out; issue 43, the hybrid): over the levels 20-80%, 0.91-0.98 on the four M3
    sets and Tourism yearly, but 1.07 and 1.12 on Tourism monthly and quarterly, whose later origin was
    itself too wide for the windows after it (a period's shock common to the series, not series growing
    less predictable): the cap leaves those as the split-conformal quantile has them."""
    a, b = conformal_quantile(later, level / 100), conformal_quantile(earlier, level / 100)
    use = (a > 0) & (b > 0)
    if not use.any():
        return 1.0
    return float(min(np.exp(np.mean(np.log(a[use] / b[use]))), 1.0))


def _drift(
    held: Sequence[tuple[np.ndarray, int]],
    index: Sequence[int],
    counts: Sequence[int],
    scores: np.ndarray,
    levels: Sequence[float],
    spec: ReadoutSpec,
    window: int,
    kernels: np.ndarray,
    check: Callable[[], None] | None,
    covariates: CovariateRows | None,
    local: LocalSpec | None,
) -> tuple[list[float] | None, dict[str, Any]]:
    """`calibrate`'s drift: (each level's factor, or None where the earlier origin scores too few windows
    or cannot be fitted; what the calibration block says). Series j's windows are its rows of `scores`
    in order (`counts`, one per series of `held`); the earlier origin holds out the same tail of each
    series H values shorter."""
    H = spec.fit.horizon
    keep = [j for j, (v, k) in enumerate(held) if len(v) - H >= spec.min_history + max(H, k)]
    earlier = [(held[j][0][:-H], held[j][1]) for j in keep]
    said: dict[str, Any] = {"origin": f"{H} values earlier", "series": len(keep)}
    try:
        before, before_counts = _held_out_scores(
            earlier, [index[j] for j in keep], spec, window, kernels, check, covariates, local
        )
    except ValueError:
        return None, {**said, "factors": None, "why": "no series leaves a training window before it"}
    # the later origin's windows of the series the earlier one scored (series whose windows both gave)
    starts = np.concatenate([[0], np.cumsum(counts)])
    scored = set(keep[i] for i, c in enumerate(before_counts) if c)
    later = (
        np.concatenate([scores[starts[j] : starts[j + 1]] for j in sorted(scored)]) if scored else scores[:0]
    )
    said["windows"] = len(before)
    if not all(level_fits(len(before), lv) and level_fits(len(later), lv) for lv in levels):
        return None, {**said, "factors": None, "why": "too few windows at the earlier origin"}
    factors = [drift_factor(later, before, lv) for lv in levels]
    return factors, {
        **said,
        "factors": {f"{lv:g}": round(f, 6) for lv, f in zip(levels, factors, strict=True)},
    }


def service_spread(x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Each window's spread [n] as the service computes it from the window it forecasts (`window_scale`:
    the mean |x_t − x_{t−period}| over observed pairs, floored): x, m [n, L] the windows and their masks."""
    window = np.where(m > 0, x, np.nan).astype(np.float32)[:, :, None]  # the service's window
    lag = max(period, 1)
    return window_scale(window, "mean_abs_diff", x.shape[1], 1.0, [SCALE_FLOOR], lag)[:, 0, 0].astype(
        np.float64
    )


def pooled_intervals(
    scores: np.ndarray,
    levels: Sequence[float],
    input_length: int,
    period: int,
    factors: Sequence[float] | None = None,
) -> dict[str, Any]:
    """The manifest's `intervals` (without its `calibration` report) from pooled scores [n, H] (|error| in
    units of `service_spread`) at `levels` that fit n: per horizon step the conformal quantile of the
    scores (times each level's factor, `calibrate`'s drift), made non-decreasing across levels. One
    definition for the read-out's and the transformer's."""
    quantiles = np.array([conformal_quantile(scores, lv / 100) for lv in levels])
    if factors is not None:
        quantiles = quantiles * np.asarray(factors, dtype=np.float64)[:, None]
    widths = np.maximum.accumulate(quantiles, axis=0)
    return {
        "method": "split_conformal",
        "residuals": "absolute",
        "scale": "window",
        "window_scale": {
            "statistic": "mean_abs_diff",
            "rows": input_length,
            "lag": max(period, 1),
            "power": 1.0,
            "floor": [SCALE_FLOOR],
        },
        "levels": list(levels),
        "widths": [[[float(x)] for x in w] for w in widths],
    }
