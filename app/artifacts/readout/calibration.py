"""A read-out's interval widths: split-conformal, pooled across series per horizon step, calibrated on
held-out windows (optionally corrected for the drift to the last origin), in units of the spread the
service computes from each window it forecasts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.artifacts.conformal import conformal_quantile, level_fits
from app.artifacts.contract import window_scale
from app.artifacts.hybrid import LocalSpec
from app.artifacts.readout.fit import fit_weights
from app.artifacts.readout.spec import ReadoutSpec
from app.artifacts.readout.windows import (
    CovariateRows,
    covariate_features,
    features,
    series_windows,
    window_ends,
)

# A spread no real series has: the floor of each series' seasonal-naive error in the interval widths, so
# that a flat window's interval is (almost) the point, never a division by zero.
SCALE_FLOOR = 1e-9
# The fewest windows beyond a level's conformal quantile, at each of two origins, for the quantiles'
# ratio to be that level's drift factor (`level_factors`). On validation windows (`python -m
# bench.drift_backtest`, results/intervals/drift_backtest.json: the rule set one origin earlier, scored
# on the last H training values of M3, Tourism and the pretrained panels) each level's own 99% factor,
# from the few windows beyond it, left the 99% interval covering 93.1-96.2% on M3 monthly, M3 yearly
# and Tourism yearly; with the level below's factor where fewer than 20 lie beyond, 98.6-99.6%. (The
# first pretrained-yearly build's 99% factor was 0.27, below its 95% one: its 99% widths were its 95%.)
TAIL_WINDOWS = 20


@dataclass(frozen=True)
class Calibration:
    """Interval widths calibrated on held-out windows: the manifest's `intervals` block (None when no
    level could be), the levels left out and why, and how many windows scored."""

    intervals: dict[str, Any] | None
    dropped: dict[float, str]
    windows: int
    series: int
    # Each scored window's |error| / spread [windows, H] (empty when none was scored): the exporter's
    # coverage report per series group (export/global_models/calibration.py).
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
    is at most 1 (`drift_factor`; a level whose quantile rests on too few windows beyond it takes the
    factor of the level below, `level_factors`). The rule is then checked one origin earlier still
    (`drift_check`) and kept only where it brings that check's coverage no further from the levels
    than the plain quantiles do. The calibration block says which rule (`rule`), the factors and the
    check."""
    fit, L, H = spec.fit, spec.input_length, spec.fit.horizon
    W = L if local is None else max(L, local.length)  # the served window: the read-out reads its last L
    how = HeldOut(spec, W, spec.kernels(), check, covariates, local)
    arrays = [np.asarray(v, dtype=np.float64) for v in series]
    index = [i for i, v in enumerate(arrays) if len(v) >= spec.min_history + H]
    held = [(arrays[i], max(H, tail(len(arrays[i])))) for i in index]
    ordered = sorted(levels)

    def nothing(why: str, windows: int = 0, n_series: int = 0) -> Calibration:
        return Calibration(None, {float(lv): why for lv in ordered}, windows, n_series)

    if not held:
        return nothing(f"no series holds min_history + horizon = {spec.min_history} + {H} values")
    try:
        scores, counts = held_out_scores(held, index, how)
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
        factors, said = _drift(held, index, counts, scores, ok, how)
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


@dataclass(frozen=True)
class HeldOut:
    """How `calibrate` scores held-out windows, at every origin: the read-out's settings and kernels, the
    served window's length (`window`: the read-out reads its last L, a hybrid's local half all of it), the
    time check, a covariate model's rows and a hybrid's local half."""

    spec: ReadoutSpec
    window: int
    kernels: np.ndarray
    check: Callable[[], None] | None
    covariates: CovariateRows | None
    local: LocalSpec | None


def held_out_scores(
    held: Sequence[tuple[np.ndarray, int]], index: Sequence[int], how: HeldOut
) -> tuple[np.ndarray, list[int]]:
    """`calibrate`'s scores [n, H] (|error| / the service's spread) of every window whose targets lie in
    the held-out tail k of each (series, k) in `held`, by a read-out fitted on what comes before, and how
    many windows each gave (0 for none; series `index[j]` of the caller's covariate rows). ValueError
    where no series leaves a training window before its tail."""
    spec, window, kernels, covariates, local = how.spec, how.window, how.kernels, how.covariates, how.local
    fit, L, H = spec.fit, spec.input_length, spec.fit.horizon
    inner = (
        None
        if covariates is None
        else CovariateRows(covariates.layout, lambda j, ends: covariates.rows(index[j], ends))
    )
    weights = fit_weights([v[:-k] for v, k in held], fit, kernels, how.check, inner)
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


def level_factors(later: np.ndarray, earlier: np.ndarray, levels: Sequence[float]) -> list[float]:
    """Each level's drift factor (`drift_factor`) from the scores [n, H] of the same series at two origins,
    in order of `levels` (ascending). A level with fewer than TAIL_WINDOWS windows beyond its quantile at
    either origin takes the factor of the highest level below it that has them (1 where none has): the
    ratio of two extreme quantiles of a few windows each is noise, not drift."""
    n = min(len(later), len(earlier))
    out, last = [], 1.0
    for lv in levels:
        if n * (1 - lv / 100) >= TAIL_WINDOWS:
            last = drift_factor(later, earlier, lv)
        out.append(last)
    return out


