"""The `/v1` backtest (`cross_validation`) and anomaly check (`detect_anomalies`): a request's histories
-> every window they ask for (app/inference/backtest.py, by the forecast's own window rules) -> one batch
through the inference service -> forecasts, calibrated intervals (app/inference/intervals.py) and
metrics (app/inference/metrics.py) -> the answer's JSON bytes. Nothing about HTTP."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import orjson

from app.artifacts.manifest import Manifest
from app.artifacts.readout import ReadoutSpec
from app.core.errors import InvalidInput
from app.engine.batching.admission import ADMIT_FRACTION
from app.engine.batching.batcher import EVALUATION_ROWS
from app.engine.catalog import VersionEntry
from app.inference.backtest import (
    History,
    WindowBatch,
    anomaly_points,
    backtest_cutoffs,
    check_window_count,
    least_history,
    window_batch,
)
from app.inference.covariates import (
    HistoryCovariates,
    HistoryRows,
    history_covariate_rows,
    history_rows,
    refuse_covariates,
    unsent_future_steps,
)
from app.inference.intervals import check_levels, level_bounds, level_widths, require_intervals
from app.inference.refit import (
    NotRefittable,
    backtest_work,
    estimated_seconds,
    fit_in_slot,
    refit_spec,
    run_backtest_refits,
)
from app.inference.repair import Repair
from app.inference.windows import (
    check_horizon,
    check_series_count,
    fill_window,
    not_started,
    require_finite,
)
from app.protocols.rsa_v1.answers import (
    anomaly_series,
    answered_by,
    backtest_window,
    is_in_sample,
    scorer,
)
from app.protocols.rsa_v1.codec import series_history, series_start
from app.protocols.rsa_v1.handlers import V1Handlers, _timestamps
from app.protocols.rsa_v1.schemas import AnomalyRequest, CrossValidationRequest

_DUMP = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_UTC_Z
R = TypeVar("R")


class EvaluationTooLong(InvalidInput):
    """A backtest or anomaly check that could not finish within the request's deadline on this host now,
    refused before it started (issue 46): by the version's evaluation drain rate (app/engine/batching/), or
    a refitting backtest's cost estimate (app/inference/refit.py); `limit` the windows a series that would
    fit. A 422 naming the field, where it used to be admitted and answered 504 at the deadline."""

    code = "evaluation_too_long"


def _too_long(refused: InvalidInput, field: str, series: int, hint: str) -> EvaluationTooLong:
    """The batcher's refusal of too many evaluation rows (`limit`: the rows that would fit) in terms of the
    request's `field` (windows per series) over its `series` series."""
    fits = int(refused.limit or 0) // max(series, 1)
    advice = (
        f"send {field} of at most {fits} (or split the request)"
        if fits
        else f"send fewer series per request (not even one window each of {series} series fits)"
    )
    return EvaluationTooLong(f"{field}: {refused.message}; {advice}{hint}", field=field, limit=fits)


async def _evaluation_forecast(
    v1: V1Handlers,
    entry: VersionEntry,
    windows: np.ndarray,
    phases: np.ndarray | None,
    latest: bool,
    covariates: np.ndarray | None,
    field: str,
    series: int,
    hint: str = "",
) -> np.ndarray:
    """The windows' forecasts through the version's evaluation queue (forecasts keep their latency);
    evaluation work that cannot be through in time answers EvaluationTooLong naming `field`."""
    try:
        return await v1.service.forecast(
            entry, windows, phases, latest=latest, covariates=covariates, evaluation=True
        )
    except InvalidInput as e:
        if e.field != EVALUATION_ROWS:
            raise
        raise _too_long(e, field, series, hint) from None


def _in_evaluation_slot(
    route: Callable[[V1Handlers, str, int | None, R], Awaitable[bytes]],
) -> Callable[[V1Handlers, str, int | None, R], Awaitable[bytes]]:
    """The route holding one of its version's evaluation slots from before its windows are built to its
    answer (InferenceService.evaluating): refused at once when none is free, never between an anomaly
    check's repair rounds (issue 46, item 5)."""

    @functools.wraps(route)
    async def held(v1: V1Handlers, name: str, version: int | None, request: R) -> bytes:
        async with v1.service.evaluating(v1.service.resolve(name, version)):
            return await route(v1, name, version, request)

    return held


