"""A global model's prediction intervals: split-conformal widths pooled across series, in units of each
series' own seasonal-naive spread, which the service computes from the window it forecasts
(`calibrate_global`, `series_spread`), the windows each series holds out to calibrate on
(`calibration_tail`), and the calibration report every global model writes (`calibration_report`: the
coverage per history-length group, out of fold). export/global_models/onnx.py publishes them in the manifest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from app.artifacts.conformal import level_fits, windows_needed
from app.artifacts.contract import window_scale
from app.artifacts.manifest import IntervalsSpec
from app.artifacts.readout import SCALE_FLOOR, CovariateRows, ReadoutSpec, calibrate
from app.artifacts.readout.calibration import (
    EXTRAPOLATED_FROM,
    EXTRAPOLATED_UP_TO,
    calibration_tail,
    floored_levels,
    pooled_intervals,
)
from export.bank import expand_bank
from export.global_models.graph import windows_of
from export.reports import GroupCoverage, IntervalCalibration, to_dict

if TYPE_CHECKING:
    from export.global_models.model import GlobalModel

__all__ = [
    "DEFAULT_LEVELS",
    "calibrate_global",
    "calibration_report",
    "calibration_tail",
    "extrapolated_note",
    "group_coverage",
    "history_groups",
    "interval_halfwidths",
    "readout_spec",
    "series_spread",
    "windows_needed",
]

DEFAULT_LEVELS = (50.0, 80.0, 90.0, 95.0, 99.0)  # as the multichannel exporter's


def series_spread(model: GlobalModel, histories: Sequence[np.ndarray]) -> np.ndarray:
    """Each history's spread [S], as the service computes it from the window it forecasts
    (`window_scale`: mean |x_t − x_{t−period}| over the last L values' observed pairs): the unit of the
    pooled interval widths."""
    L, lag = model.input_length, max(model.config.period, 1)
    windows = windows_of(histories, L)
    return window_scale(windows, "mean_abs_diff", L, 1.0, [SCALE_FLOOR], lag)[:, 0, 0].astype(np.float64)


def history_groups(lengths: Sequence[int], groups: int = 3) -> list[str]:
    """Each series' group by its history length: cut at the lengths a third and two thirds of the way
    through the sorted series, so that series of one length share a group (M3 "other": two thirds of
    63 values make one group), each named by its range ("history 48-69", "history 63")."""
    n = np.asarray(lengths, dtype=np.int64)
    ordered = np.sort(n)
    cuts = [int(ordered[(len(n) * k) // groups]) for k in range(1, groups)] if len(n) else []
    index = (n[:, None] > np.asarray(cuts, dtype=np.int64)[None, :]).sum(1) if cuts else np.zeros(len(n), int)
    label = {}
    for g in sorted(set(index.tolist())):
        low, high = int(n[index == g].min()), int(n[index == g].max())
        label[g] = f"history {low}" if low == high else f"history {low}-{high}"
    return [label[int(g)] for g in index]


def group_coverage(
    inside: np.ndarray, levels: Sequence[float], groups: Sequence[str], owners: np.ndarray | None = None
) -> list[GroupCoverage]:
    """Per group (shortest histories first, then "all"): the share of values inside the interval at
    each level; `inside` [levels, rows, H] booleans, `groups` each row's group, `owners` each row's series
    (None: one row per series), so that a group counts its series, not its windows."""
    labels = np.asarray(groups, dtype=object)
    owner = np.arange(len(labels)) if owners is None else np.asarray(owners)
    out = []
    names = sorted(set(groups), key=lambda g: int(g.split()[-1].split("-")[0]) if g[-1].isdigit() else 0)
    for name in [*names, "all"]:
        rows = np.ones(len(labels), dtype=bool) if name == "all" else labels == name
        coverage = {f"{lv:g}": float(inside[i][rows].mean()) for i, lv in enumerate(levels)}
        out.append(GroupCoverage(group=name, series=len(np.unique(owner[rows])), coverage=coverage))
    return out


def _cross_coverage(
    scores: np.ndarray, levels: Sequence[float], groups: Sequence[str], folds: np.ndarray, owners: np.ndarray
) -> list[GroupCoverage]:
    """Out-of-fold coverage: the scores of fold 0 (`folds` [n], 0 or 1 per row) against widths from fold
    1's and the other way round, so that no window is scored against a width it helped set; each fold's
    widths by the served rule (`pooled_intervals`: a level calibrated by a fold's largest score held by
    the level below). Levels one fold is too small for are left out."""
    halves = [np.flatnonzero(folds == 0), np.flatnonzero(folds == 1)]
    small = min(len(h) for h in halves)
    ok = [lv for lv in levels if small and level_fits(small, lv)]
    if not ok:
        return []
    inside = np.zeros((len(ok), *scores.shape), dtype=bool)
    for fold, other in ((halves[0], halves[1]), (halves[1], halves[0])):
        widths = np.asarray(pooled_intervals(scores[other], ok, 1, 1)["widths"])[:, :, 0]  # [levels, H]
        inside[:, fold] = scores[fold][None] <= widths[:, None, :]
    return group_coverage(inside, ok, groups, owners)


def calibration_report(
    scores: np.ndarray,
    series: int,
    levels: list[float],
    dropped: list[float],
    why: str | None,
    before: Sequence[int],
    per_series: Sequence[int],
    windows: int | None = None,
    extrapolated: Sequence[float] = (),
    held_out_windows: int | None = None,
) -> IntervalCalibration:
    """The report of a pooled calibration (the manifest's `intervals.calibration`), for every global
    model: `scores` [windows, H] of `series` series, `per_series` windows each in order, `before` each
    series' values before its windows; the coverage of `levels` out of fold (`_folds`) per history-length
    group (`history_groups`), and the levels `dropped` with `why`."""
    owners = np.repeat(np.arange(len(per_series)), per_series)
    groups = np.repeat(history_groups(before), per_series).tolist()
    return IntervalCalibration(
        series=series,
        levels=levels,
        dropped_levels=dropped,
        dropped_because=why,
        coverage=_cross_coverage(scores, levels, groups, _folds(per_series), owners),
        windows=windows,
        extrapolated_levels=list(extrapolated),
        floored_levels=floored_levels(len(scores), levels),
        scored="held_out" if held_out_windows is None else "local_half",
        held_out_windows=held_out_windows,
    )


def _folds(per_series: Sequence[int]) -> np.ndarray:
    """Each calibration window's fold: its series' parity (every other series), or with one series the
    earlier and the later half of its windows."""
    if len(per_series) == 1:
        n = per_series[0]
        return (np.arange(n) >= n // 2).astype(np.int64)
    return np.repeat(np.arange(len(per_series)) % 2, per_series)


def readout_spec(model: GlobalModel) -> ReadoutSpec:
    """What a refit of `model` needs (the manifest's `readout` block): its REM heads expanded, its input
    length, min_history and fit settings (its lift included: a refit keeps the random layer)."""
    cfg = model.config
    heads = tuple((str(k), int(d), float(v), float(t)) for k, d, v, t in expand_bank(cfg.spec, cfg.period))
    return ReadoutSpec(heads, model.input_length, model.min_history, model.fit_settings)


def calibrate_global(
    model: GlobalModel, series: Sequence[Any], levels: Sequence[float] = DEFAULT_LEVELS
) -> tuple[dict[str, Any] | None, str]:
    """Split-conformal intervals pooled across series, each scaled by its own seasonal-naive error:
    (the manifest's `intervals` or None, a sentence saying what was calibrated or why nothing was).

    Every series long enough keeps its last values out (`calibration_tail`: its last H, one window per
    series, when the series are as many as the highest level needs windows; fewer series hold out more,
    k rolling windows each, as the service's fit on request does, so that one series gets 80, 90 and 95%);
    a read-out of the same settings and input length is fitted on what comes before and forecasts every
    window whose H targets lie in the held-out values (app/artifacts/readout.py's `calibrate`: the
    service's fit on request calibrates with the same code). Each window's absolute errors are divided
    by the spread the service computes from the same window (`series_spread`), and per horizon step the
    conformal quantile of the n pooled scores is the width, in units of that spread. A level needs
    ceil((n + 1)·level) <= n windows; up to 99%, one beyond them is extrapolated from the highest they
    reach (app/artifacts/readout/calibration.py `pooled_intervals`). The calibration report
    (`IntervalCalibration`, in the manifest's `intervals.calibration`) gives the coverage per
    history-length group, out of fold (every other series; one series: the earlier and the later half
    of its windows)."""
    from export.covariates import CovariateSeries, series_covariate_rows

    H, layout = model.config.horizon, model.covariates
    if layout is not None and not all(isinstance(v, CovariateSeries) for v in series):
        raise ValueError("a covariate model is calibrated on series with their covariates (CovariateSeries)")
    values = [np.asarray(v.values if isinstance(v, CovariateSeries) else v, dtype=np.float64) for v in series]
    rows = (
        None
        if layout is None
        else CovariateRows(layout, lambda i, ends: series_covariate_rows(series[i], layout, ends))
    )
    cfg = model.config
    tail, k = calibration_tail([len(v) for v in values], H, model.min_history, cfg.train_min, levels)
    spec = readout_spec(model)
    cal = calibrate(values, spec, levels, tail=tail, covariates=rows, local=model.local)
    n = cal.series
    lengths = [len(v) for v in values if len(v) >= model.min_history + H] or [0]
    scored = (cal.intervals or {}).get("calibration", {})
    what = (
        f"its local half's errors at {cal.windows} windows of {n} series, each fitted on the window alone "
        f"(the hybrid's own held-out windows, {scored['held_out_windows']}, reach no level from "
        f"{EXTRAPOLATED_FROM:g}%: too few values before them for the read-out)"
        if scored.get("scored") == "local_half"
        else f"{n} series' last {H} values"
        if k == 1
        else f"{cal.windows} rolling windows over the last {max(map(tail, lengths))} values (at most) of "
        f"{n} series"
    )
    if cal.intervals is None and not cal.windows and cal.dropped:  # nothing scored: the reason it gives
        return None, f"no interval: {next(iter(cal.dropped.values()))}"
    if cal.intervals is None:
        return (
            None,
            f"no interval: {what} after min_history = {model.min_history} are too few for any of "
            f"{list(levels)} (a level needs ceil((n + 1)·level) <= n windows)",
        )
    ok = list(cal.intervals["levels"])
    dropped = [lv for lv in levels if lv not in ok]
    rule = "a level needs ceil((n + 1)·level) <= n" + (
        f"; from {windows_needed(EXTRAPOLATED_FROM)}, {EXTRAPOLATED_FROM:g}% is calibrated and the levels "
        f"above it up to {EXTRAPOLATED_UP_TO:g}% extrapolated: more or longer series give more"
        if any(EXTRAPOLATED_FROM < lv <= EXTRAPOLATED_UP_TO for lv in dropped) and EXTRAPOLATED_FROM in levels
        else ""
    )
    why = (
        f"{dropped} need more than the {n} series that hold {H} values out after min_history = "
        f"{model.min_history} ({rule})"
        if dropped and k == 1
        else f"{dropped} need more than the {cal.windows} windows ({rule})"
        if dropped
        else None
    )
    before = [len(values[i]) - H for i in cal.positions]  # each series' values before its last window
    real = [lv for lv in ok if lv not in cal.extrapolated]
    report = calibration_report(
        cal.scores,
        n,
        real,
        dropped,
        why,
        before,
        cal.per_series,
        cal.windows,
        cal.extrapolated,
        scored.get("held_out_windows"),
    )
    intervals = {**cal.intervals, "calibration": to_dict(report)}
    history = intervals.get("history")
    short = (
        f"; a series of {history['values'][0]}-{history['values'][-1] - 1} values takes the widths of "
        f"the same windows cut as short ({len(history['values']) - 1} blocks)"
        if history
        else ""
    )
    return intervals, f"intervals at {ok} from {what}" + extrapolated_note(cal.extrapolated, real) + short + (
        f"; {why}" if why else ""
    )


def extrapolated_note(extrapolated: Sequence[float], calibrated: Sequence[float]) -> str:
    """The export line's clause for levels extrapolated from the highest calibrated ("" for none)."""
    if not extrapolated:
        return ""
    return (
        f"; {list(extrapolated)} extrapolated from {calibrated[-1]:g}% (fewer windows than they need: the "
        "widths times a Laplace error's quantile ratio)"
    )


def interval_halfwidths(
    intervals: dict[str, Any], model: GlobalModel, histories: Sequence[np.ndarray]
) -> np.ndarray:
    """The half-widths [levels, S, H] the service answers for these histories (`IntervalsSpec.widths_for`,
    the one rule: each level's width per step, of the history's block of values where the widths have
    short-history blocks, times its spread)."""
    spec = IntervalsSpec.model_validate(intervals)
    windows = windows_of(histories, model.input_length)
    return spec.widths_for(model.config.horizon, windows)[:, :, :, 0].astype(np.float64)
