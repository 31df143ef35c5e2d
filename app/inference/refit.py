"""The fit on request's work, protocol-free: a global read-out fitted again on histories (app/artifacts/
readout.py, the exporter's own code, with the settings of the version's manifest `readout` block), its
interval widths calibrated on their last values, its forecast; each fit in a worker thread holding one
of RSA_MAX_FITS_IN_FLIGHT slots, under RSA_MAX_FIT_SECONDS checked between batches of windows; and the
refit published as the next version of a model: its source version's graph with the new read-out
constants (app/artifacts/initializers.py), checked with ONNX Runtime against the numpy forecast as the
exporter checks its graphs, written through the exporter's publishing path (app/artifacts/publish.py).
/v1's `fit_forecast` (app/protocols/rsa_v1/fitting.py) decodes the request and encodes the answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

from app.artifacts.contract import (
    COVARIATE_INPUT,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    GLOBAL_TRANSFORMER_KIND,
    MANIFEST_FILE,
    MODEL_FILE,
)
from app.artifacts.covariates import CovariateLayout
from app.artifacts.feed import local_inputs
from app.artifacts.hybrid import LocalSpec
from app.artifacts.initializers import replace_initializers
from app.artifacts.manifest import Manifest
from app.artifacts.publish import publish_version
from app.artifacts.readout import (
    PARITY_TOLERANCE,
    PARITY_UNIT,
    CovariateRows,
    ReadoutSpec,
    block_cuts,
    cache_rows,
    calibrate,
    calibration_tail,
    fit_weights,
    forecast,
    history_edges,
    scale_errors,
    short_blocks,
    training_windows,
)
from app.artifacts.repository import model_folder, sha256_of
from app.core.config import Settings
from app.core.errors import InvalidInput, Overloaded
from app.inference.covariates import HistoryRows
from app.inference.fit_pool import fit_pool
from app.inference.publishing import check_publish_bytes, plan_publish, publish_lock, remove_versions
from app.inference.windows import require_finite
from rsa_core.windows import tail_windows

__all__ = [
    "PROVIDER",
    "FitTooLong",
    "NotRefittable",
    "Refit",
    "backtest_work",
    "check_fit_slot",
    "estimated_seconds",
    "fit_in_slot",
    "fit_readout",
    "fit_work",
    "in_slot",
    "publish_refit",
    "refit_spec",
    "run_backtest_refits",
    "run_fit",
    "window_counts",
]

T = TypeVar("T")
PROVIDER = "numpy (refit)"


def _fit_tail(spec: ReadoutSpec, histories: list[np.ndarray], levels: list[float]) -> Callable[[int], int]:
    """The last values a history of n holds out to calibrate a fit's intervals: the exporter's rule
    (`calibration_tail`), so that a fit on request calibrates as an export of the same series would.
    The calibration and the fit's work estimate (`fit_work`) read it."""
    lengths = [len(v) for v in histories]
    return calibration_tail(lengths, spec.fit.horizon, spec.min_history, spec.fit.train_min, levels)[0]


class NotRefittable(InvalidInput):
    """A version whose manifest does not say how to refit it (not a global read-out, or exported before
    the `readout` block)."""

    code = "not_refittable"


class FitTooLong(InvalidInput):
    """The fit passed RSA_MAX_FIT_SECONDS and was stopped."""

    code = "fit_too_long"


@dataclass
class Refit:
    """One fit's results: the read-out, its forecast, the windows it forecast from, the calibrated widths
    (None without levels or windows enough) and why each dropped level was, and its time."""

    weights: np.ndarray
    outputs: np.ndarray  # [S, h, 1] float32
    windows: np.ndarray  # [S, L, 1] float32, NaN before a short series' start (the service's window)
    intervals: dict[str, Any] | None
    dropped: dict[float, str]
    calibration_windows: int
    seconds: float
    covariates: np.ndarray | None = None  # [S, D] a covariate model's raw rows of `windows` (the feed's)
    # The levels whose widths were extrapolated from the highest the calibration windows reach.
    extrapolated: tuple[float, ...] = ()


