"""The shipped pretrained models' interval coverage at every level they serve, on values none of them
trained on (issues 43 and 47): the M3 and Tourism official hold-outs of the series whose histories the
monthly, quarterly and yearly models saw (bench/competitions.py's protocol: one window, the first H of
each hold-out, H the competition's), and ETT's four test months for the hourly model (trained on the
first twelve; origins every 48 hours, each forecast from the whole history before it) and, as daily
means, for the daily model (origins every 14 days).

    python -m bench.pretrained_coverage --json results/zero_shot/coverage.json
    python -m bench.pretrained_coverage --only yearly --limit 50               # a smoke run
    python -m bench.pretrained_coverage --only yearly --repository /tmp/old/model_repository  # a past build

Each model is trained again by `export.pretrained`'s own code (deterministic: its ONNX graph must equal
the shipped one byte for byte, checked) and forecasts offline with the local half its manifest names;
the half-widths are the manifest's widths times each window's spread, as the service computes them
(export/global_models/calibration.py `interval_halfwidths`). A level's coverage is the share of held-out
values inside its interval, every series and step pooled. Beside it, each row's MASE (the in-sample
seasonal-naive scale at the model's period, averaged over series and origins) of the served forecast
and of the model's read-out alone (its local half left out): what the hybrid adds on that data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts.hybrid import LocalSpec
from app.inference.metrics import mase
from bench.competition_data import load_competition
from bench.harness.report import write_json
from export.global_models.calibration import interval_halfwidths
from export.global_models.model import GlobalModel
from export.paths import REPO_ROOT
from export.pretrained import (
    ETT_COLUMNS,
    ETT_TRAIN_HOURS,
    SPECS,
    PretrainedSpec,
    daily_means,
    train_pretrained,
)

SHIPPED = REPO_ROOT / "model_repository"
ETT_TEST = (16 * 30 * 24, 20 * 30 * 24)  # the ETT protocol's test months (export/data/splits.py)
ETT_STEP = 48  # hours between the hourly model's test origins (its horizon)
ETT_DAILY_STEP = 14  # days between the daily model's test origins (its horizon)


def shipped(spec: PretrainedSpec, repository: Path = SHIPPED) -> tuple[dict[str, Any], Path]:
    """The shipped version 1's manifest and the path of its graph."""
    folder = repository / spec.name / "1"
    return json.loads((folder / "manifest.json").read_text()), folder / "model.onnx"


# How far a weight of a graph trained again may lie from the shipped one's, relative to its tensor's
# largest |value|: the same code and data trained on another processor sum in another order, and
# pretrained-yearly's, -quarterly's and -daily's float32 weights came out up to 9.2e-8 apart, the
# graphs otherwise byte-equal (2026-12-07, an AMD EPYC against the machine that built them).
GRAPH_RTOL = 1e-6


def same_graph(model: GlobalModel, path: Path) -> bool:
    """Whether `model`'s ONNX graph is the one at `path`: the same nodes and tensors, byte for byte but
    for float weights within GRAPH_RTOL."""
    import onnx
    from onnx import numpy_helper

    from export.global_models.graph import global_graph

    ours, theirs = global_graph(model), onnx.load(str(path))
    if ours.SerializeToString() == theirs.SerializeToString():
        return True
    weights = []
    for graph in (ours, theirs):
        weights.append({t.name: numpy_helper.to_array(t) for t in graph.graph.initializer})
        del graph.graph.initializer[:]
    if ours.SerializeToString() != theirs.SerializeToString() or weights[0].keys() != weights[1].keys():
        return False
    for name, a in weights[0].items():
        b = weights[1][name]
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind != "f" or a.size == 0:
            if not np.array_equal(a, b):
                return False
        elif np.max(np.abs(a.astype(np.float64) - b)) > GRAPH_RTOL * np.max(np.abs(b.astype(np.float64))):
            return False
    return True


@dataclasses.dataclass
class Scored:
    """What one forecast of held-out values scored: how many lie inside each level's interval, and each
    series' MASE by the served forecast and by the read-out alone."""

    inside: list[int]
    mase: np.ndarray
    mase_readout: np.ndarray


def scored(
    intervals: dict[str, Any], model: GlobalModel, histories: Sequence[np.ndarray], future: np.ndarray
) -> Scored:
    """`Scored` of `future`'s values [S, h] (NaN: none) forecast from `histories`."""
    h = future.shape[1]
    point = model.forecast(list(histories))[:, :h]
    half = interval_halfwidths(intervals, model, histories)[:, :, :h]  # [levels, S, h]
    inside = np.abs(future[None] - point[None]) <= half
    alone = dataclasses.replace(model, local=None).forecast(list(histories))[:, :h]
    period = model.config.period
    return Scored(
        [int(n) for n in (inside & ~np.isnan(future)[None]).sum(axis=(1, 2))],
        mase(histories, future, point, period),
        mase(histories, future, alone, period),
    )


