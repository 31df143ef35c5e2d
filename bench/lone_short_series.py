"""Series too short for the default training windows, each trained alone as a user with one series would
(`export.panel train`'s defaults: `ours_config`, the hybrid), beside statsforecast's models on the same
series in the same run.

    python -m bench.lone_short_series --json results/competitions/lone_short.json   # about 3 minutes
    python -m bench.lone_short_series --data M3:monthly                             # one set

A series is short where it holds fewer than train_min + 2H values (two cycles of input for a training
window, its H targets, and the H values validation holds out): 340 of M3 monthly's 1,428 histories (48-58
months at H 18). Until 2026-12-07 `export.panel train` refused every such lone series; its windows now
need what the series leaves (`PanelConfig.fitted_to`). Per set: how many were trained and refused (fewer
than min_history + 2H values), the mean MASE on the official hold-out of ours, of its read-out alone and
of statsforecast's models and their StatisticalEnsemble (the competitions bench's peers, fitted per
series), and the levels the exporter's calibration gave them (`calibrate_global`) with the coverage where
it gave 80%."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.report import write_json

SETS = (
    "M3:monthly",
    "M3:quarterly",
    "M3:yearly",
    "M3:other",
    "Tourism:monthly",
    "Tourism:quarterly",
    "Tourism:yearly",
)
PEERS = ("SeasonalNaive", "AutoETS", "AutoTheta", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")


def one_set(name: str, n_jobs: int) -> dict[str, Any]:
    from app.inference.metrics import mase
    from bench.competition_data import load_competition
    from bench.competition_ours import ours_config
    from bench.competition_peers import ENSEMBLE, ensemble, run_statsforecast
    from export.global_models.onnx import DEFAULT_LEVELS, calibrate_global, interval_halfwidths
    from export.global_models.search import train_global

    dataset, frequency = name.split(":")
    comp = load_competition(dataset, frequency)
    cfg = ours_config(comp)
    H, period = comp.horizon, comp.period
    short = [i for i, v in enumerate(comp.train) if len(v) < cfg.train_min + 2 * H]
    out: dict[str, Any] = {
        "data": name,
        "series": len(comp.train),
        "short": len(short),
        "needs": f"train_min + 2H = {cfg.train_min} + 2 × {H}",
    }
    if not short:
        return out
    frequency_code = {12: "1MS", 4: "3MS", 1: "12MS"}.get(period, "1D")
    trained, refused, ours, alone = [], 0, [], []
    got: dict[str, int] = {}
    inside: list[np.ndarray] = []
    start = time.perf_counter()
    for i in short:
        train = [comp.train[i]]
        try:
            model = train_global(train, cfg, frequency_code, local=True)
        except ValueError:  # shorter than min_history + 2H: refused, saying what it needs
            refused += 1
            continue
        trained.append(i)
        point = model.forecast(train)
        ours.append(point[0])
        readout = copy.copy(model)
        readout.local = None
        alone.append(readout.forecast(train)[0])
        intervals, _ = calibrate_global(model, train, DEFAULT_LEVELS)
        levels = [] if intervals is None else [lv for lv in intervals["levels"] if lv >= 80]
        key = "/".join(f"{lv:g}" for lv in levels) or "none above 50"
        got[key] = got.get(key, 0) + 1
        if intervals is not None and 80.0 in intervals["levels"]:
            half = interval_halfwidths(intervals, model, train)[list(intervals["levels"]).index(80.0)]
            inside.append(np.abs(comp.test[i] - point[0]) <= half[0])
    seconds = time.perf_counter() - start
    out.update(trained=len(trained), refused=refused, ours_seconds=round(seconds, 1), levels=got)
    if not trained:
        return out
    sub = dataclasses.replace(
        comp,
        ids=[comp.ids[i] for i in trained],
        train=[comp.train[i] for i in trained],
        test=comp.test[trained],
    )
    peers = run_statsforecast(sub, PEERS, n_jobs=n_jobs)
    peers.append(
        ensemble(
            [f for f in peers if f.model in ("AutoETS", "AutoARIMA", "AutoCES", "DynamicOptimizedTheta")]
        )
    )

    def score(point: np.ndarray) -> float:
        return round(float(mase(sub.train, sub.test, point, period).mean()), 4)

    scores = {"ours (the hybrid)": score(np.array(ours)), "ours: read-out alone": score(np.array(alone))}
    scores |= {f.model: score(f.point) for f in peers}
    out["mase"] = dict(sorted(scores.items(), key=lambda kv: kv[1]))
    out["peers_seconds"] = round(sum(f.fit_s + f.forecast_s for f in peers if f.model != ENSEMBLE), 1)
    out["coverage_80"] = (
        {"series": len(inside), "coverage": round(float(np.concatenate(inside).mean()), 4)}
        if inside
        else None
    )
    return out


def table(r: dict[str, Any]) -> str:
    head = f"{r['data']}: {r['short']} of {r['series']} series hold fewer than {r['needs']} values"
    if "trained" not in r:
        return head
    lines = [head + f"; trained {r['trained']}, refused {r['refused']}; levels got {r['levels']}"]
    for model, v in r.get("mase", {}).items():
        lines.append(f"  {model:<28} MASE {v:.4f}")
    if r.get("coverage_80"):
        c = r["coverage_80"]
        lines.append(f"  80% interval: {c['series']} series, coverage {c['coverage']:.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from bench.competitions import _code_state

    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--data", action="append", choices=SETS, help="one set (repeatable; default: all)")
    parser.add_argument("--n-jobs", type=int, default=2, help="statsforecast's processes")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    state = _code_state()
    start = time.perf_counter()
    reports = []
    for name in args.data or SETS:
        reports.append(one_set(name, args.n_jobs))
        print(table(reports[-1]), flush=True)
    if args.json is not None:
        write_json(
            args.json,
            {
                "kind": "lone_short_series",
                "command": "python -m bench.lone_short_series"
                + "".join(f" --data {d}" for d in args.data or [])
                + f" --n-jobs {args.n_jobs}",
                "code": _code_state(state),
                "sets": reports,
                "seconds": round(time.perf_counter() - start, 1),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