def refit_spec(manifest: Manifest, name: str, version: int) -> ReadoutSpec:
    what = f"model {name} version {version}"
    if manifest.panel is None:
        raise NotRefittable(
            f"{what} cannot be refit: only a global read-out (`panel` in /v1/models) can", field="version"
        )
    if manifest.kind == GLOBAL_TRANSFORMER_KIND:
        # A network's weights come from gradient training on a panel (minutes), not a closed-form fit.
        raise NotRefittable(
            f"{what} cannot be refit on request: it is a global transformer (a trained network, not a "
            "closed-form read-out); retrain it with `python -m export.panel train --network transformer` "
            "and publish it with `export.panel export`",
            field="version",
        )
    if manifest.readout is None:
        raise NotRefittable(
            f"{what} cannot be refit: it was exported before versions carried their refit settings (the "
            "manifest's `readout` block); export it again with `python -m export.panel export`",
            field="version",
        )
    try:
        return ReadoutSpec.from_json(manifest.readout)
    except ValueError as e:
        raise NotRefittable(f"{what} cannot be refit: {e}", field="version") from None


def _deadline(budget_s: float, error: FitTooLong) -> Callable[[], None]:
    """The check a fit calls between its passes: it raises `error` once `budget_s` seconds have passed
    from now."""
    deadline = time.perf_counter() + budget_s

    def check() -> None:
        if time.perf_counter() > deadline:
            raise error

    return check


def run_fit(*args: Any, **kwargs: Any) -> Refit:
    """`fit_readout` (its arguments as they are) as the service runs it in a fit worker: BLAS on one
    thread, since its matrices are small (a 2,000-point series: 1,959 windows x 70 features), and
    OpenBLAS's threads only fought over the cores (`python -m bench.refit` prints both: BENCHMARKS.md
    section 9)."""
    with threadpool_limits(1, "blas"):
        return fit_readout(*args, **kwargs)


def fit_readout(
    spec: ReadoutSpec,
    histories: list[np.ndarray],
    horizon: int,
    levels: list[float],
    budget_s: float,
    local: LocalSpec | None = None,
    covariates: HistoryRows | None = None,
) -> Refit:
    """The read-out refitted on `histories`, its forecast (a hybrid's with its `local` half fitted on the
    same windows, as the service's graph feeds it) and its intervals; a covariate model's fit, forecast
    and calibration read each window's covariates, cut from `covariates` (the request's, checked)."""
    start = time.perf_counter()
    check = _deadline(
        budget_s,
        FitTooLong(
            f"the fit took more than {budget_s:g} s (RSA_MAX_FIT_SECONDS) and was stopped: send fewer "
            "or shorter series",
            field="series",
            limit=budget_s,
        ),
    )

    kernels = spec.kernels()
    fit = spec.fit
    if not window_counts(histories, spec)[1]:
        raise InvalidInput(
            f"no series holds a training window: a fit needs one series of at least train_history + "
            f"horizon = {fit.train_min} + {fit.horizon} values",
            field="series",
            limit=fit.train_min + fit.horizon,
        )
    unfit = InvalidInput(
        "the read-out cannot be fitted on these values: too large for float64 arithmetic (send them in "
        "smaller units), or every training window all zeros, which leaves nothing to fit (/forecast "
        "forecasts a series of zeros as zeros)",
        field="series",
    )
    rows = None if covariates is None else CovariateRows(covariates.layout, covariates.rows)
    try:
        with np.errstate(all="ignore"):  # overflow is checked on the answer, not warned about
            weights = fit_weights(histories, fit, kernels, check, rows)
    except np.linalg.LinAlgError:
        raise unfit from None
    if not np.isfinite(weights).all():
        raise unfit
    L = spec.input_length if local is None else max(spec.input_length, local.length)
    windows = tail_windows(histories, L, dtype=np.float32)[:, :, None]  # as served: NaN before the start
    last = None  # each series' raw covariate row of its forecast's window (ending with its history)
    if covariates is not None:
        last = np.concatenate([covariates.rows(i, np.array([len(h)])) for i, h in enumerate(histories)])
    with np.errstate(all="ignore"):  # what overflows float32 is refused below, not warned about
        layout = None if covariates is None else covariates.layout
        point = forecast(weights, histories, fit, kernels, layout=layout, covariates=last)
        if local is not None:
            point = local.combine(point, windows, spec.input_length)
        outputs = point[:, :horizon, None].astype(np.float32)
        require_finite([outputs], lambda i: f"series[{i}]")
        intervals, dropped, n_cal = None, {}, 0
        extrapolated: tuple[float, ...] = ()
        if levels:
            cal = calibrate(
                histories,
                spec,
                levels,
                _fit_tail(spec, histories, levels),
                check,
                covariates=rows,
                local=local,
            )
            intervals, dropped, n_cal = cal.intervals, cal.dropped, cal.windows
            extrapolated = cal.extrapolated
            blocks = (
                []
                if intervals is None
                else [intervals["widths"], *intervals.get("history", {}).get("widths", [])]
            )
            if not all(np.isfinite(np.asarray(b)).all() for b in blocks):
                why = "the calibration errors overflow float32: send the values in smaller units"
                intervals, dropped, extrapolated = None, {float(lv): why for lv in levels}, ()
    seconds = time.perf_counter() - start
    return Refit(weights, outputs, windows, intervals, dropped, n_cal, seconds, last, extrapolated)