def _histories(v1: V1Handlers, manifest: Manifest, series: Sequence[Any]) -> list[History]:
    check_series_count(len(series), v1.settings.max_series_per_request, "series", "items")
    out = []
    for i, s in enumerate(series):
        values, path_of = series_history(s, manifest, f"series[{i}]")
        start = series_start(s, manifest, f"series[{i}].start")
        out.append(History(s.id, values, start, f"series[{i}]", path_of, not_started(values, manifest)))
    return out


def _stamps(history: History, first: int, count: int, manifest: Manifest) -> list[datetime] | None:
    """The times of values first .. first + count − 1 of a history with a `start`, else None."""
    return _timestamps(history.start, first, count, manifest, f"{history.field}.start")


def _window_stamps(
    history: History, cutoffs: Sequence[int], count: int, manifest: Manifest
) -> list[list[datetime] | None]:
    """`_stamps(history, t, count, manifest)` for each cutoff t, cut from one list of the times from the
    first cutoff to the last window's end (a value's time depends on its position alone): 1,024 windows
    of 96 steps made 98,304 datetimes one by one, 58 ms of each such backtest's plan here."""
    if not cutoffs:
        return []
    first = min(cutoffs)
    times = _stamps(history, first, max(cutoffs) + count - first, manifest)
    if times is None:
        return [None] * len(cutoffs)
    return [times[t - first : t - first + count] for t in cutoffs]


def _covariates(
    manifest: Manifest,
    series: Sequence[Any],
    histories: Sequence[History],
    cutoffs: Sequence[Sequence[int]],
    reach: int,
) -> list[np.ndarray] | None:
    """Per series, the raw `covariates` rows [cutoffs, D] of a covariate model's windows before each of
    its cutoffs (app/inference/covariates.py cuts them from the whole-history columns sent), or None; a
    model without covariates refuses a series sending some, as `/forecast` does. `reach`: the model's
    H − the steps asked, how far the last window's forecast reads future covariates past the history."""
    layout = manifest.panel.layout if manifest.panel is not None else None
    items = [
        HistoryCovariates(h.field, len(h.values), s.future, s.past, s.static)
        for s, h in zip(series, histories, strict=True)
    ]
    if layout is None:
        for item in items:
            refuse_covariates(manifest, item)
        return None
    out = []
    for item, h, points in zip(items, histories, cutoffs, strict=True):
        # The calendar at each window's H horizon steps, read as `/forecast` reads it after t values.
        timed = bool(layout.calendar) and h.start is not None
        stamps = [
            _timestamps(h.start, t, manifest.horizon, manifest, f"{h.field}.start") if timed else None
            for t in points
        ]
        out.append(history_covariate_rows(manifest, layout, item, points, reach, stamps))
    return out


def _unsent(
    manifest: Manifest, series: Sequence[Any], histories: Sequence[History], cutoffs: Sequence[Sequence[int]]
) -> list[list[int]]:
    """Per series and cutoff, the future covariate steps past the values sent that its window read as
    the training mean (none of them a step the answer reads; 0 without future covariates)."""
    return [
        unsent_future_steps(HistoryCovariates(h.field, len(h.values), s.future), points, manifest.horizon)
        for s, h, points in zip(series, histories, cutoffs, strict=True)
    ]


def _history_rows(
    manifest: Manifest, series: Sequence[Any], histories: Sequence[History], reach: int
) -> HistoryRows | None:
    """A covariate model's covariates over each whole history, for a backtest's refits (each fit cuts its
    training windows' rows from them); None for a model without covariates."""
    layout = manifest.panel.layout if manifest.panel is not None else None
    if layout is None:
        return None
    items = [
        HistoryCovariates(h.field, len(h.values), s.future, s.past, s.static)
        for s, h in zip(series, histories, strict=True)
    ]
    times = [  # every value's time and the H steps after them (the calendar of each window's horizon)
        _timestamps(h.start, 0, len(h.values) + manifest.horizon, manifest, f"{h.field}.start")
        if layout.calendar and h.start is not None
        else None
        for h in histories
    ]
    return history_rows(manifest, layout, items, reach, times)


def _refit_spec(manifest: Manifest, name: str, version: int, asked: bool | None) -> ReadoutSpec | None:
    """The read-out a backtest refits before each cutoff, or None (the served weights): `refit` as asked,
    by default where the version can be refitted (a global read-out exported with its `readout` block,
    covariates or not) and every cutoff leaves a training window (`_refittable`). Asked of one that
    cannot be: NotRefittable naming `refit`."""
    if asked is False:
        return None
    try:
        return refit_spec(manifest, name, version)
    except NotRefittable as e:
        if asked is None:
            return None
        raise NotRefittable(f"refit: {e.message}; send refit: false", field="refit") from None