def competition_rows(
    spec: PretrainedSpec, model: GlobalModel, intervals: dict[str, Any], limit: int | None
) -> list[dict[str, Any]]:
    rows = []
    for dataset in ("M3", "Tourism"):
        comp = load_competition(dataset, spec.frequency, limit)
        done = scored(intervals, model, comp.train, comp.test[:, : spec.horizon])
        values = int(np.isfinite(comp.test[:, : spec.horizon]).sum())
        rows.append(_row(comp.name + " official hold-outs", len(comp.train), values, intervals, [done]))
    return rows


def ett_rows(
    model: GlobalModel, intervals: dict[str, Any], limit: int | None, daily: bool = False
) -> list[dict[str, Any]]:
    """ETT's test months, hour by hour or (`daily`) as daily means: `export.pretrained`'s own reading of
    the training months, applied to whole files."""
    import pandas as pd

    series = [
        pd.read_csv(REPO_ROOT / "data" / "ETT" / file)[c].to_numpy(dtype=np.float64)
        for file in ("ETTh1.csv", "ETTh2.csv")
        for c in ETT_COLUMNS
    ]
    first, end, step, unit = (*ETT_TEST, ETT_STEP, " h")
    if daily:
        series = [daily_means(v) for v in series]
        first, end, step, unit = first // 24, end // 24, ETT_DAILY_STEP, " days"
    origins = list(range(first, end - step + 1, step))[:limit]
    done = [
        scored(
            intervals,
            model,
            [s[:origin] for s in series],
            np.stack([s[origin : origin + step] for s in series]),
        )
        for origin in origins
    ]
    values = len(origins) * len(series) * step
    what = f"ETT test months{', daily means' if daily else ''}, {len(origins)} origins every {step}{unit}"
    return [_row(what, len(series), values, intervals, done)]


def _row(
    what: str, series: int, values: int, intervals: dict[str, Any], done: Sequence[Scored]
) -> dict[str, Any]:
    inside = np.sum([d.inside for d in done], axis=0)
    return {
        "held_out": what,
        "series": series,
        "values": values,
        "coverage": {f"{lv:g}": int(n) / values for lv, n in zip(intervals["levels"], inside, strict=True)},
        # a series with a missing value held out has no MASE (ETT and the hold-outs' first H have none)
        "mase": float(np.nanmean(np.concatenate([d.mase for d in done]))),
        "mase_readout_alone": float(np.nanmean(np.concatenate([d.mase_readout for d in done]))),
    }


def evaluate(frequency: str, limit: int | None = None, repository: Path = SHIPPED) -> dict[str, Any]:
    spec = SPECS[frequency]
    manifest, graph = shipped(spec, repository)
    series = [s for src in spec.sources for s in src.load()]
    start = time.perf_counter()
    model, _, _ = train_pretrained(spec, series)
    if not same_graph(model, graph):
        raise SystemExit(f"{spec.name}: the model trained here is not the shipped one (graph differs)")
    # the local half the manifest serves (its members, window and tilt), not today's search's choice, so
    # that a past build (`--repository`) is scored as it was served
    local = (manifest.get("panel") or {}).get("local")
    model = dataclasses.replace(model, local=None if local is None else LocalSpec.from_json(local))
    intervals = manifest["intervals"]
    rows = (
        ett_rows(model, intervals, limit, daily=frequency == "daily")
        if frequency in ("hourly", "daily")
        else competition_rows(spec, model, intervals, limit)
    )
    calibration = intervals["calibration"]
    return {
        "model": spec.name,
        "rule": calibration["rule"],
        "drift_check": (calibration.get("drift") or {}).get("check"),
        "trained_in_s": round(time.perf_counter() - start, 1),
        "rows": rows,
        "training": {
            "hourly": f"{ETT_TRAIN_HOURS} hours of each column",
            "daily": f"{ETT_TRAIN_HOURS // 24} daily means of each column",
        }.get(frequency, "histories"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=list(SPECS), help="these models only")
    ap.add_argument("--limit", type=int, default=None, help="the first N series (hourly, daily: origins)")
    ap.add_argument(
        "--repository",
        type=Path,
        default=SHIPPED,
        help="the repository whose version 1 to score (a past "
        "build: `git archive <commit> model_repository | tar -x -C /tmp/old`)",
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    frequencies = args.only or list(SPECS)
    report: dict[str, Any] = {"models": [evaluate(f, args.limit, args.repository) for f in frequencies]}
    report["command"] = "python -m bench.pretrained_coverage " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    for m in report["models"]:
        for row in m["rows"]:
            shares = ", ".join(f"{lv}%: {100 * c:.1f}" for lv, c in row["coverage"].items())
            print(
                f"{m['model']} ({m['rule']}) on {row['held_out']} ({row['series']} series): {shares}; "
                f"MASE {row['mase']:.3f} (the read-out alone {row['mase_readout_alone']:.3f})"
            )
    if args.json is not None:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
