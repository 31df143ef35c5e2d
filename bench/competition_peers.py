"""The competitions' peers: statsforecast's models fitted per series in the same run, and the
StatisticalEnsemble of four of them (Nixtla's amazon-chronos experiment)."""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from bench.competition_data import Competition
from bench.competition_scores import LEVELS, QUANTILES, Forecast, quantiles_from_intervals

__all__ = [
    "ENSEMBLE",
    "ENSEMBLE_MEMBERS",
    "SEASONAL_NAIVE",
    "STATS_MODELS",
    "by_series",
    "ensemble",
    "run_statsforecast",
    "series_frames",
    "stats_model",
]

SEASONAL_NAIVE = "SeasonalNaive"
STATS_MODELS = (SEASONAL_NAIVE, "AutoETS", "AutoTheta", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")
ENSEMBLE = "StatisticalEnsemble"
ENSEMBLE_MEMBERS = ("AutoETS", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")
# Parts a process takes with n_jobs > 1 (`_parts`). StatsForecast's own n_jobs cuts the series into n
# contiguous blocks in id order: on Tourism monthly AutoARIMA's fit costs 2.6 s a series in the first
# half and 4.6 s in the second (25 series sampled, one process, 2026-12-05), so one process idles while
# the other finishes. On every other Tourism monthly series these parts took 0.868 of the blocks' time,
# the same forecasts (`python -m bench.peer_split`, results/competitions/timing/peer_split.json).
PARTS_PER_JOB = 25


def stats_model(name: str, period: int) -> Any:
    from statsforecast import models

    return getattr(models, name)(season_length=period)


def run_statsforecast(
    comp: Competition, names: Sequence[str] = STATS_MODELS, n_jobs: int = 1
) -> list[Forecast]:
    """statsforecast's models on the same histories, one model at a time (fit, then predict with the
    20/40/60/80% intervals, each timed), SeasonalNaive as the fallback of a series a model fails on. With
    `n_jobs` > 1 the series go to `n_jobs` processes in parts (`_parts`), each a StatsForecast of its
    own, taken by whichever process is free: per series the same fit as one StatsForecast over all."""
    import pandas as pd

    H, out = comp.horizon, []
    parts = _parts(series_frames(comp), [len(x) for x in comp.train], n_jobs)
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(ProcessPoolExecutor(n_jobs)) if n_jobs > 1 else None
        run = map if pool is None else pool.map
        for name in names:
            fallback = None if name == SEASONAL_NAIVE else stats_model(SEASONAL_NAIVE, comp.period)
            model = stats_model(name, comp.period)
            col = repr(model)  # statsforecast's column name (AutoCES's is "CES")
            start = time.perf_counter()
            fitted = list(run(functools.partial(_fit_part, model, fallback), parts))
            fit_s = time.perf_counter() - start
            start = time.perf_counter()
            predicted = pd.concat(list(run(functools.partial(_predict_part, h=H), fitted)), ignore_index=True)
            forecast_s = time.perf_counter() - start
            point = by_series(predicted, comp, col)
            bounds: dict[float, tuple[np.ndarray, np.ndarray]] = {
                lv: (
                    by_series(predicted, comp, f"{col}-lo-{lv}"),
                    by_series(predicted, comp, f"{col}-hi-{lv}"),
                )
                for lv in LEVELS
            }
            out.append(Forecast(name, point, quantiles_from_intervals(point, bounds), fit_s, forecast_s))
    return out


def series_frames(comp: Competition) -> list[Any]:
    """Each series' history as statsforecast reads it: `unique_id, ds, y`, ds 1, 2, ... (one frame each)."""
    import pandas as pd

    return [
        pd.DataFrame({"unique_id": sid, "ds": np.arange(1, len(x) + 1), "y": x})
        for sid, x in zip(comp.ids, comp.train, strict=True)
    ]


def by_series(predicted: Any, comp: Competition, column: str) -> np.ndarray:
    """A column of statsforecast's forecast frame (`unique_id` a column, H rows a series) as [S, H] in
    `comp`'s series order."""
    H = comp.horizon
    order = {sid: i for i, sid in enumerate(comp.ids)}
    rows = np.array([order[str(s)] for s in predicted["unique_id"].to_numpy()[::H]])
    values = np.empty((len(comp.ids), H))
    values[rows] = predicted[column].to_numpy(dtype=np.float64).reshape(-1, H)
    return values


def _parts(frames: Sequence[Any], lengths: Sequence[int], n_jobs: int) -> list[Any]:
    """The series' frames in the parts the processes take: one part for one process; else the longest
    series first, PARTS_PER_JOB parts a process, so that a slow part found late leaves little idle."""
    import pandas as pd

    if n_jobs <= 1:
        return [pd.concat(frames, ignore_index=True)]
    longest = np.argsort(-np.asarray(lengths), kind="stable")
    chunks = np.array_split(longest, min(len(longest), PARTS_PER_JOB * n_jobs))
    return [pd.concat([frames[i] for i in chunk], ignore_index=True) for chunk in chunks]


def _fit_part(model: Any, fallback: Any, part: Any) -> Any:
    """One part's StatsForecast, fitted (in a worker process, or in this one)."""
    from statsforecast import StatsForecast

    sf = StatsForecast(models=[model], freq=1, n_jobs=1, fallback_model=fallback)
    with warnings.catch_warnings():  # AutoARIMA's per-series advice
        warnings.simplefilter("ignore", UserWarning)
        sf.fit(df=part)
    return sf


def _predict_part(sf: Any, h: int) -> Any:
    """One fitted part's forecast with the 20/40/60/80% intervals, `unique_id` a column."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        predicted = sf.predict(h=h, level=list(LEVELS))
    return predicted.reset_index() if "unique_id" not in predicted.columns else predicted


def ensemble(members: Sequence[Forecast], name: str = ENSEMBLE) -> Forecast:
    """The mean of the members' point forecasts; its quantiles the mean of theirs (None if one has
    none); its times the sum of theirs."""
    point = np.mean([m.point for m in members], axis=0)
    quantiles = None
    if all(m.quantiles is not None for m in members):
        quantiles = {q: np.mean([m.quantiles[q] for m in members], axis=0) for q in QUANTILES}  # type: ignore[index]
    return Forecast(
        name,
        point,
        quantiles,
        sum(m.fit_s for m in members),
        sum(m.forecast_s for m in members),
    )