def run_backtest_refits(
    spec: ReadoutSpec,
    fits: list[list[np.ndarray]],
    windows: list[np.ndarray],
    budget_s: float,
    local: LocalSpec | None = None,
    covariates: HistoryRows | None = None,
    window_rows: list[np.ndarray] | None = None,
) -> list[np.ndarray]:
    """A backtest's refits (`cross_validation` with `refit`), in a worker thread, BLAS on one thread: per
    cutoff j, the read-out fitted on `fits[j]` (each series' values before its cutoff j, every one
    observed) and its forecast [n_j, H] of `windows[j]` [n_j, W, 1] (the service's windows, NaN before a
    short series' start: the read-out reads their last L values; a hybrid's `local` half is fitted on
    them, as the graph's feed is). A covariate model's fits read each training window's covariates, cut
    from `covariates` (series i of every `fits[j]` is series i of the request), and its forecasts
    `window_rows[j]` [n_j, D], the raw rows of `windows[j]`. All the fits within `budget_s` (FitTooLong);
    InvalidInput where no series holds a training window before a cutoff."""
    with threadpool_limits(1, "blas"):
        check = _deadline(
            budget_s,
            FitTooLong(
                f"the backtest's {len(fits)} refits took more than {budget_s:g} s (RSA_MAX_FIT_SECONDS) "
                "and were stopped: send fewer series or windows, or refit: false to score the served "
                "weights",
                field="refit",
                limit=budget_s,
            ),
        )

        kernels, fit = spec.kernels(), spec.fit
        out = []
        for j, (parts, batch) in enumerate(zip(fits, windows, strict=True)):
            if not window_counts(parts, spec)[1]:
                raise InvalidInput(
                    f"refit: before cutoff {j + 1} of each series no series holds a training window "
                    f"(train_history + horizon = {fit.train_min} + {fit.horizon} values): ask for fewer "
                    "n_windows, or refit: false to score the served weights",
                    field="refit",
                    limit=fit.train_min + fit.horizon,
                )
            with np.errstate(all="ignore"):
                rows = None if covariates is None else CovariateRows(covariates.layout, covariates.rows)
                try:
                    weights = fit_weights(parts, fit, kernels, check, rows)
                except np.linalg.LinAlgError:
                    raise InvalidInput(
                        f"refit: the read-out cannot be fitted on the values before cutoff {j + 1}: too "
                        "large for float64 arithmetic (send them in smaller units), or every training "
                        "window all zeros, which leaves nothing to fit; refit: false scores the served "
                        "weights",
                        field="refit",
                    ) from None
                histories = [w[~np.isnan(w[:, 0]), 0].astype(np.float64) for w in batch]
                layout = None if covariates is None else covariates.layout
                point = forecast(
                    weights,
                    histories,
                    fit,
                    kernels,
                    layout=layout,
                    covariates=None if window_rows is None else window_rows[j],
                )
                if local is not None:
                    point = local.combine(point, batch, spec.input_length)
            out.append(point)
            check()
        return out


