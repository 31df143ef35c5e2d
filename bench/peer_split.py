"""How the competitions bench hands statsforecast's series to its processes (issue 43: the whole benchmark
under 30 minutes on 2 cores): StatsForecast's own `n_jobs` (the series cut into n contiguous blocks in
id order, one a process) against the bench's parts (bench/competition_peers.py `run_statsforecast`: the
longest series first, PARTS_PER_JOB parts a process, each taken by whichever process is free).

One model on every other series of one data set in id order (so that StatsForecast's blocks keep the
full set's imbalance at half the cost), the two ways alternated `--rounds` times, each fit and forecast
timed; the forecasts must be equal (each part is a StatsForecast of its own, fitting each series as one
over all does).

    python -m bench.peer_split --json results/competitions/timing/peer_split.json  # ~13 min a round
    python -m bench.peer_split --data M3:other --limit 40 --model AutoETS        # a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.competition_data import Competition, load_competition
from bench.competition_peers import (
    PARTS_PER_JOB,
    SEASONAL_NAIVE,
    by_series,
    run_statsforecast,
    series_frames,
    stats_model,
)
from bench.competition_scores import LEVELS
from bench.harness.report import write_json


def every_other(comp: Competition) -> Competition:
    """Every other series of `comp` in id order (StatsForecast's order)."""
    keep = sorted(range(len(comp.ids)), key=lambda i: comp.ids[i])[::2]
    return dataclasses.replace(
        comp, ids=[comp.ids[i] for i in keep], train=[comp.train[i] for i in keep], test=comp.test[keep]
    )


def blocks(comp: Competition, name: str, n_jobs: int) -> tuple[np.ndarray, float, float]:
    """StatsForecast's own split: one StatsForecast over every series with `n_jobs` (the point forecasts
    [series, H] in `comp`'s order, the fit's and the forecast's seconds)."""
    import pandas as pd
    from statsforecast import StatsForecast

    model = stats_model(name, comp.period)
    fallback = stats_model(SEASONAL_NAIVE, comp.period)
    sf = StatsForecast(models=[model], freq=1, n_jobs=n_jobs, fallback_model=fallback)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        start = time.perf_counter()
        sf.fit(df=pd.concat(series_frames(comp), ignore_index=True))
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        predicted = sf.predict(h=comp.horizon, level=list(LEVELS))
        forecast_s = time.perf_counter() - start
    predicted = predicted.reset_index() if "unique_id" not in predicted.columns else predicted
    return by_series(predicted, comp, repr(model)), fit_s, forecast_s


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="Tourism:monthly", help="DATASET:FREQUENCY")
    parser.add_argument("--model", default="AutoARIMA", help="a statsforecast model")
    parser.add_argument("--rounds", type=int, default=1, help="alternated pairs (blocks first, then parts)")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="only the first N series (a smoke run)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    dataset, _, frequency = args.data.partition(":")
    comp = every_other(load_competition(dataset, frequency or "monthly", args.limit))
    runs: list[dict[str, Any]] = []
    points: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        order = ("blocks", "parts") if r % 2 == 0 else ("parts", "blocks")
        for how in order:
            if how == "blocks":
                point, fit_s, forecast_s = blocks(comp, args.model, args.n_jobs)
            else:
                (f,) = run_statsforecast(comp, [args.model], args.n_jobs)
                point, fit_s, forecast_s = f.point, f.fit_s, f.forecast_s
            points[how] = point
            runs.append({"round": r, "how": how, "fit_s": fit_s, "forecast_s": forecast_s})
            print(f"round {r} {how:6s} fit {fit_s:7.1f} s  forecast {forecast_s:5.2f} s", flush=True)
    equal = bool(np.array_equal(points["blocks"], points["parts"]))
    median = {
        how: float(np.median([x["fit_s"] + x["forecast_s"] for x in runs if x["how"] == how]))
        for how in ("blocks", "parts")
    }
    print(
        f"median fit + forecast: blocks {median['blocks']:.1f} s, parts {median['parts']:.1f} s "
        f"({median['parts'] / median['blocks']:.3f}); forecasts equal: {equal}"
    )
    if args.json:
        write_json(
            args.json,
            {
                "data": comp.name,
                "series": len(comp.ids),
                "model": args.model,
                "n_jobs": args.n_jobs,
                "parts_per_job": PARTS_PER_JOB,
                "runs": runs,
                "median_s": median,
                "forecasts_equal": equal,
                "load_average": list(os.getloadavg()),
                "command": "python -m bench.peer_split "
                + " ".join(argv if argv is not None else sys.argv[1:]),
            },
        )
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
