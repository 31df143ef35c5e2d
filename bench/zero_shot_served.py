"""The shipped pretrained models as the service answers them (issue 47): their ONNX graphs and manifests
in model_repository/, served by `python -m app` (`/v1/models/pretrained-monthly/forecast`, the 80%
interval), on M3 and Tourism monthly's official hold-outs (bench/competitions.py's protocol: one window,
the last H values). It checks that what is shipped and served is what bench.zero_shot's pooled row
scored (that row trains the same settings on the same histories in numpy), and gives the 80% interval's
coverage by history length (the groups of the model's own calibration report, in its manifest).

    python -m bench.zero_shot_served --json results/zero_shot/served.json
    python -m bench.zero_shot_served --limit 20                   # a smoke run
    python -m bench.zero_shot_served --data fpp3:us_employment --json results/zero_shot/served_held_back.json
    python -m bench.zero_shot_served --data M1:monthly --data M1:quarterly --data M1:yearly \
        --json results/zero_shot/served_m1.json

`--data fpp3:NAME` scores a monthly panel held back from everything (bench/competition_data.py
`HELD_BACK`), `--data M1:FREQUENCY` the M1 competition (held back too): there the served models are
zero-shot. Each set goes to the shipped model of its cycle (`MODELS`: pretrained-monthly, -quarterly or
-yearly), whose horizon covers the competitions' (24, 8 and 6).

The competitions' series carry no dates: each is sent with the same made-up `start` (2000-01-01), which
only names the answer's timestamps. pretrained-monthly saw these histories in training (never their
hold-outs): this is its in-sample-series, out-of-sample-window score, not a zero-shot one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.artifacts.publish import version_numbers
from bench.competition_data import Competition, load_competition
from bench.competition_scores import score
from bench.harness import REPO
from bench.harness.servers import LocalServer, local_server

MODELS = {12: "pretrained-monthly", 4: "pretrained-quarterly", 1: "pretrained-yearly"}  # by the set's cycle
SETS = ("M3:monthly", "Tourism:monthly")  # the default sets
BATCH = 50  # series per request, within the service's default per-request limit


def shipped_server() -> contextlib.AbstractContextManager[LocalServer]:
    """The service of the shipped models of `MODELS` from the repository's model_repository/, on CPU."""
    env = {
        "RSA_MODEL_REPOSITORY": str(REPO / "model_repository"),
        "RSA_MODELS": ",".join(MODELS.values()),
        "RSA_DEVICE": "cpu",
    }
    return local_server(env)


def history_edges(model: str) -> list[int]:
    """The upper ends of the history groups of `model`'s calibration report (the manifest of its newest
    version, the one the service answers with: `intervals.calibration.coverage`, "history 24-84", ...),
    the last group's left open."""
    folder = REPO / "model_repository" / model
    newest = folder / str(version_numbers(folder)[-1])  # the service's rule of which folders are versions
    manifest = json.loads((newest / "manifest.json").read_text())
    groups = [c["group"] for c in manifest["intervals"]["calibration"]["coverage"]]
    return [int(g.rsplit("-", 1)[1]) for g in groups[:-1]]


def served_forecasts(url: str, comp: Competition) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The service's point forecast and 80% bounds for every series of `comp` from the shipped model of its
    cycle, its first H steps: (point, lower, upper), each [S, H]."""
    H = comp.horizon
    rows: list[list[np.ndarray]] = [[], [], []]
    with httpx.Client(base_url=url, timeout=120) as client:
        for i in range(0, len(comp.train), BATCH):
            body = {
                "series": [
                    {"id": comp.ids[j], "start": "2000-01-01", "values": [float(v) for v in comp.train[j]]}
                    for j in range(i, min(i + BATCH, len(comp.train)))
                ],
                "horizon": H,
                "level": [80],
            }
            r = client.post(f"/v1/models/{MODELS[comp.period]}/forecast", json=body)
            r.raise_for_status()
            for f in r.json()["forecasts"]:
                for k, key in enumerate(("forecast", "lo-80", "hi-80")):
                    rows[k].append(np.asarray(f[key], dtype=np.float64)[:, 0])
    point, lower, upper = (np.stack(r) for r in rows)
    return point, lower, upper


def coverage_by_history(comp: Competition, inside: np.ndarray) -> dict[str, dict[str, Any]]:
    """The share of hold-out values inside the interval per group of history lengths ([S, H] `inside`)."""
    lengths = np.array([len(x) for x in comp.train])
    out: dict[str, dict[str, Any]] = {}
    edges = [e for e in history_edges(MODELS[comp.period]) if e < lengths.max()]
    bounds = [0, *edges, int(lengths.max())]
    for lo, hi in itertools.pairwise(bounds):
        m = (lengths > lo) & (lengths <= hi)
        if m.any():
            group = f"history {int(lengths[m].min())}-{int(lengths[m].max())}"
            out[group] = {"series": int(m.sum()), "coverage_80": float(inside[m].mean())}
    return out


def evaluate(url: str, limit: int | None = None, items: Sequence[str] = SETS) -> dict[str, Any]:
    report: dict[str, Any] = {"sets": {}}
    for item in items:
        dataset, _, frequency = item.partition(":")
        comp = load_competition(dataset, frequency or "monthly", limit)
        if comp.period not in MODELS:
            raise ValueError(f"{comp.name}: no shipped model has its cycle {comp.period}; {sorted(MODELS)}")
        model = MODELS[comp.period]
        start = time.perf_counter()
        point, lower, upper = served_forecasts(url, comp)
        seconds = time.perf_counter() - start
        inside = (comp.test >= lower) & (comp.test <= upper)
        row = dataclasses.asdict(score(comp, f"{model} (served)", point, 0.0, seconds))
        row["coverage_80"] = float(inside.mean())
        report["sets"][comp.name] = {
            "model": model,
            "series": len(comp.ids),
            "horizon": comp.horizon,
            "row": row,
            "coverage_by_history": coverage_by_history(comp, inside),
        }
    return report


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="the first N series of each set (a smoke run)")
    ap.add_argument(
        "--data",
        action="append",
        help="DATASET:FREQUENCY or fpp3:PANEL; monthly, quarterly or yearly (default: M3, Tourism monthly)",
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    with shipped_server() as server:
        report = evaluate(server.url, args.limit, args.data or SETS)
    report["command"] = "python -m bench.zero_shot_served " + " ".join(argv if argv is not None else [])
    for name, part in report["sets"].items():
        r = part["row"]
        print(
            f"{name} ({part['model']}, {part['series']} series, H = {part['horizon']}): MASE "
            f"{r['mase']:.4f}, sMAPE {r['smape']:.2f}, 80% coverage {100 * r['coverage_80']:.1f}%; "
            "by history: "
            + ", ".join(
                f"{g} {100 * v['coverage_80']:.1f}% ({v['series']})"
                for g, v in part["coverage_by_history"].items()
            )
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