# Fits (and publishes) running in this process's workers: at most RSA_MAX_FITS_IN_FLIGHT.
_in_flight = 0

# A fit's cost before it starts (issue 46, items 2 and 6): seconds = READOUT_SECONDS x its multiply-adds
# (windows x passes x one window's: its REM features L x K and its normal equations' (F + 1) x (F + 1 + H))
# + STEP_SECONDS x the window steps it reads one at a time (windows built x L: scales, masks, the naive
# error) + LOCAL_SECONDS x a hybrid's local work (windows its local half fits x their length x members)
# + CALENDAR_SECONDS x a calendar model's calendar reads. A covariate model's covariate features (each
# window's raw row D through the mix D x G, and the read-out's G' more features in the normal equations)
# count as multiply-adds; its calendar is read one Python datetime per horizon step and feature of every
# window whose row is built. Measured by `python -m bench.fit_cost --repeats 2` (results/fit_cost.json,
# 2026-12-07, this 2-core host at load 1.4, nothing else running: 43 fits of 1-256 series of 120-20,000
# values, with and without levels, the small read-out, a wide-window one (L = 1,728, 1,670 features), the
# hybrid and the shops' covariate model): the fits of 0.5 s or more took 0.84-1.07 times their estimate.
# The multiply-adds alone (one constant, 1.27e-9 s each, measured at load 15-17 on 2026-12-05) estimated
# the wide-window read-out's fits 14-18 times too long: its matrix products run many times faster per
# multiply-add than the small read-out's steps (bank_calls' fit of 5,000 values: 10.3 s in the service,
# refused as 152.5 s). A busier host takes longer than estimated: RSA_MAX_FIT_SECONDS is also checked as a
# fit runs.
READOUT_SECONDS = 7.34e-11
STEP_SECONDS = 5.40e-8
LOCAL_SECONDS = 5.95e-7
CALENDAR_SECONDS = 1.76e-6


@dataclass(frozen=True)
class FitWork:
    """What a fit will do, in the units its estimate is calibrated in."""

    readout: float  # windows x passes x multiply-adds per window
    local: float  # a hybrid's local windows x their length x members
    calendar: float = 0.0  # a calendar model's windows built x horizon steps x calendar features
    steps: float = 0.0  # the window steps the read-out reads one at a time: windows built x L

    def __add__(self, other: FitWork) -> FitWork:
        return FitWork(
            self.readout + other.readout,
            self.local + other.local,
            self.calendar + other.calendar,
            self.steps + other.steps,
        )


def _covariate_units(spec: ReadoutSpec, layout: CovariateLayout | None) -> tuple[int, int, int]:
    """A window's covariate multiply-adds (its raw row D through the mix D x G, standardised), the read-out
    features they add (G': `scaled_features`) and its calendar's step x feature reads; zeros without."""
    if layout is None:
        return 0, 0, 0
    D, K = layout.width, len(spec.heads)
    G = len(layout.past) * K + D - layout.input_length * len(layout.past)
    added = {"relative": G, "additive": G + 1}.get(layout.effect, 2 * G + 1)
    return D * (G + 1), added, layout.horizon * len(layout.calendar)


