"""The constants of a fit's cost estimate (app/inference/refit.py READOUT_SECONDS, LOCAL_SECONDS; issue 46,
item 6): fits of a read-out model (the panel tests' monthly stores) and of a hybrid (60 M3 monthly
series) on a grid of series counts, lengths and levels are timed through `run_fit` in this process (one
thread, as a fit worker runs it), each the best of `--repeats`. The read-out's constant is the median of
seconds / read-out work over the read-out's fits of 0.1 s or more; the local half's, the median of what
the hybrid's fits with a calibration (local work above 1e5) took beyond their read-out's estimate, per unit
of local work. Medians, not a least-squares fit: the biggest fits (tens of seconds) would set a
least-squares line and put the mid-sized ones, those near RSA_MAX_FIT_SECONDS, at twice their time.
Prints each fit's seconds beside the estimate from the constants in the code now and from the measured
ones. `--recompute FILE`: the constants again from a run's fits, without timing them again.

    .venv/bin/python -m bench.fit_cost [--repeats 2] [--recompute results/fit_cost.json]

Results: results/fit_cost.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts.manifest import load_manifest
from app.artifacts.readout import ReadoutSpec
from app.inference import refit
from app.inference.fit_pool import usable_cpus
from tests.utils.panel import NAME, publish, store

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "fit_cost.json"
GRID = [(1, 2000), (8, 400), (16, 2000), (64, 120), (64, 400), (256, 240)]
# Fits near the limits (RSA_MAX_FIT_VALUES: 1,000,000 values; RSA_MAX_FIT_HISTORY: 20,000 a series), where
# the refusal matters: the read-out's only (a hybrid's calibration on them would take minutes).
BIG = [(50, 20000), (250, 4000)]
LEVELS = [80.0, 95.0]


def model(folder: Path, local: bool) -> tuple[ReadoutSpec, Any, int]:
    repo, _ = publish(folder, local=local)
    manifest = load_manifest(repo / NAME / "1" / "manifest.json")
    spec = refit.refit_spec(manifest, NAME, 1)
    hybrid = manifest.panel.local_spec if manifest.panel is not None else None
    return spec, hybrid, manifest.horizon


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--recompute", type=Path, default=None, help="a run's JSON: its fits, not timed again")
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    command = f"python -m bench.fit_cost --repeats {args.repeats}"
    if args.recompute is not None:
        previous = json.loads(args.recompute.read_text())
        rows, command = previous["fits"], previous["command"]
        for r in rows:  # an earlier analysis's estimates (and those from constants since changed) go
            r.pop("estimate_fitted", None)
            r.pop("estimate_now", None)
    with tempfile.TemporaryDirectory() as tmp:
        for kind, local in () if rows else (("readout", False), ("hybrid", True)):
            folder = Path(tmp) / kind
            folder.mkdir()
            spec, hybrid, horizon = model(folder, local)
            for n_series, length in GRID + ([] if local else BIG):
                histories = [store(seed, length).astype(np.float64) for seed in range(n_series)]
                for levels in ([], LEVELS):
                    work = refit.fit_work(spec, histories, levels, hybrid)
                    best = float("inf")
                    for _ in range(args.repeats):
                        t = time.perf_counter()
                        refit.run_fit(spec, histories, horizon, levels, 600.0, hybrid)
                        best = min(best, time.perf_counter() - t)
                    rows.append(
                        {
                            "model": kind,
                            "series": n_series,
                            "length": length,
                            "levels": levels,
                            "readout_work": work.readout,
                            "local_work": work.local,
                            "seconds": round(best, 4),
                            "estimate_now": round(refit.estimated_seconds(work), 4),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
    readout = float(
        np.median(
            [
                r["seconds"] / r["readout_work"]
                for r in rows
                if r["model"] == "readout" and r["seconds"] >= 0.1
            ]
        )
    )
    local = float(
        np.median(
            [
                (r["seconds"] - readout * r["readout_work"]) / r["local_work"]
                for r in rows
                if r["model"] == "hybrid" and r["local_work"] > 1e5
            ]
        )
    )
    for r in rows:
        r["estimate_measured"] = round(readout * r["readout_work"] + local * r["local_work"], 4)
    y = np.array([r["seconds"] for r in rows])
    ratio = y / np.array([max(r["estimate_measured"], 1e-9) for r in rows])
    big = y >= 0.5  # the fits the refusal is about
    out = {
        "command": command,
        "host": {"machine": platform.machine(), "cpus": usable_cpus()},
        "readout_seconds": readout,
        "local_seconds": local,
        "measured_over_estimate": {
            "fits_of_0.5s_or_more": int(big.sum()),
            "min": float(ratio[big].min()) if big.any() else None,
            "max": float(ratio[big].max()) if big.any() else None,
        },
        "fits": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "fits"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