def _refittable(spec: ReadoutSpec, cutoffs: Sequence[Sequence[int]], first: Sequence[int]) -> bool:
    """Whether some series holds a training window (train_history + H values) before each cutoff, from
    its first value (`first`: the nulls before it, `not_started`)."""
    least = max(spec.fit.train_min, 1) + spec.fit.horizon
    return all(
        any(points[j] - b >= least for points, b in zip(cutoffs, first, strict=True))
        for j in range(len(cutoffs[0]))
    )


async def _refit_forecasts(
    v1: V1Handlers,
    manifest: Manifest,
    spec: ReadoutSpec,
    histories: Sequence[History],
    cutoffs: Sequence[Sequence[int]],
    windows: np.ndarray,
    covariates: HistoryRows | None = None,
    rows: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """Each window's forecast [S·K, H, 1] (series-major) by a read-out refitted on every series' values
    before its cutoff of the same rank (their missing values filled by the model's training rule, as its
    windows are), in a fit slot; a covariate model's fits read `covariates` (the whole histories'), its
    forecasts each window's raw row (`rows`, per series [K, D])."""
    K = len(cutoffs[0])
    rule = manifest.training_fill
    # each history from its first value: nulls before a series began are not its values (`not_started`)
    first = [h.before for h in histories]
    fits = [
        [
            fill_window(h.values[b : points[j], :1], rule)[:, 0]
            for h, points, b in zip(histories, cutoffs, first, strict=True)
        ]
        for j in range(K)
    ]
    if covariates is not None and any(first):
        covariates = covariates.from_row(first)
    ranked = [windows[j::K] for j in range(K)]  # window j of every series
    window_rows = None if rows is None else [np.stack([r[j] for r in rows]) for j in range(K)]
    local = manifest.panel.local_spec if manifest.panel is not None else None
    settings = v1.settings
    work = backtest_work(spec, fits, ranked, local, None if covariates is None else covariates.layout)
    # Refused before it starts where it cannot finish in time: past RSA_MAX_FIT_SECONDS (fit_in_slot), or
    # past ADMIT_FRACTION of what the request has left (its deadline).
    left, _ = v1.service.deadline()
    estimate, budget = estimated_seconds(work), ADMIT_FRACTION * left
    if estimate > budget:
        fits_k = int(K * budget / estimate)
        raise EvaluationTooLong(
            f"n_windows: the backtest's {K} refits would take about {estimate:.1f}s, more than the "
            f"{budget:.1f}s ({ADMIT_FRACTION:.0%} of the {left:.1f}s this request has left) it may take: "
            "refused before it started; "
            + (f"send n_windows of at most {fits_k}, " if fits_k else "send fewer or shorter series, ")
            + "or refit: false to score the served weights",
            field="n_windows",
            limit=fits_k,
        )
    parts = await fit_in_slot(
        settings,
        run_backtest_refits,
        work,
        "refit",
        spec,
        fits,
        ranked,
        settings.max_fit_seconds,
        local,
        covariates,
        window_rows,
    )
    out = np.empty((len(windows), spec.fit.horizon, 1), np.float32)
    for j, point in enumerate(parts):
        out[j::K, :, 0] = point
    return out


async def _backtest_forecasts(
    v1: V1Handlers,
    entry: VersionEntry,
    latest: bool,
    request: CrossValidationRequest,
    spec: ReadoutSpec | None,
    histories: list[History],
    cutoffs: list[list[int]],
    batch: WindowBatch,
    per_series: list[np.ndarray] | None,
    horizon: int,
) -> np.ndarray:
    """Every window's forecast: through the served version (`spec` None), or from a read-out refitted at
    each cutoff; each with its window's covariates (`per_series`: `_covariates`)."""
    manifest = entry.manifest
    assert manifest is not None
    if spec is None:
        covariates = None if per_series is None else np.concatenate(per_series)
        return await _evaluation_forecast(
            v1, entry, batch.windows, batch.phases, latest, covariates, "n_windows", len(histories)
        )
    whole = _history_rows(manifest, request.series, histories, manifest.horizon - horizon)
    return await _refit_forecasts(v1, manifest, spec, histories, cutoffs, batch.windows, whole, per_series)


@dataclass(frozen=True)
class _Backtest:
    """A cross_validation request checked and laid out, before its model run: the horizon, step and
    levels answered, the histories, the windows per series (K), each series' cutoffs and their first
    forecast timestamps, the refit settings (None: the served weights), the windows, the covariates and
    the steps of them not sent."""

    horizon: int
    step: int
    levels: list[float]
    histories: list[History]
    K: int
    cutoffs: list[list[int]]
    stamps: list[list[list[datetime] | None]]
    spec: ReadoutSpec | None
    batch: WindowBatch
    per_series: list[np.ndarray] | None
    unsent: list[list[int]]


def _backtest_plan(
    v1: V1Handlers, entry: VersionEntry, manifest: Manifest, request: CrossValidationRequest
) -> _Backtest:
    horizon = check_horizon(request.horizon, manifest)
    levels = request.level or []
    if request.level is not None:
        check_levels(manifest.intervals, request.level)  # before any model run
    histories = _histories(v1, manifest, request.series)
    K = request.n_windows
    step = request.step_size or horizon
    cutoffs = [
        backtest_cutoffs(len(h.values), manifest, horizon, K, step, f"{h.field}.values", h.before)
        for h in histories
    ]
    check_window_count(
        len(histories) * K,
        v1.settings.max_series_per_request,
        "n_windows",
        f"{len(histories)} series x {K} windows",
    )
    stamps = [
        _window_stamps(h, points, horizon, manifest) for h, points in zip(histories, cutoffs, strict=True)
    ]
    spec = _refit_spec(manifest, entry.name, entry.version, request.refit)
    if (
        spec is not None
        and request.refit is None
        and not _refittable(spec, cutoffs, [h.before for h in histories])
    ):
        spec = None  # by default, the served weights where a cutoff leaves no training window
    batch = window_batch(
        histories, cutoffs, manifest, v1.settings.max_history_length, v1.settings.max_missing_share
    )
    per_series = _covariates(manifest, request.series, histories, cutoffs, manifest.horizon - horizon)
    unsent = _unsent(manifest, request.series, histories, cutoffs)
    return _Backtest(horizon, step, levels, histories, K, cutoffs, stamps, spec, batch, per_series, unsent)


def _backtest_answer(
    entry: VersionEntry,
    manifest: Manifest,
    request: CrossValidationRequest,
    plan: _Backtest,
    forecasts: np.ndarray,
) -> bytes:
    horizon, histories, K, cutoffs, stamps, spec, batch = (
        plan.horizon,
        plan.histories,
        plan.K,
        plan.cutoffs,
        plan.stamps,
        plan.spec,
        plan.batch,
    )
    # C-ordered: orjson writes only contiguous arrays.
    outputs = np.ascontiguousarray(forecasts[:, :horizon])
    bounds = (
        level_bounds(manifest.intervals, outputs, plan.levels, window=batch.windows) if plan.levels else {}
    )
    require_finite(
        [outputs, *(b for pair in bounds.values() for b in pair)], lambda i: histories[i // K].field
    )
    actual, scored = scorer(manifest, histories, cutoffs, outputs, horizon, K, bounds)
    C = len(manifest.channels)
    training = manifest.panel.training if manifest.panel is not None else None
    series_out = []
    for s, history in enumerate(histories):
        rows = slice(s * K, (s + 1) * K)
        windows = []
        for j, t in enumerate(cutoffs[s]):
            in_sample = False if spec is not None else is_in_sample(training, history, stamps[s][j])
            k = s * K + j
            window = backtest_window(
                k, t, stamps[s][j], in_sample, outputs, actual, bounds, batch.filled, plan.unsent[s][j]
            )
            # Each window written on its own, the answer then joining the pieces (the same bytes): orjson
            # holds the GIL while it writes, and one call for a 1,024-window answer of 13.6 MB held it
            # for 84 ms here, stalling the event loop (and every forecast on it) that long.
            windows.append(orjson.Fragment(orjson.dumps(window, option=_DUMP)))
        series_out.append(
            {
                "id": history.id,
                "windows": windows,
                "metrics": scored(rows, slice(None)),
                "channel_metrics": None
                if C == 1
                else {channel: scored(rows, c) for c, channel in enumerate(manifest.channels)},
            }
        )
    return orjson.dumps(
        {
            **answered_by(entry, manifest),
            "horizon": horizon,
            "n_windows": K,
            "step_size": plan.step,
            "level": request.level,
            "refit": spec is not None,
            "training_end": None if training is None else training.end,
            "series": series_out,
            "metrics": scored(slice(None), slice(None)),
        },
        option=_DUMP,
    )


@_in_evaluation_slot
async def cross_validation(
    v1: V1Handlers, name: str, version: int | None, request: CrossValidationRequest
) -> bytes:
    """`CrossValidationResponse`'s JSON: every cutoff of every series forecast in one batch. Laying the
    windows out and scoring the answer are numpy and Python loops over every window (0.1-0.6 s each for a
    1,024-window backtest here): they run in a worker thread, not on the event loop, where they stalled
    every other request (issue 46: under six looping 1,024-window backtests small forecasts' p99 was 8.5x
    idle on a quiet host, max 489 ms; with this work off the loop 3.3x, max 57 ms, `python -m
    bench.fairness`, docs/security.md)."""
    entry = v1.service.resolve(name, version)
    manifest = entry.manifest
    assert manifest is not None  # the catalog resolves ready versions only
    plan = await asyncio.to_thread(_backtest_plan, v1, entry, manifest, request)
    forecasts = await _backtest_forecasts(
        v1,
        entry,
        version is None,
        request,
        plan.spec,
        plan.histories,
        plan.cutoffs,
        plan.batch,
        plan.per_series,
        plan.horizon,
    )
    return await asyncio.to_thread(_backtest_answer, entry, manifest, request, plan, forecasts)


async def _repair(
    request: AnomalyRequest,
    manifest: Manifest,
    histories: list[History],
    points: list[list[int]],
    lead: int,
    check: Callable[
        [list[History], list[list[int]], np.ndarray, np.ndarray | None], Awaitable[tuple[np.ndarray, ...]]
    ],
    shown: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    shown_cuts: list[list[int]],
) -> np.ndarray:
    """detect_anomalies' repair: the points forecast again by `check` from windows whose spikes are
    replaced, their forecast, bounds and width written into `shown` and their cutoffs into `shown_cuts`;
    returns which values [N, C] the windows after them read as their forecast (`Repair.replaced`)."""
    forecast, lo, hi, width = shown
    # The points judged in time order, each from a window whose spikes are replaced by their
    # forecasts (a level shift's onset read as sent), in rounds of one batch each:
    # app/inference/repair.py.
    repair = Repair(
        [h.values for h in histories],
        [p[0] for p in points],
        lead,
        manifest.horizon,
        manifest.input_length,
        [least_history(manifest) + h.before for h in histories],
        forecast,
        lo,
        hi,
        width,
    )

    def next_round() -> (
        tuple[list[list[tuple[int, int]]], list[int], list[History], list[list[int]], np.ndarray, Any] | None
    ):
        """The next round's points, series, repaired histories, cutoffs, steps ahead and covariates (None:
        nothing left to judge again); in a worker thread, as the windows are."""
        again = repair.next_round()
        keep = [s for s in range(len(histories)) if again[s]]
        if not keep:
            return None
        hs = [replace(histories[s], values=repair.values(s)) for s in keep]
        cuts = [[points[s][j] - step + 1 for j, step in again[s]] for s in keep]
        steps = np.array([step for s in keep for _, step in again[s]], np.int64)
        # The covariates stay as sent (only the target's values are repaired), cut at the new cutoffs.
        cut_rows = _covariates(manifest, [request.series[s] for s in keep], hs, cuts, manifest.horizon - lead)
        return again, keep, hs, cuts, steps, cut_rows

    bound = repair.rounds_at_most()
    for _ in range(bound):
        planned = await asyncio.to_thread(next_round)
        if planned is None:
            return repair.replaced()
        again, keep, hs, cuts, steps, cut_rows = planned
        redone = await check(hs, cuts, steps, None if cut_rows is None else np.concatenate(cut_rows))
        fields = [histories[s].field for s in keep for _ in again[s]]
        require_finite(list(redone), fields.__getitem__)
        at = 0
        for s in keep:
            n = len(again[s])
            repair.update(s, [j for j, _ in again[s]], [a[at : at + n] for a in redone])
            for j, step in again[s]:
                shown_cuts[s][j] = points[s][j] - step + 1
            at += n
    raise RuntimeError(f"the repair did not end in {bound} rounds, its bound")


@_in_evaluation_slot
async def detect_anomalies(v1: V1Handlers, name: str, version: int | None, request: AnomalyRequest) -> bytes:
    """`AnomalyResponse`'s JSON: every checked point of every series forecast in one batch, flagged
    outside the calibrated interval at `level`."""
    entry = v1.service.resolve(name, version)
    manifest = entry.manifest
    assert manifest is not None
    level = request.level
    if level is None:  # the highest calibrated level: the fewest false alarms the version offers
        level = max(require_intervals(manifest.intervals, "level").levels)
    try:
        check_levels(manifest.intervals, [level])
    except InvalidInput as e:  # a single level: name the field itself, not an item of a list
        raise type(e)(e.message.replace("level[0]", "level"), field="level", limit=e.limit) from None
    lead = check_horizon(request.lead, manifest, field="lead")
    histories = _histories(v1, manifest, request.series)
    points = [
        anomaly_points(len(h.values), manifest, lead, request.last, f"{h.field}.values", h.before)
        for h in histories
    ]
    total = sum(len(p) for p in points)
    check_window_count(
        total,
        v1.settings.max_series_per_request,
        "last",
        f"{total} points checked over {len(histories)} series; ask for fewer with `last`",
    )
    settings = v1.settings
    all_cuts = [[t - lead + 1 for t in p] for p in points]

    def prepare() -> tuple[list[list[datetime] | None], list[np.ndarray] | None]:
        """Each series' timestamps and each checked point's window covariates, built (and checked) before
        any model run; in a worker thread, as cross_validation's windows."""
        stamps = [_stamps(h, p[0], len(p), manifest) for h, p in zip(histories, points, strict=True)]
        return stamps, _covariates(manifest, request.series, histories, all_cuts, manifest.horizon - lead)

    stamps, covariate_rows = await asyncio.to_thread(prepare)

    async def check(
        hs: list[History], cuts: list[list[int]], steps: np.ndarray, covariates: np.ndarray | None
    ) -> tuple[np.ndarray, ...]:
        """Forecast, bounds and half-width [n, C] of the point `steps[i]` steps after each cutoff (`lead`,
        or further ahead where the repair's replaced values end the window)."""
        batch = await asyncio.to_thread(
            window_batch, hs, cuts, manifest, settings.max_history_length, settings.max_missing_share
        )
        outputs = await _evaluation_forecast(
            v1,
            entry,
            batch.windows,
            batch.phases,
            version is None,
            covariates,
            "last",
            len(hs),
            "" if hs is histories else ", or repair: false",  # refused in a repair round
        )
        outputs = outputs[:, : int(steps.max())]
        lo, hi = level_bounds(manifest.intervals, outputs, [level], window=batch.windows)[level]
        width = level_widths(manifest.intervals, outputs, [level], window=batch.windows)[level]
        rows = np.arange(len(steps))
        width = np.broadcast_to(width, outputs.shape)
        # C-ordered copies: orjson writes only contiguous arrays, and the repair writes into them.
        return tuple(np.array(a[rows, steps - 1], order="C") for a in (outputs, lo, hi, width))

    def judge(
        forecast: np.ndarray, lo: np.ndarray, hi: np.ndarray, width: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        flag = (actual < lo) | (actual > hi)  # a missing value (NaN) is never flagged
        # A width of 0 (a channel the calibration never saw vary) makes any difference infinitely far.
        tiny = np.finfo(np.float32).tiny
        return flag, np.abs(actual - forecast) / np.maximum(width.astype(np.float64), tiny)

    actual = np.concatenate([h.values[p[0] : p[-1] + 1] for h, p in zip(histories, points, strict=True)])
    forecast, lo, hi, width = await check(
        histories,
        all_cuts,
        np.full(total, lead),
        None if covariate_rows is None else np.concatenate(covariate_rows),
    )
    owner = np.repeat(np.arange(len(histories)), [len(p) for p in points])
    require_finite([forecast, lo, hi], lambda i: histories[int(owner[i])].field)
    flag, score = judge(forecast, lo, hi, width)
    # Each point's cutoff for the forecast the answer shows: the repair forecasts some again, further
    # ahead from an earlier window, and `future_unsent` counts what that window read (every pass).
    shown_cuts = [list(c) for c in all_cuts]
    replaced = None
    if request.repair and flag.any():
        replaced = await _repair(
            request, manifest, histories, points, lead, check, (forecast, lo, hi, width), shown_cuts
        )
        flag, score = judge(forecast, lo, hi, width)
    unsent = _unsent(manifest, request.series, histories, shown_cuts)
    series_out = await asyncio.to_thread(
        anomaly_series, histories, points, stamps, actual, (forecast, lo, hi), flag, score, unsent, replaced
    )
    return orjson.dumps(
        {
            **answered_by(entry, manifest),
            "level": level,
            "lead": lead,
            "series": series_out,
            "anomalies": int(flag.sum()),
        },
        option=_DUMP,
    )