def _lift_units(spec: ReadoutSpec) -> int:
    """A window's random-layer multiply-adds (its F features through the F x width layer); 0 without."""
    lift = spec.fit.lift
    return 0 if lift is None else len(lift.mean) * lift.width


def _readout_work(spec: ReadoutSpec, windows: int, layout: CovariateLayout | None = None) -> FitWork:
    """Multiply-adds of a fit on `windows` training windows: each window's REM features (L x K, and a
    covariate model's covariate features) and its share of the normal equations ((F + 1) x (F + 1 + H))
    every pass; the features once where the fit keeps them between passes (at most `cache_rows` windows:
    `fit_weights`), every pass where it cannot. A calendar's reads go with the features."""
    fit, L, K = spec.fit, spec.input_length, len(spec.heads)
    mix, added, calendar = _covariate_units(spec, layout)
    lift = _lift_units(spec)
    F = K + fit.n_lags + 1 + added + (0 if fit.lift is None else fit.lift.width)
    passes = 1 + fit.irls
    features, equations = L * K + mix + lift, (F + 1) * (F + 1 + fit.horizon)
    built = windows if fit.irls and windows <= cache_rows(fit) else windows * passes  # features built
    return FitWork(
        float(built * features + windows * passes * equations), 0.0, float(built * calendar), float(built * L)
    )


def _forecast_work(spec: ReadoutSpec, windows: int, layout: CovariateLayout | None = None) -> FitWork:
    """Multiply-adds of the features and forecasts of `windows` windows (one pass, no equations)."""
    fit, L, K = spec.fit, spec.input_length, len(spec.heads)
    mix, added, calendar = _covariate_units(spec, layout)
    width = 0 if fit.lift is None else fit.lift.width
    per = L * K + mix + _lift_units(spec) + (K + fit.n_lags + 2 + added + width) * fit.horizon
    return FitWork(float(windows * per), 0.0, float(windows * calendar), float(windows * L))


def _local_unit(local: LocalSpec | None) -> float:
    return 0.0 if local is None else float(local.length * len(local.members))


def fit_work(
    spec: ReadoutSpec,
    histories: list[np.ndarray],
    levels: list[float],
    local: LocalSpec | None,
    layout: CovariateLayout | None = None,
) -> FitWork:
    """`run_fit`'s work: the fit on every training window (each IRLS pass), and with `levels` the
    calibration's fit on each history less its tail and the forecasts of the tail's windows; a covariate
    model's (`layout`) with its covariate features and calendar."""
    fit, H = spec.fit, spec.fit.horizon
    work = _readout_work(spec, sum(training_windows(histories, fit)), layout)
    forecast_windows = len(histories)
    if levels:
        before_tails, tail, seen = 0, _fit_tail(spec, histories, levels), []
        for v in histories:
            n = len(v)
            if n < spec.min_history + H:
                continue
            k = tail(n)
            before_tails += training_windows([v[:-k]], fit)[0]
            first = max(spec.min_history, 1)
            held = max(0, n - H + 1 - first)  # every window, then those in the tail
            skipped = max(n - k - first, 0)
            forecast_windows += held - skipped
            seen.append(np.minimum(np.arange(first + skipped, first + held), spec.input_length))
        work += _readout_work(spec, before_tails, layout)
    local_windows = forecast_windows
    if levels and layout is None:  # the short series' blocks score the tail's windows again, cut as short
        values = np.concatenate(seen) if seen else np.zeros(0, np.int64)
        edges = history_edges(spec.min_history, fit.period, spec.input_length)
        for low, high in short_blocks(values, edges):
            _, cut = block_cuts(values, low, high)
            forecast_windows += len(cut)
            # the local half fits only the windows of min_values or more (`LocalSpec.feed`)
            local_windows += 0 if local is None else int((cut >= local.min_values).sum())
    local_work = FitWork(0.0, local_windows * _local_unit(local))
    return work + _forecast_work(spec, forecast_windows, layout) + local_work


