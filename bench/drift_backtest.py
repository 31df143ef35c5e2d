"""The interval drift rule backtested on validation windows (issues 43 and 47): what
app/artifacts/readout/calibration.py's `level_factors` and `drift_check` were chosen by.

    python -m bench.drift_backtest --json results/intervals/drift_backtest.json
    python -m bench.drift_backtest --data M3:quarterly --limit 200              # a smoke run

For each panel (each competition set with its official horizon, and the pretrained models' pooled
monthly, quarterly and yearly panels with theirs), the default hybrid is trained on the histories and
every series long enough is scored at three origins: its last H values held out (origin 0), and the same
with the history H and 2H values shorter (origins 1 and 2), each by a read-out refitted on what comes
before (the calibration's own `held_out_scores`). A rule sets the widths at origin 1 (with factors of
origin 1 against origin 2) and is scored on origin 0's windows: the share inside each level, and the
mean |coverage − level|. Rules: `plain` (the split-conformal quantiles), `per-level` (each level's own
`drift_factor`) and `tail-20` (`level_factors`: a level with fewer than 20 windows beyond its quantile
takes the factor of the level below). Only the histories are read: the official hold-outs never.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts.conformal import conformal_quantile
from app.artifacts.readout.calibration import HeldOut, drift_factor, held_out_scores, level_factors
from bench.competition_data import load_competition
from bench.harness.report import write_json
from export.global_models.calibration import readout_spec
from export.global_models.config import PanelConfig
from export.global_models.search import train_global

LEVELS = (20.0, 40.0, 50.0, 60.0, 80.0, 90.0, 95.0, 99.0)
# panel: (sources, horizon, period, min_history): the competition sets, then the pretrained panels
PANELS: dict[str, tuple[tuple[str, ...], int, int, int | None]] = {
    "M3 monthly": (("M3:monthly",), 18, 12, None),
    "M3 quarterly": (("M3:quarterly",), 8, 4, None),
    "M3 yearly": (("M3:yearly",), 6, 1, None),
    "M3 other": (("M3:other",), 8, 1, None),
    "Tourism monthly": (("Tourism:monthly",), 24, 12, None),
    "Tourism quarterly": (("Tourism:quarterly",), 8, 4, None),
    "Tourism yearly": (("Tourism:yearly",), 4, 1, None),
    "pretrained monthly": (("M3:monthly", "Tourism:monthly"), 24, 12, 24),
    "pretrained quarterly": (("M3:quarterly", "Tourism:quarterly"), 8, 4, 8),
    "pretrained yearly": (("M3:yearly", "Tourism:yearly"), 6, 1, None),
}


def origin_scores(
    series: Sequence[np.ndarray], horizon: int, period: int, min_history: int | None
) -> list[np.ndarray]:
    """The default hybrid's scores [n, H] at origins 0, 1 and 2 of the series long enough for all three."""
    config = PanelConfig(horizon=horizon, period=period, min_history=min_history)
    model = train_global(list(series), config, local=True)
    spec = readout_spec(model)
    window = spec.input_length if model.local is None else max(spec.input_length, model.local.length)
    how = HeldOut(spec, window, spec.kernels(), None, None, model.local)
    index = [i for i, v in enumerate(series) if len(v) - 2 * horizon >= spec.min_history + horizon]
    out = []
    for shift in (0, 1, 2):
        held = [(series[i][: len(series[i]) - shift * horizon], horizon) for i in index]
        scores, _ = held_out_scores(held, index, how)
        out.append(scores)
    return out


RULES: dict[str, Callable[[np.ndarray, np.ndarray], list[float]]] = {
    "plain": lambda later, earlier: [1.0] * len(LEVELS),
    "per-level": lambda later, earlier: [drift_factor(later, earlier, lv) for lv in LEVELS],
    "tail-20": lambda later, earlier: level_factors(later, earlier, LEVELS),
}


def backtest(scores: list[np.ndarray]) -> dict[str, Any]:
    latest, later, earlier = scores
    quantiles = np.array([conformal_quantile(later, lv / 100) for lv in LEVELS])
    out: dict[str, Any] = {"windows": len(latest)}
    for name, rule in RULES.items():
        factors = np.asarray(rule(later, earlier))[:, None]
        widths = np.maximum.accumulate(quantiles * factors, axis=0)
        coverage = [float((latest <= w[None, :]).mean()) for w in widths]
        out[name] = {
            "factors": {f"{lv:g}": round(float(f), 4) for lv, f in zip(LEVELS, factors[:, 0], strict=True)},
            "coverage": {f"{lv:g}": round(c, 4) for lv, c in zip(LEVELS, coverage, strict=True)},
            "mean_miss": float(np.mean([abs(c - lv / 100) for c, lv in zip(coverage, LEVELS, strict=True)])),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", action="append", choices=list(PANELS), help="these panels only")
    ap.add_argument("--limit", type=int, default=None, help="the first N series of each source")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"levels": list(LEVELS), "panels": {}}
    for name in args.data or list(PANELS):
        sources, horizon, period, min_history = PANELS[name]
        series = [x for src in sources for x in load_competition(*src.split(":"), args.limit).train]
        start = time.perf_counter()
        result = backtest(origin_scores(series, horizon, period, min_history))
        result["seconds"] = round(time.perf_counter() - start, 1)
        report["panels"][name] = result
        print(
            f"{name} ({result['windows']} series at 3 origins): "
            + ", ".join(
                f"{rule} 80% {100 * result[rule]['coverage']['80']:.1f} 99% "
                f"{100 * result[rule]['coverage']['99']:.1f} miss {100 * result[rule]['mean_miss']:.2f}"
                for rule in RULES
            )
        )
    report["command"] = "python -m bench.drift_backtest " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    if args.json is not None:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
