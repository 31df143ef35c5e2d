"""Forecasts of a competition and their scores under the protocol (bench/competitions.py's docstring):
QUANTILES from central intervals, fev's WQL, and one model's row of sMAPE, MASE, MAPE, WQL and coverage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.inference.metrics import mape, mase, smape
from bench.competition_data import Competition
from export.reports import CompetitionScore as Score

__all__ = [
    "LEVELS",
    "QUANTILES",
    "Forecast",
    "Score",
    "quantiles_from_intervals",
    "score",
    "score_forecast",
    "wql",
]

QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
LEVELS = (20, 40, 60, 80)  # the central intervals whose bounds are QUANTILES (the median aside)


@dataclass(frozen=True, eq=False)
class Forecast:
    """One model's forecasts of every series: the point forecast [S, H], the quantiles {q: [S, H]} (None:
    the model gives none) and its wall times in seconds."""

    model: str
    point: np.ndarray
    quantiles: dict[float, np.ndarray] | None
    fit_s: float
    forecast_s: float


def quantiles_from_intervals(
    point: np.ndarray, bounds: Mapping[float, tuple[np.ndarray, np.ndarray]]
) -> dict[float, np.ndarray] | None:
    """QUANTILES from central intervals {level %: (lower, upper)}: q < 0.5 the lower bound of level
    100(1 − 2q), q > 0.5 the upper bound of level 100(2q − 1), 0.5 the point forecast; None when a level
    is missing."""
    by_level = {round(float(lv)): b for lv, b in bounds.items()}
    out = {}
    for q in QUANTILES:
        if q == 0.5:
            out[q] = point
            continue
        level = round(100 * abs(1 - 2 * q))
        if level not in by_level:
            return None
        out[q] = by_level[level][0] if q < 0.5 else by_level[level][1]
    return out


def wql(actual: np.ndarray, quantiles: Mapping[float, np.ndarray]) -> float:
    """fev's WQL: per quantile q, 2·Σ pinball_q(y, ŷ_q) / Σ|y| over every series and step; the mean over
    the quantiles."""
    total = float(np.abs(actual).sum())
    per_q = []
    for q, pred in quantiles.items():
        diff = actual - pred
        per_q.append(2.0 * float(np.maximum(q * diff, (q - 1) * diff).sum()) / total)
    return float(np.mean(per_q))


def score(
    comp: Competition,
    model: str,
    forecast: np.ndarray,
    fit_s: float,
    forecast_s: float,
    quantiles: Mapping[float, np.ndarray] | None = None,
) -> Score:
    """One model's row: mean sMAPE, MASE (and Tourism's MAPE) over the series; WQL and the 80% interval's
    coverage when it gave quantiles."""
    inside = None
    if quantiles is not None:
        inside = float(((comp.test >= quantiles[0.1]) & (comp.test <= quantiles[0.9])).mean())
    return Score(
        data=comp.name,
        model=model,
        series=len(comp.ids),
        smape=float(smape(comp.test, forecast).mean()),
        mase=float(mase(comp.train, comp.test, forecast, comp.period).mean()),
        mape=float(mape(comp.test, forecast).mean()) if comp.dataset == "Tourism" else None,
        fit_s=fit_s,
        forecast_s=forecast_s,
        wql=wql(comp.test, quantiles) if quantiles is not None else None,
        coverage_80=inside,
    )


def score_forecast(comp: Competition, f: Forecast) -> Score:
    return score(comp, f.model, f.point, f.fit_s, f.forecast_s, f.quantiles)
