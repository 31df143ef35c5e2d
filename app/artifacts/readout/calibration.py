"""A read-out's interval widths: split-conformal, pooled across series per horizon step, calibrated on
held-out windows, in units of the spread the service computes from each window it forecasts.

No correction for the drift between origins: a rule that narrowed the widths by how much the scores
shrank from one origin to the next, checked one origin earlier still, was served from issue 43 to this
change. Backtested on validation windows at four origins (`python -m bench.drift_backtest`,
results/intervals/drift_backtest.json: the rule set at origin 1 and scored on the last H training values
of M3, Tourism and the pretrained panels), the checked rule left coverage as far from the levels as the
plain quantiles on 9 of 10 panels and further on one (pretrained yearly: mean miss 4.1 points against
1.4); on the official hold-outs the panels where its check kept the factors under-covered (M3 quarterly
72.6% and Tourism yearly 76.9% at 80%). Nor are origins pooled: the quantiles of the last two origins'
windows together (the bench's `pooled-2`) left coverage nearer the levels than the last origin's alone
when set at origin 1 (mean miss 2.67 against 2.94 points over the ten panels) but further when set one
origin earlier (3.55 against 2.17), and on the official hold-outs they over-covered every competition
set more than the plain quantiles (80%: 81.0-91.0% against 79.5-88.7%, `python -m bench.competitions
--all --no-stats` on 4d43a78). The bench keeps the rules it measured."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np

from app.artifacts.conformal import conformal_quantile, level_fits, windows_needed
from app.artifacts.contract import window_scale
from app.artifacts.readout.fit import fit_weights
from app.artifacts.readout.spec import ReadoutSpec
from app.artifacts.readout.windows import (
    CovariateRows,
    covariate_features,
    features,
    raw_forecast,
    series_windows,
    window_ends,
)

if TYPE_CHECKING:  # the hybrid reads the read-out's still rule (hybrid.py imports this package)
    from app.artifacts.hybrid import LocalSpec

# The highest level a calibration too small for it gets by extrapolation (`pooled_intervals`): the
# levels the manifests offer by default; a tail beyond 99% is the windows' to show, not an assumed shape's.
EXTRAPOLATED_UP_TO = 99.0
# The lowest calibrated level a higher one is extrapolated from (4 windows calibrate 80%): from the
# median of 1-3 windows the tail is a guess. The 313 of 645 lone M3 yearly series with 1-3 windows,
# 80-99% extrapolated from 50% by `tail_ratio`, covered 0.581 / 0.682 / 0.741 / 0.821 of their test values
# (a scratch rescoring of bench.few_series_intervals' groups, 2026-12-05): such levels are left out.
EXTRAPOLATED_FROM = 80.0
# The levels that hold a higher one calibrated by the largest window alone (`floored_levels`), whether
# asked or not (so a level's width never depends on which others a request asks): the highest of them a
# lower rank calibrates. The median of 4-8 windows holds their 80%, which is their largest: lone M3 yearly
# series (8 windows at the median) covered 0.761 / 0.853 / 0.893 / 0.943 at 80 / 90 / 95 / 99% with the
# floor from 80% up, 0.803 / 0.895 / 0.930 / 0.966 with it from 50% too (bench.few_series_intervals --data
# M3:yearly --sizes 1, 2026-12-05; docs/panels.md).
FLOOR_BASES = (50.0, 80.0, 90.0, 95.0)

# The share of the held-out windows shorter than a block's end from which the pooled widths serve that
# block (`short_history_scores`): they hold enough such windows to answer for them.
POOLED_SHORT_SHARE = 0.1

# A spread no real series has: the floor of each series' seasonal-naive error in the interval widths, so
# that a flat window's interval is (almost) the point, never a division by zero. Far below any value the
# read-out takes (TINY): 1e-9 until 2026-12-06 made the 80% interval of 1e-12 times a seasonal series 697
# times its width at scale 1, a series at 1e-15 697,000 times (pretrained-monthly, the service).
SCALE_FLOOR = 1e-30


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
    # How many of `scores`' rows each series holding windows gave, in order, and those series' positions
    # in the `series` calibrated.
    per_series: tuple[int, ...] = ()
    positions: tuple[int, ...] = ()
    # The levels whose widths were extrapolated from the highest the windows calibrate (`pooled_intervals`).
    extrapolated: tuple[float, ...] = ()


def calibrate(
    series: Sequence[np.ndarray],
    spec: ReadoutSpec,
    levels: Sequence[float],
    tail: Callable[[int], int],
    check: Callable[[], None] | None = None,
    covariates: CovariateRows | None = None,
    local: LocalSpec | None = None,
) -> Calibration:
    """Split-conformal widths of a read-out of `spec`'s settings, per horizon step, pooled across series
    (of a hybrid's forecast, with its `local` half fitted on each window as the service fits it).

    Each series of n values holds out its last `tail(n)` (at least H) values: a read-out is fitted on what
    comes before, and every window whose H targets lie in the held-out part (its input at least
    min_history values) is forecast. Each absolute error is divided by the spread the service computes
    from the same window (`window_scale`: the window's mean |x_t − x_{t−period}| over observed values);
    per horizon step the conformal quantile of the pooled scores is the width, in units of that spread.
    A level needs ceil((n + 1)·level) <= n windows; one up to EXTRAPOLATED_UP_TO beyond them is
    extrapolated from the highest they reach (`pooled_intervals`). With tail(n) = H this is the
    exporter's calibration (one window per series: its last H values). A covariate model's fit and
    forecasts read `covariates` (its rows indexed by the position of the series in `series`).

    A hybrid whose held-out windows calibrate no level from EXTRAPOLATED_FROM up (series too short for
    a training window before enough of them: one series of 48 monthly values at H 18 holds one) takes
    its widths from its local half's errors instead, where those reach it (`local_half_calibration`)."""
    L = spec.input_length
    W = L if local is None else max(L, local.length)  # the served window: the read-out reads its last L
    how = HeldOut(spec, W, spec.kernels(), check, covariates, local)
    arrays = [np.asarray(v, dtype=np.float64) for v in series]
    cal = _held_out_calibration(arrays, how, levels, tail)
    reached = cal.intervals is not None and max(cal.intervals["levels"]) >= EXTRAPOLATED_FROM
    if local is None or covariates is not None or reached:
        return cal
    return local_half_calibration(arrays, how, levels, cal.windows) or cal


def _held_out_calibration(
    arrays: Sequence[np.ndarray], how: HeldOut, levels: Sequence[float], tail: Callable[[int], int]
) -> Calibration:
    """`calibrate`'s widths from the held-out tails (its docstring)."""
    spec, covariates = how.spec, how.covariates
    fit, L, H = spec.fit, spec.input_length, spec.fit.horizon
    index = [i for i, v in enumerate(arrays) if len(v) >= spec.min_history + H]
    held = [(arrays[i], max(H, tail(len(arrays[i])))) for i in index]
    ordered = sorted(levels)

    def nothing(why: str, windows: int = 0, n_series: int = 0) -> Calibration:
        return Calibration(None, {float(lv): why for lv in ordered}, windows, n_series)

    if not held:
        return nothing(f"no series holds min_history + horizon = {spec.min_history} + {H} values")
    # Short series' windows read fewer values than the held-out ones, most of them full: their widths are
    # calibrated on the same windows cut as short (not for covariate models, whose rows are not cut).
    edges = history_edges(spec.min_history, fit.period, L) if covariates is None else []
    try:
        scores, counts, (edges, shorts) = held_out_scores(held, index, how, edges)
    except ValueError:
        return nothing(
            f"no series leaves train_history + horizon = {fit.train_min} + {H} values to fit on "
            "before its calibration tail"
        )
    n = len(scores)
    ok, extrapolated, left_out = level_plan(n, ordered)
    dropped = {float(lv): too_few(n, lv) for lv in left_out}
    per_series = tuple(c for c in counts if c)
    positions = tuple(i for i, c in zip(index, counts, strict=True) if c)
    if not ok:
        return Calibration(None, dropped, n, len(held), scores, per_series, positions)
    intervals = pooled_intervals(scores, ok + extrapolated, L, fit.period)  # ascending, as level_plan gives
    history = history_widths(shorts, edges, ok, extrapolated, intervals["widths"])
    if history is not None:
        intervals["history"] = history
    intervals["calibration"] = {
        "series": len(held),
        "windows": n,
        "pooled": "across series, per horizon step",
        "dropped_levels": list(dropped),
        "extrapolated_levels": extrapolated,
        "floored_levels": floored_levels(n, ok),
        "rule": "split_conformal",
    }
    return Calibration(intervals, dropped, n, len(held), scores, per_series, positions, tuple(extrapolated))


def local_half_calibration(
    arrays: Sequence[np.ndarray], how: HeldOut, levels: Sequence[float], held_out: int
) -> Calibration | None:
    """A hybrid's widths from its local half alone (`how.local`, its members' weighted forecast over their
    summed weight): scored at every window of every series whose input holds the members' `min_values`,
    each forecast by members fitted on that window's values alone, so every one is out of sample without
    a tail held out. None where they calibrate no level from EXTRAPOLATED_FROM up either. `held_out`: the
    windows the hybrid's own calibration scored (the manifest's report says both).

    Why the local half's errors stand for the hybrid's: it is most of the forecast where calibration is
    this short (few series take the widest member set in equal shares with the read-out: 7 of 8 shares
    on monthly data), and where both exist they cover alike. Scratch, 2026-12-08, series trained alone
    and scored on the official hold-out at 80 / 90 / 95%: 80 M3 monthly series of 60 values or more
    0.756 / 0.857 / 0.916 with the hybrid's own widths, 0.776 / 0.889 / 0.935 with these; 80 M3
    quarterly 0.831 / 0.927 / 0.961 and 0.852 / 0.923 / 0.961; 120 of M3 monthly's 340 series of 48-58
    values, which the hybrid's own calibration leaves one window (50% only), 0.810 / 0.928 / 0.961 for
    the 101 these give 80%. With it (`python -m bench.few_series_intervals`, results/intervals/
    few_series*.json, 2026-12-08, beside the fixed local half of few series): lone M3 monthly series
    1,086 → 1,373 of 1,428 given 80-99%, covered 0.798 / 0.893 / 0.940 at 80 / 90 / 95%; lone M3 yearly
    332 → 645 of 645, but 0.857 at 80%, too wide (docs/panels.md)."""
    local, spec = how.local, how.spec
    if local is None:
        return None
    L, H, period = spec.input_length, spec.fit.horizon, spec.fit.period
    parts, owner = [], []
    for i, v in enumerate(arrays):
        win = series_windows(v, how.window, H, local.min_values)
        if win is not None:
            parts.append(win)
            owner.append(np.full(len(win[0]), i))
    if not parts:
        return None
    x, m, t = (np.concatenate(p) for p in zip(*parts, strict=True))
    owners = np.concatenate(owner)
    if how.check is not None:
        how.check()
    windows = np.where(m > 0, x, np.nan).astype(np.float32)  # as the service feeds the members
    members, weight = local.feed(windows, L)
    scored = weight[:, 0] > 0
    predicted = members[scored] / weight[scored]
    spread = service_spread(x[scored, how.window - L :], m[scored, how.window - L :], period)
    scores = np.abs(t[scored] - predicted) / spread[:, None]
    n = len(scores)
    ok, extrapolated, left_out = level_plan(n, sorted(levels))
    if not ok or ok[-1] < EXTRAPOLATED_FROM:
        return None
    intervals = pooled_intervals(scores, ok + extrapolated, L, period)
    intervals["calibration"] = {
        "series": len(np.unique(owners[scored])),
        "windows": n,
        "pooled": "across series, per horizon step",
        "scored": "local_half",
        "held_out_windows": held_out,
        "dropped_levels": [float(lv) for lv in left_out],
        "extrapolated_levels": extrapolated,
        "floored_levels": floored_levels(n, ok),
        "rule": "split_conformal",
    }
    dropped = {float(lv): too_few(n, lv) for lv in left_out}
    positions, counts = np.unique(owners[scored], return_counts=True)
    return Calibration(
        intervals,
        dropped,
        n,
        len(positions),
        scores,
        tuple(int(c) for c in counts),
        tuple(int(i) for i in positions),
        tuple(extrapolated),
    )


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
    held: Sequence[tuple[np.ndarray, int]], index: Sequence[int], how: HeldOut, history: Sequence[int] = ()
) -> tuple[np.ndarray, list[int], tuple[list[int], list[np.ndarray]]]:
    """`calibrate`'s scores [n, H] (|error| / the service's spread) of every window whose targets lie in
    the held-out tail k of each (series, k) in `held`, by a read-out fitted on what comes before, and how
    many windows each gave (0 for none; series `index[j]` of the caller's covariate rows), and with
    `history` edges (`history_edges`) the short blocks kept and their scores (`short_history_scores`: the
    same windows cut to fewer values; none without). ValueError where no series leaves a training window
    before its tail."""
    spec, window, kernels, covariates = how.spec, how.window, how.kernels, how.covariates
    fit, H = spec.fit, spec.fit.horizon
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
    rows = np.concatenate(cs) if covariates is not None else None
    scores = _scores(weights, x_all, m_all, t, rows, how)
    shorts = short_history_scores(weights, x_all, m_all, t, how, history) if history else ([], [])
    return scores, counts, shorts


def _scores(
    weights: np.ndarray,
    x_all: np.ndarray,
    m_all: np.ndarray,
    t: np.ndarray,
    rows: np.ndarray | None,
    how: HeldOut,
) -> np.ndarray:
    """|error| / the service's spread [n, H] of the served windows x_all, m_all [n, W] (the read-out reads
    their last L) against targets t [n, H]; a covariate model's `rows`."""
    fit, L, kernels, local = how.spec.fit, how.spec.input_length, how.kernels, how.local
    x, m = x_all[:, how.window - L :], m_all[:, how.window - L :]
    f, s = features(x, m, fit.period, fit.n_lags, kernels, fit.lift, fit.mirror)
    if rows is not None and how.covariates is not None:
        f = np.concatenate([f, covariate_features(how.covariates.layout, rows, kernels, s)], 1)
    y = f @ weights[:-1] + weights[-1]
    predicted = raw_forecast(y, x, m, fit.period, rows is not None, fit.mirror)
    if local is not None:  # the window as the service feeds it: float32, NaN before the series' start
        predicted = local.combine(
            predicted,
            np.where(m_all > 0, x_all, np.nan).astype(np.float32),
            L if rows is None else None,
        )
    errors = np.abs(t - predicted)  # [n, H]
    return errors / service_spread(x, m, fit.period)[:, None]


def history_edges(min_history: int, period: int, input_length: int) -> list[int]:
    """The edges of the short-history blocks of a global read-out's widths (the manifest's
    `intervals.history.values`): min_history, one cycle and one cycle and a value (the spread's first
    pair a cycle apart, `window_scale`), then 1.5, 2, 3, 4, 6, 8... cycles below L, and L, from which a
    window is full. Empty when min_history >= L (every window the service forecasts is full)."""
    p = max(period, 1)
    multiples = [1.0, 1.5] + [float(2**i) for i in range(1, 12)] + [float(3 * 2**i) for i in range(0, 11)]
    inner = {math.ceil(p * m) for m in multiples} | {min_history} | ({p + 1} if p > 1 else set())
    edges = sorted(e for e in inner if min_history <= e < input_length)
    return [*edges, input_length] if edges else []


def short_history_scores(
    weights: np.ndarray,
    x_all: np.ndarray,
    m_all: np.ndarray,
    t: np.ndarray,
    how: HeldOut,
    edges: Sequence[int],
) -> tuple[list[int], list[np.ndarray]]:
    """The short blocks the held-out windows leave uncalibrated, and their scores: (edges, per block [n_k,
    H]). A block (values[k] to values[k + 1] − 1 observed values in the read-out's window) is kept while
    less than POOLED_SHORT_SHARE of the held-out windows hold fewer than values[k + 1] values: where more
    do, the pooled widths already hold such windows, and from that block on they serve. A kept block
    scores every held-out window holding values[k] or more, each cut to its last c values: its own count
    if below values[k + 1], else values[k] + i mod (values[k + 1] − values[k]) for the i-th of them, so
    that the block's counts are spread over it as the service's short series would be. Cut windows read
    as a series that began later: the read-out's masked start, the local half's NaN, the spread of what is
    left.

    Why not every block below L: the long series cut short are not the short series. M3 yearly's held-out
    windows hold 8-35 values, most fewer than L = 24; blocks up to 24, calibrated on the longer ones cut,
    had 80% widths of 2.75-8.68 spreads against the pooled 1.95-7.29, and its series of 16-23 values
    (265 of 645) covered their test values 94.2% against 89.3% (bench.competitions, 2026-12-07)."""
    L = how.spec.input_length
    seen = m_all[:, -L:].sum(axis=1).astype(np.int64)  # min(count, L): the values of a series of L or more
    blocks = short_blocks(seen, edges)
    out = []
    for low, high in blocks:
        rows, cut = block_cuts(seen, low, high)
        keep = np.arange(m_all.shape[1])[None, :] >= m_all.shape[1] - cut[:, None]
        out.append(_scores(weights, x_all[rows] * keep, m_all[rows] * keep, t[rows], None, how))
    return ([blocks[0][0], *(high for _, high in blocks)] if blocks else []), out


def block_cuts(seen: np.ndarray, low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    """The held-out windows a block of `low` to `high` − 1 values scores (those holding `low` or more of
    `seen`) and the values each is cut to: its own count below `high`, else low + i mod (high − low) for
    the i-th of them."""
    rows = np.flatnonzero(seen >= low)
    return rows, np.minimum(seen[rows], low + np.arange(len(rows)) % (high - low))


def short_blocks(seen: np.ndarray, edges: Sequence[int]) -> list[tuple[int, int]]:
    """The blocks of `edges` that held-out windows holding `seen` values each (in the read-out's window:
    min(count, L)) leave to cut windows (`short_history_scores`): in order, while less than
    POOLED_SHORT_SHARE of them hold fewer values than the block's end. Each scores the windows holding its
    first value or more (the fit on request's cost counts them: app/inference/refit.py `fit_work`)."""
    kept = []
    for low, high in pairwise(edges):
        if len(seen) and (seen < high).mean() >= POOLED_SHORT_SHARE:
            break
        kept.append((low, high))
    return kept


def history_widths(
    shorts: Sequence[np.ndarray],
    edges: Sequence[int],
    calibrated: Sequence[float],
    extrapolated: Sequence[float],
    main: list[Any],
) -> dict[str, Any] | None:
    """The manifest's `intervals.history` from each short block's scores (`short_history_scores`), or
    None without blocks: per block the widths `pooled_intervals` gives its scores at the main widths'
    levels where its windows calibrate every level the main ones do, never narrower than a block of more
    values or the main widths (taken from the longest block down): the blocks are of windows shorter than
    nearly every held-out one, and a short series is never given a narrower interval than the pooled one
    for want of windows."""
    if not shorts:
        return None
    levels = [*calibrated, *extrapolated]
    longer = np.asarray(main, dtype=np.float64)  # [K, H, 1]
    blocks: list[np.ndarray] = []
    for scores in reversed(shorts):
        n = len(scores)
        if n and all(level_fits(n, lv) for lv in calibrated):
            own = np.asarray(pooled_intervals(scores, levels, 1, 1)["widths"], dtype=np.float64)
            longer = np.maximum(own, longer)
        blocks.append(longer)
    widths = [[[[float(x) for x in row] for row in level] for level in block] for block in reversed(blocks)]
    return {"values": [int(e) for e in edges], "widths": widths}


def service_spread(x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Each window's spread [n] as the service computes it from the window it forecasts (`window_scale`:
    the mean |x_t − x_{t−period}| over observed pairs, floored): x, m [n, L] the windows and their masks."""
    window = np.where(m > 0, x, np.nan).astype(np.float32)[:, :, None]  # the service's window
    lag = max(period, 1)
    return window_scale(window, "mean_abs_diff", x.shape[1], 1.0, [SCALE_FLOOR], lag)[:, 0, 0].astype(
        np.float64
    )


def calibration_tail(
    lengths: Sequence[int], horizon: int, min_history: int, train_min: int, levels: Sequence[float]
) -> tuple[Callable[[int], int], int]:
    """How many of its last values each series of n holds out to calibrate on (`calibrate`'s `tail`),
    and the windows each holds (k): the one rule of the exporter and the service's fit on request. Its
    last H (k = 1: one window per series, the rule for many series) while the series long enough to hold
    one are as many as the windows the highest level needs, counting EXTRAPOLATED_UP_TO whatever is
    asked (99 for 99%); fewer series, each holds out its last H + k − 1 values, the k rolling windows
    whose H targets lie there, k = those windows / the series, rounded up. A series holds out at most
    half its values, and never its last training window (train_min + H values stay before the tail), so
    a short one may give fewer.

    Why one rule: the fit on request held out 20% of each history until 2026-12-05, which left short
    series few windows. On bench.few_series_intervals' groups (`--fit-share 0.2` reruns it,
    results/intervals/few_series_fit_share.json) lone M3 quarterly series got 80% for 94 of 756 groups and
    covered 0.723 / 0.814 / 0.867 at 80 / 90 / 95%, where this rule gives 697 of them 0.756 / 0.844 /
    0.896 (before `floored_levels`); over 24 cells (M3 monthly and quarterly, Tourism quarterly; 1 and
    3 series) 16 within 5 points of the level against this rule's 21. Why 99 windows whatever is
    asked: a level calibrated from as few windows as it needs is their largest score."""
    H = horizon
    count = sum(1 for n in lengths if n >= min_history + H)
    need = max(windows_needed(lv) for lv in [*levels, EXTRAPOLATED_UP_TO] if lv < 100)
    k = 1 if count == 0 or count >= need else math.ceil(need / count)

    def tail(n: int) -> int:
        return max(H, min(H + k - 1, n // 2, n - train_min - H))

    return tail, k


def level_plan(n: int, levels: Sequence[float]) -> tuple[list[float], list[float], list[float]]:
    """`levels` (ascending) for n calibration windows: (those the windows calibrate, those extrapolated
    from the highest of them, those left out). Beyond the windows' reach a level up to EXTRAPOLATED_UP_TO
    is extrapolated (`pooled_intervals`; issue 45: one series gets 80, 90 and 95%, a few 99%) where the
    highest calibrated is EXTRAPOLATED_FROM or more; otherwise none is. One rule for the read-out's
    calibration and the transformer's."""
    ordered = sorted(levels)
    ok = [lv for lv in ordered if level_fits(n, lv)]
    base = bool(ok) and ok[-1] >= EXTRAPOLATED_FROM
    extrapolated = [lv for lv in ordered if lv not in ok and lv <= EXTRAPOLATED_UP_TO] if base else []
    return ok, extrapolated, [lv for lv in ordered if lv not in ok and lv not in extrapolated]


def too_few(n: int, level: float) -> str:
    """Why `level` gets no interval from n calibration windows: how many it needs calibrated, and how
    few with a level of EXTRAPOLATED_FROM or more asked beside it (`level_plan`)."""
    if level >= 100:
        return f"level {level:g} cannot be calibrated (below 100 only)"
    said = f"{n} calibration windows are too few: level {level:g} needs at least {windows_needed(level)}"
    if EXTRAPOLATED_FROM < level <= EXTRAPOLATED_UP_TO:
        low = windows_needed(EXTRAPOLATED_FROM)
        said += f", or {low} with {EXTRAPOLATED_FROM:g}% asked beside it (extrapolated from it)"
    return said


def tail_ratio(level: float, calibrated: float) -> float:
    """How much wider the interval at `level` is than at the `calibrated` level below it (percents), for a
    level the windows cannot calibrate: the ratio of the quantiles of |e| for a Laplace error e (an
    exponential's, −ln(1 − level/100)): 95% from 90%: 1.30, 99% from 95%: 1.54 (a normal error's: 1.19,
    1.31).

    Why Laplace: where a model's windows are many (67-100: lone Tourism monthly series, groups of 3 and 20
    M3 monthly and Tourism series, 20 M3 quarterly ones), the widths they calibrate themselves grow by
    1.38-1.46 from 80 to 90%, 1.26-1.40 from 90 to 95% and 1.47-1.86 from 95 to 99% (medians per set and
    group size; `python -m bench.few_series_intervals`, results/intervals/few_series.json `tail_ratios`):
    Laplace's 1.43, 1.30 and 1.54 lie inside, a normal's 1.28, 1.19 and 1.31 below every one. Lone M3
    quarterly series (15 windows; models without the random layer), extrapolated by the normal's ratios,
    covered 0.889 at 95% and 0.929 at 99%; by these 0.902 and 0.957 (docs/panels.md)."""
    return math.log1p(-level / 100) / math.log1p(-calibrated / 100)


def floor_base(n: int, level: float) -> float | None:
    """The level that holds `level` when n windows calibrate it by their largest score alone (conformal
    rank ceil((n + 1)·level) = n): the highest of FLOOR_BASES below it that a lower rank calibrates; None
    where `level` is not so calibrated, or nothing below holds it."""
    if not level_fits(n, level) or math.ceil((n + 1) * level / 100) != n:
        return None
    below = [b for b in FLOOR_BASES if b < level and math.ceil((n + 1) * b / 100) < n]
    return below[-1] if below else None


def floored_levels(n: int, levels: Sequence[float]) -> list[float]:
    """The levels (ascending) that n windows calibrate by their largest score alone and a lower level
    holds (`floor_base`): `pooled_intervals` holds each at least that level's quantile of the windows'
    scores times `tail_ratio`.

    Why: the largest of a few overlapping windows of one series is a low guess of their tail. Lone M3
    quarterly series (15 windows at the median: 90% calibrated by the largest, 95% extrapolated from it)
    covered 0.844 / 0.896 at 90 / 95%, and with the floor 0.870 / 0.916; of the 48 cells of the default
    run 45 were within 5 points of the level before, 47 after. Lone M3 yearly series (4-8 windows: 80%
    is their largest) covered 0.761 / 0.853 / 0.893 / 0.943 at 80-99% with the floor from 80% up, and
    0.803 / 0.895 / 0.930 / 0.966 with 50% holding 80% (`python -m bench.few_series_intervals`,
    results/intervals/few_series*.json, 2026-12-05; docs/panels.md). A level calibrated by a lower rank
    is the windows' own."""
    return [lv for lv in levels if floor_base(n, lv) is not None]


def pooled_intervals(
    scores: np.ndarray,
    levels: Sequence[float],
    input_length: int,
    period: int,
) -> dict[str, Any]:
    """The manifest's `intervals` (without its `calibration` report) from pooled scores [n, H] (|error| in
    units of `service_spread`) at `levels` (ascending, the lowest fitting n): per horizon step the
    conformal quantile of the scores, made non-decreasing across levels; a level calibrated by the
    largest score alone at least a lower level's quantile times `tail_ratio` (`floor_base`). A level
    n windows cannot calibrate (`level_fits`) is extrapolated from the highest that they can, its widths
    times `tail_ratio(level, that level)` (the callers pass `level_plan`'s levels, which extrapolate only
    from EXTRAPOLATED_FROM or more). One definition for the read-out's and the transformer's."""
    n = scores.shape[0]
    fits = [level_fits(n, lv) for lv in levels]
    if not any(fits):
        raise ValueError(f"{n} windows calibrate none of the levels {list(levels)}")
    ok = [lv for lv, fit in zip(levels, fits, strict=True) if fit]
    calibrated: dict[float, np.ndarray] = {}
    for lv in ok:
        width = conformal_quantile(scores, lv / 100)
        base = floor_base(n, lv)
        if base is not None:  # the largest score alone: held by a level a lower rank calibrates
            width = np.maximum(width, conformal_quantile(scores, base / 100) * tail_ratio(lv, base))
        calibrated[lv] = width
    top = max(calibrated)
    widths = np.array(
        [
            calibrated[lv] if fit else calibrated[top] * tail_ratio(lv, top)
            for lv, fit in zip(levels, fits, strict=True)
        ]
    )
    widths = np.maximum.accumulate(widths, axis=0)
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
