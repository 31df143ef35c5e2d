"""`POST /v1/models/{name}/fit_forecast`: a global read-out fitted again on the caller's histories, its
interval widths calibrated on their last values, and its forecast of them, publishing nothing unless
asked (docs/service.md, "Fit on request").

This module decodes the request (its limits, each history) and encodes the answer; the work (the fit,
its worker-thread slots, its time budget, publishing) is app/inference/refit.py's. Versions exported
before the manifest's `readout` block answer 422 `not_refittable`. A covariate model's series send their
covariates over the history (`future` also over the steps forecast), as a backtest's do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import orjson

from app.artifacts.manifest import IntervalsSpec, Manifest
from app.artifacts.readout import ReadoutSpec
from app.artifacts.repository import NameRefused, check_model_name, model_folder
from app.core.config import Settings
from app.core.errors import InvalidInput, PermissionDenied
from app.engine.catalog import VersionEntry
from app.inference.covariates import HistoryCovariates, HistoryRows, history_rows, refuse_covariates
from app.inference.intervals import level_bounds
from app.inference.publishing import precheck_publish, served_versions
from app.inference.refit import (
    PROVIDER,
    Refit,
    fit_in_slot,
    fit_work,
    in_slot,
    publish_refit,
    refit_spec,
    run_fit,
    window_counts,
)
from app.inference.windows import (
    began_after,
    check_bound,
    check_horizon,
    in_model_zone,
    not_started,
    require_finite,
)
from app.protocols.rsa_v1.handlers import V1Handlers, _timestamps
from app.protocols.rsa_v1.schemas import FitForecastRequest, SeriesInput
from app.protocols.rsa_v1.wire import ForecastResult, encode_forecast

__all__ = ["fit_forecast"]


def _history(series: SeriesInput, manifest: Manifest, where: str) -> tuple[np.ndarray, int]:
    """One series' values from its first (what is fitted), float64, every one observed, and the nulls
    sent before it (the time before the series began, `not_started`). They come as lists, or as arrays
    from the parse process (`app.protocols.rsa_v1.wire.offloaded_request`), a null then NaN: the schema
    refuses NaN itself, so NaN is a null either way."""
    values: Any = series.values
    channel = manifest.channels[0]
    if isinstance(values, dict):
        if set(values) != {channel}:
            raise InvalidInput(
                f"{where}.values must hold the one column {channel!r}, got {sorted(values)}",
                field=f"{where}.values",
            )
        values = values[channel]
    elif (isinstance(values, np.ndarray) and values.ndim == 2) or (
        isinstance(values, list) and values and isinstance(values[0], list)
    ):
        if any(len(row) != 1 for row in values):
            raise InvalidInput(
                f"{where}.values: rows must hold one value (the model has one channel)",
                field=f"{where}.values",
                limit=1,
            )
        values = values[:, 0] if isinstance(values, np.ndarray) else [row[0] for row in values]
    history = np.asarray(values, dtype=np.float64)  # a null: NaN
    begun = not_started(history[:, None], manifest)
    if len(history) and begun == len(history):
        raise InvalidInput(f"{where}.values: every value is null: nothing to fit", field=f"{where}.values")
    gaps = np.flatnonzero(np.isnan(history[begun:]))
    if len(gaps):
        first = begun + int(gaps[0])
        raise InvalidInput(
            f"{where}.values[{first}] is null: a fit needs every value observed from a series' first "
            "(fill the gaps first; nulls before it are the time before the series began)",
            field=f"{where}.values[{first}]",
        )
    # Every value is read by some training window: each within what the read-out's float32 graph takes
    # (the forecast's rule). Until 2026-12-06 a fit took 1e20 times a series and answered a third of it.
    check_bound(history[begun:, None], manifest.input_length, lambda row, _: f"{where}.values[{begun + row}]")
    return history[begun:], begun


def _check_limits(request: FitForecastRequest, settings: Settings) -> None:
    n = len(request.series)
    if n > settings.max_fit_series:
        raise InvalidInput(
            f"series has {n} items; a fit takes at most {settings.max_fit_series} (RSA_MAX_FIT_SERIES)",
            field="series",
            limit=settings.max_fit_series,
        )
    total = 0
    for i, s in enumerate(request.series):
        # an object without columns is 0 values here, named by `_history` (the model's one column)
        values = s.values
        length = max(map(len, values.values()), default=0) if isinstance(values, dict) else len(values)
        if length > settings.max_fit_history:
            raise InvalidInput(
                f"series[{i}].values has {length} values; a fit takes at most {settings.max_fit_history} per "
                "series (RSA_MAX_FIT_HISTORY)",
                field=f"series[{i}].values",
                limit=settings.max_fit_history,
            )
        total += length
    if total > settings.max_fit_values:
        raise InvalidInput(
            f"the series hold {total} values in all; a fit takes at most {settings.max_fit_values} "
            "(RSA_MAX_FIT_VALUES)",
            field="series",
            limit=settings.max_fit_values,
        )
    for i, level in enumerate(request.level or []):
        if not 0 < level < 100:
            raise InvalidInput(
                f"level[{i}] = {level} is out of range: it must lie strictly between 0 and 100",
                field=f"level[{i}]",
                limit=[0, 100],
            )
    if request.level is not None and len(set(request.level)) != len(request.level):
        raise InvalidInput("level repeats a value", field="level")


def _covariates(
    request: FitForecastRequest, manifest: Manifest, lengths: list[int], horizon: int
) -> HistoryRows | None:
    """A covariate model's covariates over each history of `lengths` values as sent, checked
    (app/inference/covariates.py `history_rows`): `past` one value per value, `future` one per value and
    then the `horizon` steps forecast (up to the model's H: the steps after `horizon`, which the answer
    does not show, are read as the training mean where not sent), `static`, and `start` for a calendar;
    None for a model without covariates, which refuses a series that sends some, as `/forecast` does."""
    layout = manifest.panel.layout if manifest.panel is not None else None
    items = [
        HistoryCovariates(f"series[{i}]", n, s.future, s.past, s.static)
        for i, (s, n) in enumerate(zip(request.series, lengths, strict=True))
    ]
    if layout is None:
        for item in items:
            refuse_covariates(manifest, item)
        return None
    H = manifest.horizon
    times = [
        _timestamps(
            None if s.start is None else in_model_zone(s.start, manifest, f"series[{i}].start"),
            0,
            n + H,  # every value and the H steps after them: each window's horizon steps
            manifest,
            f"series[{i}].start",
        )
        if layout.calendar
        else None
        for i, (s, n) in enumerate(zip(request.series, lengths, strict=True))
    ]
    return history_rows(
        manifest,
        layout,
        items,
        H - horizon,
        times,
        future_what=f"one per value of the series, then the {horizon} steps forecast",
        future_extra=horizon,
    )


def served_by(v1: V1Handlers, name: str) -> Callable[[], set[int]]:
    """The versions of `name` the service holds when called (its catalog then, read from any thread)."""
    return lambda: served_versions(v1.service.catalog, name)


def _checked_horizon(request: FitForecastRequest, manifest: Manifest, name: str) -> tuple[int, bool]:
    """(the horizon to fit and forecast, whether it is above the model's): above the model's horizon H,
    the read-out fitted at that horizon (its windows H' steps long), where the model allows it."""
    longer = request.horizon is not None and request.horizon > manifest.horizon
    horizon = request.horizon if longer and request.horizon else check_horizon(request.horizon, manifest)
    layout = manifest.panel.layout if manifest.panel is not None else None
    if longer and layout is not None:
        raise InvalidInput(
            f"horizon = {horizon} is above model {name}'s horizon {manifest.horizon}: a covariate "
            f"model's read-out reads the future covariates of its {manifest.horizon} steps, so it is "
            f"refitted at that horizon only; ask for at most {manifest.horizon}, or train a model of horizon "
            f"{horizon} (python -m export.panel train --horizon {horizon})",
            field="horizon",
            limit=manifest.horizon,
        )
    if longer and request.publish is not None:
        raise InvalidInput(
            f"publish: a refit at horizon {horizon} cannot be published: model {name}'s graph "
            f"forecasts {manifest.horizon} steps; leave publish out to get the forecast, or train a model "
            f"of horizon {horizon} (python -m export.panel train --horizon {horizon}) and export it",
            field="publish",
        )
    return horizon, longer


async def _publish_target(
    v1: V1Handlers, request: FitForecastRequest, entry: VersionEntry, can_publish: bool
) -> str | None:
    """The model a refit is to be published as (None: not published), checked before the fit is spent."""
    settings = v1.settings
    target = None
    if request.publish is not None:
        if not can_publish:
            raise PermissionDenied(
                "publishing a refit needs control rights: a service with API keys (RSA_API_KEYS) and "
                f"RSA_MODEL_CONTROL=explicit; this one runs with RSA_MODEL_CONTROL={settings.model_control}",
                field="publish",
            )
        target = request.publish.model
        try:
            check_model_name(target)
        except NameRefused as e:
            raise InvalidInput(str(e), field="publish.model") from None
        # Where it would go and what it would write, checked before the fit (its CPU) is spent; the
        # publish checks again under its lock.
        await asyncio.to_thread(
            precheck_publish,
            settings.model_repository,
            target,
            model_folder(settings.model_repository, entry.name) / str(entry.version),
            settings,
            served_by(v1, target),
        )
    return target


def _checked_histories(
    request: FitForecastRequest, manifest: Manifest, spec: ReadoutSpec, horizon: int, longer: bool
) -> tuple[list[np.ndarray], list[int]]:
    """Each series' values from its first (what is fitted), long enough for the model's min_history (and,
    `longer`, for a read-out fitted at `horizon`), and the nulls sent before each (`not_started`)."""
    read = [_history(s, manifest, f"series[{i}]") for i, s in enumerate(request.series)]
    histories, first = [h for h, _ in read], [b for _, b in read]
    for i, (h, b) in enumerate(zip(histories, first, strict=True)):
        if len(h) < spec.min_history:
            raise InvalidInput(
                f"series[{i}] has {len(h)} values{began_after(b)}; the model forecasts from min_history "
                f"= {spec.min_history}",
                field=f"series[{i}].values",
                limit=spec.min_history,
            )
    if longer:
        most = max(len(h) for h in histories) - spec.fit.train_min
        if horizon > most:
            raise InvalidInput(
                f"horizon = {horizon}: a read-out fitted at a horizon above the model's "
                f"{manifest.horizon} needs a series of train_history + horizon values, and the longest "
                f"sent has {most + spec.fit.train_min} (train_history {spec.fit.train_min}): ask for at "
                f"most {max(most, manifest.horizon)} steps, or send longer series",
                field="horizon",
                limit=max(most, manifest.horizon),
            )
    return histories, first


def _bands(
    result: Refit, manifest: Manifest, levels: list[float]
) -> tuple[dict[str, np.ndarray], list[float]]:
    """The answer's interval bands by name (lo-80, hi-80, ...) and the levels they answer."""
    bands: dict[str, np.ndarray] = {}
    answered: list[float] = []
    if result.intervals is not None:
        if manifest.intervals is not None and manifest.intervals.nonnegative is not None:
            result.intervals["nonnegative"] = list(manifest.intervals.nonnegative)
        spec_intervals = IntervalsSpec.model_validate(result.intervals)
        answered = [lv for lv in levels if lv not in result.dropped]
        if answered:
            bounds = level_bounds(spec_intervals, result.outputs, answered, window=result.windows)
            for level, (lo, hi) in bounds.items():
                bands[f"lo-{level:g}"], bands[f"hi-{level:g}"] = lo, hi
    return bands, answered


async def fit_forecast(
    v1: V1Handlers,
    name: str,
    version: int | None,
    request: FitForecastRequest,
    can_publish: bool,
) -> bytes:
    """The answer's JSON bytes: `FitForecastResponse`."""
    settings = v1.settings
    entry = v1.service.resolve(name, version)
    assert entry.manifest is not None  # the catalog resolves ready versions only
    manifest = entry.manifest
    spec = refit_spec(manifest, entry.name, entry.version)
    _check_limits(request, settings)
    horizon, longer = _checked_horizon(request, manifest, entry.name)
    layout = manifest.panel.layout if manifest.panel is not None else None
    target = await _publish_target(v1, request, entry, can_publish)
    histories, first = _checked_histories(request, manifest, spec, horizon, longer)
    sent = [len(h) + b for h, b in zip(histories, first, strict=True)]  # the values as sent, nulls too
    stamps = [
        _timestamps(
            # as a forecast reads it
            None if s.start is None else in_model_zone(s.start, manifest, f"series[{i}].start"),
            n,
            horizon,
            manifest,
            f"series[{i}].start",
        )
        for i, (s, n) in enumerate(zip(request.series, sent, strict=True))
    ]
    covariates = _covariates(request, manifest, sent, horizon)
    if covariates is not None and any(first):  # each history's from its first value, as it is fitted
        covariates = covariates.from_row(first)
    levels = list(request.level or [])
    local = manifest.panel.local_spec if manifest.panel is not None else None
    if longer:  # the read-out and a hybrid's local half, both fitted and forecast `horizon` steps
        spec = replace(spec, fit=replace(spec.fit, horizon=horizon))
        local = None if local is None else replace(local, horizon=horizon)
    # Refused before it starts where its estimated cost passes RSA_MAX_FIT_SECONDS; run in a niced worker.
    work = fit_work(spec, histories, levels, local, None if covariates is None else covariates.layout)
    result = await fit_in_slot(
        settings,
        run_fit,
        work,
        "series",
        spec,
        histories,
        horizon,
        levels,
        settings.max_fit_seconds,
        local,
        covariates,
    )
    bands, answered = _bands(result, manifest, levels)
    require_finite([result.outputs, *bands.values()], lambda i: f"series[{i}]")
    published = None
    if target is not None:
        number = await in_slot(
            settings,
            # keywords through a partial: in_slot passes positional arguments (and has a `settings`)
            partial(publish_refit, settings=settings, served=served_by(v1, target), layout=layout),
            settings.model_repository,
            entry.name,
            entry.version,
            target,
            spec,
            result,
            histories,
            local,
        )
        published = {"model": target, "version": number}
    n_series, n_windows = window_counts(histories, spec)
    body = encode_forecast(
        ForecastResult(
            model=entry.name,
            version=entry.version,
            provider=PROVIDER,
            channels=list(manifest.channels),
            ids=[s.id for s in request.series],
            outputs=result.outputs,
            timestamps=stamps,
            bands=bands,
        )
    )
    info = {
        "series": n_series,
        "windows": n_windows,
        "seconds": round(result.seconds, 6),
        "calibration_windows": result.calibration_windows,
        "calibrated_on": None
        if result.intervals is None
        else result.intervals.get("calibration", {}).get("scored", "held_out"),
        "levels": answered,
        "no_interval": {f"{lv:g}": why for lv, why in result.dropped.items() if lv in levels},
        # widths stretched from the highest level the windows calibrate (app/artifacts/readout/calibration.py)
        "extrapolated": [lv for lv in result.extrapolated if lv in answered],
        "published": published,
    }
    # encode_forecast's object, one key more (its bytes end with the object's closing brace).
    return body[:-1] + b',"fit":' + orjson.dumps(info) + b"}"
