"""The competitions' peers: statsforecast's models fitted per series in the same run, and the
StatisticalEnsemble of four of them (Nixtla's amazon-chronos experiment)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.competition_data import Competition
from bench.competition_scores import LEVELS, QUANTILES, Forecast, quantiles_from_intervals

__all__ = [
    "ENSEMBLE",
    "ENSEMBLE_MEMBERS",
    "SEASONAL_NAIVE",
    "STATS_MODELS",
    "ensemble",
    "run_statsforecast",
]

SEASONAL_NAIVE = "SeasonalNaive"
STATS_MODELS = (SEASONAL_NAIVE, "AutoETS", "AutoTheta", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")
ENSEMBLE = "StatisticalEnsemble"
ENSEMBLE_MEMBERS = ("AutoETS", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")


def _stats_model(name: str, period: int) -> Any:
    from statsforecast import models

    return getattr(models, name)(season_length=period)


def run_statsforecast(
    comp: Competition, names: Sequence[str] = STATS_MODELS, n_jobs: int = 1
) -> list[Forecast]:
    """statsforecast's models on the same histories, one model at a time (fit, then predict with the
    20/40/60/80% intervals, each timed) over `n_jobs` processes, SeasonalNaive as the fallback of a
    series a model fails on."""
    import pandas as pd
    from statsforecast import StatsForecast

    frame = pd.concat(
        [
            pd.DataFrame({"unique_id": sid, "ds": np.arange(1, len(x) + 1), "y": x})
            for sid, x in zip(comp.ids, comp.train, strict=True)
        ],
        ignore_index=True,
    )
    order = {sid: i for i, sid in enumerate(comp.ids)}
    H, out = comp.horizon, []
    for name in names:
        fallback = None if name == SEASONAL_NAIVE else _stats_model(SEASONAL_NAIVE, comp.period)
        model = _stats_model(name, comp.period)
        col = repr(model)  # statsforecast's column name (AutoCES's is "CES")
        sf = StatsForecast(models=[model], freq=1, n_jobs=n_jobs, fallback_model=fallback)
        with warnings.catch_warnings():  # AutoARIMA's per-series advice; forked workers inherit this
            warnings.simplefilter("ignore", UserWarning)
            start = time.perf_counter()
            sf.fit(df=frame)
            fit_s = time.perf_counter() - start
            start = time.perf_counter()
            predicted = sf.predict(h=H, level=list(LEVELS))
            forecast_s = time.perf_counter() - start
        predicted = predicted.reset_index() if "unique_id" not in predicted.columns else predicted
        rows = np.array([order[str(s)] for s in predicted["unique_id"].to_numpy()[::H]])

        def column(name: str, frame: Any = predicted, rows: np.ndarray = rows) -> np.ndarray:
            values = np.empty((len(comp.ids), H))
            values[rows] = frame[name].to_numpy(dtype=np.float64).reshape(-1, H)
            return values

        point = column(col)
        bounds: dict[float, tuple[np.ndarray, np.ndarray]] = {
            lv: (column(f"{col}-lo-{lv}"), column(f"{col}-hi-{lv}")) for lv in LEVELS
        }
        out.append(Forecast(name, point, quantiles_from_intervals(point, bounds), fit_s, forecast_s))
    return out


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
