"""The read-out's ridge fit: float64 normal equations accumulated over batches of windows, the rows
weighed by the fit's rules, solved once per IRLS pass."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from app.artifacts.readout.spec import FitSettings, Lift
from app.artifacts.readout.windows import (
    CovariateRows,
    features,
    fit_ends,
    naive_error,
    output_scales,
    windows_at,
)

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
        f, s = features(x, m, fit.period, fit.n_lags, kernels, fit.lift, fit.mirror)
        if covariates is not None and mix is not None:  # covariate_features with the mix computed once
            layout = covariates.layout
            f = np.concatenate([f, layout.scaled_features(layout.standardise(c) @ mix, s)], 1)
        d = naive_error(x, m, fit.period) / np.abs(s)
        if fit.row_scale == "mase":  # errors in units of the window's own seasonal-naive error
            w = w / np.maximum(d, fit.mase_floor)[:, None] ** 2
        # An all-zero window forecasts zeros whatever the weights. A still one (hold_still) stays: left out,
        # a lone constant series would leave the fit on request nothing to solve.
        w = w * (output_scales(x, m, fit.period) > 0)[:, None]
        return _Batch(f, t / s[:, None], w, d)

    for i, v in enumerate(series):
        v = np.asarray(v, dtype=np.float64)
        ends = fit_ends(len(v), fit.horizon, fit.train_min)
        # A long series' windows in pieces of a buffer: its [n, L] inputs would hold every window at once.
        for at in range(0, len(ends), BUFFER_ROWS):
            part = ends[at : at + BUFFER_ROWS]
            x, m, t = windows_at(v, length, fit.horizon, part)
            w = np.full((len(x), 1), 1.0 / len(ends) if fit.weighting == "series" else 1.0)
            c = np.zeros((len(x), 0)) if covariates is None else covariates.rows(i, part)
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
    Series of at most `cache_rows(fit)` windows in all keep their features between passes (the same numbers,
    computed once: the service's fits); more are read again, so memory stays bounded. `check()` runs
    after each batch of windows (a time budget raises there). ValueError when no series has a window."""
    if fit.irls and not isinstance(series, Sequence):
        raise ValueError("cfg.irls > 0 reads the series once per pass: give a sequence, or set irls = 0")
    cached: list[_Batch] | None = None
    if fit.irls and isinstance(series, Sequence) and sum(training_windows(series, fit)) <= cache_rows(fit):
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


def cache_rows(fit: FitSettings) -> int:
    """The most windows whose features a fit keeps between its passes: CACHE_ROWS, fewer with a lift (its
    outputs are features too: the same memory for wider rows)."""
    if fit.lift is None:
        return CACHE_ROWS
    base = len(fit.lift.mean)
    return CACHE_ROWS * base // (base + fit.lift.width)


def fit_lift(
    series: Sequence[np.ndarray], fit: FitSettings, kernels: np.ndarray, width: int, seed: int
) -> Lift:
    """A `Lift` of `width` outputs drawn from `seed`, standardising by the mean and standard deviation of
    the features of every training window of `series` (as `fit_weights` draws them, without a lift).
    ValueError when no series has a window."""
    plain = replace(fit, lift=None)
    total, squares, count = 0.0, 0.0, 0
    for b in _batches(series, plain, kernels, None):
        total = total + b.f.sum(0)
        squares = squares + (b.f * b.f).sum(0)
        count += len(b.f)
    if not count:
        raise ValueError(
            f"no series has a window: each needs at least train_history + horizon = "
            f"{fit.train_min} + {fit.horizon} values"
        )
    mean = np.asarray(total) / count
    std = np.sqrt(np.maximum(np.asarray(squares) / count - mean**2, 0.0))
    std = np.where(std > 1e-6, std, 1.0)  # a constant feature (the missing share of full windows) reads as 0
    return Lift(width, seed, tuple(map(float, mean)), tuple(map(float, std)))


def training_windows(series: Sequence[np.ndarray], fit: FitSettings) -> list[int]:
    """How many windows of each series a fit reads (`fit_ends`' count at `fit.train_min`)."""
    return [len(fit_ends(len(v), fit.horizon, fit.train_min)) for v in series]