def backtest_work(
    spec: ReadoutSpec,
    fits: list[list[np.ndarray]],
    windows: list[np.ndarray],
    local: LocalSpec | None,
    layout: CovariateLayout | None = None,
) -> FitWork:
    """`run_backtest_refits`' work: a fit per cutoff, then its windows' forecasts (a covariate model's,
    `layout`, with its covariate features and calendar)."""
    work = FitWork(0.0, sum(len(w) for w in windows) * _local_unit(local))
    for parts, w in zip(fits, windows, strict=True):
        work += _readout_work(spec, sum(training_windows(parts, spec.fit)), layout)
        work += _forecast_work(spec, len(w), layout)
    return work


def estimated_seconds(work: FitWork) -> float:
    """The seconds a fit of this work takes on one core of a host like the one measured."""
    return (
        READOUT_SECONDS * work.readout
        + STEP_SECONDS * work.steps
        + LOCAL_SECONDS * work.local
        + CALENDAR_SECONDS * work.calendar
    )


async def fit_in_slot(settings: Settings, func: Callable[..., T], work: FitWork, field: str, *args: Any) -> T:
    """A fit (`run_fit`, `run_backtest_refits`: `func(*args)`) in a niced worker process
    (app/inference/fit_pool.py), holding one of RSA_MAX_FITS_IN_FLIGHT slots, once its `work` is
    estimated to finish within RSA_MAX_FIT_SECONDS (FitTooLong naming `field` and the limit before any
    CPU is spent; Overloaded when no slot is free)."""
    budget = settings.max_fit_seconds
    estimate = estimated_seconds(work)
    if estimate > budget:
        raise FitTooLong(
            f"this fit would take about {estimate:.1f} s, more than the {budget:g} s a fit may take "
            "(RSA_MAX_FIT_SECONDS): refused before it started; send fewer or shorter series"
            + (", fewer windows, or refit: false" if field == "refit" else ""),
            field=field,
            limit=budget,
        )
    pool = fit_pool(settings.max_fits_in_flight)
    return await _hold_slot(settings, pool.run(func, *args))


async def in_slot(settings: Settings, func: Callable[..., T], *args: Any) -> T:
    """`func(*args)` in a worker thread, holding one of RSA_MAX_FITS_IN_FLIGHT slots (Overloaded when
    none is free). A call whose client went away keeps its slot until its thread really finishes (the
    thread cannot be stopped; its time budget stops it), so abandoned fits cannot pile up past the bound."""
    return await _hold_slot(settings, asyncio.to_thread(func, *args))


def check_fit_slot(settings: Settings) -> None:
    """Overloaded when every one of RSA_MAX_FITS_IN_FLIGHT slots is taken. The fit route asks before it
    reads its body: under eight clients looping maximal fits on 2 slots, 60-72 requests a phase were
    refused only after their 1.2 MB bodies were parsed, and that work took the cores from small
    forecasts (issue 46; a helper's per-thread scheduler statistics, 2026-12-04: the service's threads
    waited 3-4 ms per forecast with eight fitters, 1-2.6 ms with two, which were never refused)."""
    limit = settings.max_fits_in_flight
    if _in_flight >= limit:
        raise Overloaded(
            f"{_in_flight} fits in flight, the limit (RSA_MAX_FITS_IN_FLIGHT); retry later",
            limit=limit,
            retry_after_s=settings.retry_after_s,
        )


async def _hold_slot(settings: Settings, work: Coroutine[Any, Any, T]) -> T:
    global _in_flight
    try:
        check_fit_slot(settings)
    except Overloaded:
        work.close()  # never started
        raise
    _in_flight += 1
    call = asyncio.ensure_future(work)
    call.add_done_callback(_release_slot)
    return await asyncio.shield(call)


def _release_slot(call: asyncio.Future[Any]) -> None:
    global _in_flight
    _in_flight -= 1
    if not call.cancelled():
        call.exception()  # retrieved, so an abandoned call logs no "never retrieved"