def _coverage(scores: np.ndarray, widths: np.ndarray) -> list[float]:
    """The share of `scores` [n, H] within each level's widths [levels, H]."""
    return [float((scores <= w[None, :]).mean()) for w in widths]


def drift_check(
    latest: np.ndarray, later: np.ndarray, earlier: np.ndarray, levels: Sequence[float]
) -> dict[str, Any]:
    """Whether the drift rule would have helped one origin earlier: widths set at the origin H values
    before the last (`later`'s quantiles, times the factors of `later` against `earlier`, H values before
    it) scored on the last origin's windows (`latest`), all three of the same series; `kept` where the
    factors leave the mean |coverage − level| no larger than the plain quantiles do. On validation windows
    (`python -m bench.drift_backtest`: M3, Tourism and the pretrained panels) the factors moved that
    coverage towards the levels on 3 of 10 panels and away on 5 (pretrained-yearly's 80%: 84.6% plain,
    64.6% with the factors): so the rule is checked on each panel, not assumed."""
    quantiles = np.array([conformal_quantile(later, lv / 100) for lv in levels])
    factors = np.asarray(level_factors(later, earlier, levels))[:, None]
    plain = _coverage(latest, np.maximum.accumulate(quantiles, axis=0))
    drifted = _coverage(latest, np.maximum.accumulate(quantiles * factors, axis=0))

    def miss(coverage: list[float]) -> float:
        return float(np.mean([abs(c - lv / 100) for c, lv in zip(coverage, levels, strict=True)]))

    return {
        "origins": "set H and 2H values before the last, scored at the last",
        "windows": len(latest),
        "coverage_plain": {f"{lv:g}": round(c, 4) for lv, c in zip(levels, plain, strict=True)},
        "coverage_drift": {f"{lv:g}": round(c, 4) for lv, c in zip(levels, drifted, strict=True)},
        "kept": miss(drifted) <= miss(plain),
    }


def _rows(scores: np.ndarray, counts: Sequence[int], pick: Sequence[int]) -> np.ndarray:
    """The rows of `scores` of the series `pick` (positions in `counts`, each series' number of rows)."""
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    return np.concatenate([scores[starts[j] : starts[j + 1]] for j in pick]) if len(pick) else scores[:0]


def _drift(
    held: Sequence[tuple[np.ndarray, int]],
    index: Sequence[int],
    counts: Sequence[int],
    scores: np.ndarray,
    levels: Sequence[float],
    how: HeldOut,
) -> tuple[list[float] | None, dict[str, Any]]:
    """`calibrate`'s drift: (each level's factor, or None where the earlier origin scores too few windows
    or cannot be fitted; what the calibration block says). Series j's windows are its rows of `scores`
    in order (`counts`, one per series of `held`); the earlier origin holds out the same tail of each
    series H values shorter. The factors are then checked (`drift_check`) on the series that also reach
    an origin 2H values before the last: None where they fail it; kept where no check can be made (too
    few series or windows that long: the block says why)."""
    spec, H = how.spec, how.spec.fit.horizon
    keep = [j for j, (v, k) in enumerate(held) if len(v) - H >= spec.min_history + max(H, k)]
    earlier = [(held[j][0][:-H], held[j][1]) for j in keep]
    said: dict[str, Any] = {"origin": f"{H} values earlier", "series": len(keep)}
    try:
        before, before_counts = held_out_scores(earlier, [index[j] for j in keep], how)
    except ValueError:
        return None, {**said, "factors": None, "why": "no series leaves a training window before it"}
    # the later origin's windows of the series the earlier one scored (series whose windows both gave)
    scored = [i for i, c in enumerate(before_counts) if c]  # positions in `keep`
    later = _rows(scores, counts, [keep[i] for i in scored])
    said["windows"] = len(before)
    if not all(level_fits(len(before), lv) and level_fits(len(later), lv) for lv in levels):
        return None, {**said, "factors": None, "why": "too few windows at the earlier origin"}
    factors = level_factors(later, before, levels)
    said["factors"] = {f"{lv:g}": round(f, 6) for lv, f in zip(levels, factors, strict=True)}
    # the check: the series of `scored` long enough for a third origin, 2H values before the last
    third = [
        i for i in scored if len(held[keep[i]][0]) - 2 * H >= spec.min_history + max(H, held[keep[i]][1])
    ]
    if not third:
        return factors, {**said, "check": {"why": "no series long enough for a third origin"}}
    try:
        earliest, earliest_counts = held_out_scores(
            [(held[keep[i]][0][: -2 * H], held[keep[i]][1]) for i in third],
            [index[keep[i]] for i in third],
            how,
        )
    except ValueError:
        return factors, {**said, "check": {"why": "no series leaves a training window before a third origin"}}
    checked = [third[p] for p, c in enumerate(earliest_counts) if c]
    latest = _rows(scores, counts, [keep[i] for i in checked])
    if not all(level_fits(len(earliest), lv) and level_fits(len(latest), lv) for lv in levels):
        return factors, {**said, "check": {"why": "too few windows at a third origin"}}
    said["check"] = drift_check(latest, _rows(before, before_counts, checked), earliest, levels)
    return (factors if said["check"]["kept"] else None), said


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