def window_counts(histories: list[np.ndarray], spec: ReadoutSpec) -> tuple[int, int]:
    """(series holding a training window, windows in all)."""
    per = training_windows(histories, spec.fit)
    return sum(1 for n in per if n), sum(per)


def publish_refit(
    repository: Path,
    source_name: str,
    source_version: int,
    target: str,
    spec: ReadoutSpec,
    fit: Refit,
    histories: list[np.ndarray],
    local: LocalSpec | None = None,
    *,
    layout: CovariateLayout | None = None,
    settings: Settings,
    served: Callable[[], set[int]],
) -> int:
    """The refit as the next version of `target`: the source version's graph with the new read-out,
    checked with ONNX Runtime against the numpy forecast; returns its number. Only into a model of the
    source's kind or a new one, within RSA_MAX_MODEL_VERSIONS, RSA_MAX_MODEL_FOLDERS and
    RSA_MAX_PUBLISH_BYTES, its oldest versions past the first of these removed (`app.inference.publishing`;
    `served()`: the versions of `target` the service holds, never removed)."""
    import onnxruntime as ort

    source = model_folder(repository, source_name) / str(source_version)
    graph = replace_initializers(
        (source / MODEL_FILE).read_bytes(),
        {
            "readout": fit.weights[:-1].astype(np.float32),
            "bias": fit.weights[-1].astype(np.float32),
        },
    )
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    feed = {FORECAST_INPUT: fit.windows}
    if layout is not None and fit.covariates is not None:  # a covariate model's graph reads their rows
        feed[COVARIATE_INPUT] = fit.covariates.astype(np.float32)
    want = forecast(
        fit.weights, histories, spec.fit, spec.kernels(), layout=layout, covariates=fit.covariates
    )
    if local is not None:  # a hybrid's graph also reads its local half, as build_feed feeds it
        feed.update(local_inputs(local, fit.windows, spec.input_length))
        want = local.combine(want, fit.windows, spec.input_length)
    (got,) = session.run([FORECAST_OUTPUT], feed)
    err = scale_errors(np.asarray(got)[:, :, 0], want, histories, spec.input_length, spec.fit.period)
    worst = float(err.max()) if np.isfinite(got).all() else float("inf")
    if not worst <= PARITY_TOLERANCE:
        raise InvalidInput(
            f"the refit's graph differs from its numpy forecast by {worst:.3g} in units of {PARITY_UNIT}, "
            f"over {PARITY_TOLERANCE}: not published",
            field="publish",
        )
    manifest = json.loads((source / MANIFEST_FILE).read_text())
    check_publish_bytes(len(graph), settings)

    def write(staging: Path, number: int) -> None:
        path = staging / MODEL_FILE
        path.write_bytes(graph)
        manifest.update(
            {
                "name": target,
                "version": number,
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "files": {MODEL_FILE: {"sha256": sha256_of(path), "bytes": path.stat().st_size}},
                "intervals": fit.intervals,
                "verification": {
                    "provider": "CPUExecutionProvider",
                    "series": len(histories),
                    "max_error": worst,
                    "in_units_of": PARITY_UNIT,
                    "tolerance": PARITY_TOLERANCE,
                },
                "refit": {
                    "from": {"model": source_name, "version": source_version},
                    "series": len(histories),
                    "values": int(sum(len(h) for h in histories)),
                    "by": "POST /v1/models/{name}/fit_forecast",
                },
                "metrics": None,
            }
        )
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        check_publish_bytes(sum(p.stat().st_size for p in staging.iterdir()), settings)

    source_manifest = dict(manifest)  # as the source has it, before `write` makes it the refit's
    with publish_lock(repository):
        plan = plan_publish(repository, target, source_manifest, settings, served)
        for attempt in range(3):
            try:
                number = int(publish_version(plan.folder, write).name)
                break
            except OSError:  # another publish took the same number first (its folder renamed in before ours)
                if attempt == 2:
                    raise
        remove_versions(plan.folder, plan.remove, served)
    return number
