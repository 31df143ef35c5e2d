"""The constants of a fit's cost estimate (app/inference/refit.py READOUT_SECONDS, STEP_SECONDS,
LOCAL_SECONDS, CALENDAR_SECONDS; issue 46, items 2 and 6): fits of a read-out model (the panel tests'
monthly stores), of a wide-window read-out (`long`: a day of 5-minute steps, L = 1,728, the random layer),
of a hybrid (60 M3 monthly series) and of a covariate model (tests/utils/shops.py's daily shops: a future,
a past, a static and a day-of-week calendar covariate) on a grid of series counts, lengths and levels are
timed through `run_fit` in this process (one thread, as a fit worker runs it), each the best of
`--repeats`. The read-out's two constants (per multiply-add, per window step read one at a time) are the
non-negative pair whose estimates of the two read-outs' fits of 0.1 s or more are nearest their seconds
in relative terms (least squares on estimate / seconds − 1: the small read-out's cost is mostly its
steps, the wide one's its matrix products); the local half's, the median of what the hybrid's fits with a
calibration (local work above 1e5) took beyond their read-out's estimate, per unit of local work; the
calendar's, the median of what the covariate model's fits of 0.1 s or more took beyond their read-out
work's estimate (their covariate features' multiply-adds included), per calendar read.
Prints each fit's seconds beside the estimate from the constants in the code now and from the measured
ones. `--recompute FILE`: the constants again from a run's fits, without timing them again.

    .venv/bin/python -m bench.fit_cost [--repeats 2] [--recompute results/fit_cost.json]

Results: results/fit_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
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
from app.inference.covariates import HistoryRows
from app.inference.fit_pool import usable_cpus
from tests.export.test_covariates_served import shop
from tests.utils.panel import NAME, publish, store
from tests.utils.shops import NAME as SHOPS
from tests.utils.shops import publish_shops

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "fit_cost.json"
GRID = [(1, 2000), (8, 400), (16, 2000), (64, 120), (64, 400), (256, 240)]
# Fits near the limits (RSA_MAX_FIT_VALUES: 1,000,000 values; RSA_MAX_FIT_HISTORY: 20,000 a series), where
# the refusal matters: the read-out's only (a hybrid's calibration on them would take minutes).
BIG = [(50, 20000), (250, 4000)]
LEVELS = [80.0, 95.0]
# The covariate model's (daily, L = 28, H = 7): its fits' cost is mostly the calendar's reads.
COVARIATE_GRID = [(1, 2000), (8, 400), (16, 2000), (64, 120), (64, 400)]
# A read-out of wide windows (`long`: a day of 5-minute steps, L = 6 days = 1,728, H = 288, the random
# layer of 512: 1,670 features, as fpp3's bank_calls trains): its fits are matrix products, done many times
# faster per multiply-add than the small read-out's, whose cost is mostly each window's steps read one at
# a time. Its calibrations forecast thousands of tail windows: levels on the shortest only.
LONG_GRID = [(1, 2500), (1, 5000), (2, 5000), (1, 10000)]
LONG_PERIOD = 288


def long_series(seed: int, length: int) -> np.ndarray:
    """A 5-minute series with a daily cycle: calls by day, none at night."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    day = np.clip(np.sin(2 * np.pi * t / LONG_PERIOD), 0, None)
    return np.round(80 * day * (1 + 0.1 * rng.standard_normal(length)).clip(0) + rng.poisson(2, length), 1)


def publish_long(folder: Path) -> Path:
    """The `long` model (LONG_GRID's note) trained on two such series and exported; its repository."""
    from export.global_models.config import PanelConfig
    from export.global_models.onnx import export_global
    from export.global_models.search import train_global

    cfg = PanelConfig(horizon=LONG_PERIOD, period=LONG_PERIOD, input_periods=6, lift=512)
    trained = train_global([long_series(s, 4000) for s in range(2)], cfg, frequency="5min")
    export_global(trained, folder / "repo", "long")
    return folder / "repo"


def model(folder: Path, kind: str) -> tuple[ReadoutSpec, Any, int, Any]:
    if kind == "covariates":
        repo, name = publish_shops(folder, n=6).repository, SHOPS
    elif kind == "long":
        repo, name = publish_long(folder), "long"
    else:
        repo, name = publish(folder, local=kind == "hybrid")[0], NAME
    manifest = load_manifest(repo / name / "1" / "manifest.json")
    spec = refit.refit_spec(manifest, name, 1)
    assert manifest.panel is not None
    return spec, manifest.panel.local_spec, manifest.horizon, manifest.panel.layout


def shop_rows(layout: Any, histories: list[np.ndarray], seeds: range) -> HistoryRows:
    """The shops' covariates over each history (the promotion, footfall and size their values were made
    with; the calendar from 2023-01-02): what `history_rows` builds from a request."""
    past, future, static, stamps = [], [], [], []
    for seed, v in zip(seeds, histories, strict=True):
        n, H = len(v), layout.horizon
        s = shop(seed, n + H)
        past.append(s["footfall"][:n, None])
        future.append(s["promo"][:, None])
        static.append(layout.encode_static({"size": "big" if s["level"][0] > 250 else "small"}))
        stamps.append(np.datetime64("2023-01-02", "us") + np.arange(n + H) * np.timedelta64(1, "D"))
    return HistoryRows(layout, tuple(past), tuple(future), tuple(static), tuple(stamps))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--recompute", type=Path, default=None, help="a run's JSON: its fits, not timed again")
    p.add_argument(
        "--kinds", default="readout,long,hybrid,covariates", help="the models timed, comma-separated"
    )
    return p.parse_args(argv)


def previous_fits(path: Path, load_now: list[float]) -> tuple[list[dict[str, Any]], str, Any]:
    """An earlier run's fits, command and load before it (`load_now` where it has none), its estimates
    dropped to be made again."""
    previous = json.loads(path.read_text())
    rows, command = previous["fits"], previous["command"]
    for r in rows:  # an earlier analysis's estimates (and those from constants since changed) go
        r.pop("estimate_fitted", None)
        r.pop("estimate_now", None)
    return rows, command, previous["host"].get("load_before", load_now)


def time_fits(kinds: list[str], repeats: int) -> list[dict[str, Any]]:
    """Each kind's fits over its grid, without and with levels, the best of `repeats` (printed as timed)."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            folder = Path(tmp) / kind
            folder.mkdir()
            spec, hybrid, horizon, layout = model(folder, kind)
            grid = {"readout": GRID + BIG, "hybrid": GRID, "covariates": COVARIATE_GRID, "long": LONG_GRID}[
                kind
            ]
            for n_series, length in grid:
                seeds = range(n_series)
                if kind == "long":
                    histories, covariates = [long_series(10 + seed, length) for seed in seeds], None
                elif layout is None:
                    histories = [store(seed, length).astype(np.float64) for seed in seeds]
                    covariates = None
                else:
                    histories = [shop(seed, length)["y"].astype(np.float64) for seed in seeds]
                    covariates = shop_rows(layout, histories, seeds)
                for levels in ([], LEVELS) if kind != "long" or length == LONG_GRID[0][1] else ([],):
                    work = refit.fit_work(spec, histories, levels, hybrid, layout)
                    best = float("inf")
                    for _ in range(repeats):
                        t = time.perf_counter()
                        refit.run_fit(spec, histories, horizon, levels, 600.0, hybrid, covariates)
                        best = min(best, time.perf_counter() - t)
                    rows.append(
                        {
                            "model": kind,
                            "series": n_series,
                            "length": length,
                            "levels": levels,
                            "readout_work": work.readout,
                            "step_work": work.steps,
                            "local_work": work.local,
                            "calendar_work": work.calendar,
                            "seconds": round(best, 4),
                            "estimate_now": round(refit.estimated_seconds(work), 4),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def measured_constants(rows: list[dict[str, Any]]) -> tuple[float, float, float, float]:
    """The read-out's seconds per multiply-add and per window step, the local half's and the calendar's
    per unit of work (see the module's docstring)."""
    from scipy.optimize import nnls

    fits = [r for r in rows if r["model"] in ("readout", "long") and r["seconds"] >= 0.1]
    # relative errors: each fit's estimate over its seconds, as near 1 as two non-negative constants allow
    x = np.array([[r["readout_work"] / r["seconds"], r.get("step_work", 0.0) / r["seconds"]] for r in fits])
    (readout, step), _ = nnls(x, np.ones(len(fits)))

    def readout_of(r: dict[str, Any]) -> float:
        return float(readout * r["readout_work"] + step * r.get("step_work", 0.0))

    local = float(
        np.median(
            [
                (r["seconds"] - readout_of(r)) / r["local_work"]
                for r in rows
                if r["model"] == "hybrid" and r["local_work"] > 1e5
            ]
        )
    )
    calendar_fits = [r for r in rows if r.get("calendar_work", 0.0) > 0 and r["seconds"] >= 0.1]
    calendar = float(
        np.median(
            [
                (r["seconds"] - readout_of(r) - local * r["local_work"]) / r["calendar_work"]
                for r in calendar_fits
            ]
        )
        if calendar_fits
        else 0.0
    )
    return float(readout), float(step), local, calendar


def measured_over_estimate(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Seconds over `estimate_measured` among the fits of 0.5 s or more: over all of them, and by model."""
    y = np.array([r["seconds"] for r in rows])
    ratio = y / np.array([max(r["estimate_measured"], 1e-9) for r in rows])
    big = y >= 0.5  # the fits the refusal is about

    def spread(of: np.ndarray) -> dict[str, Any]:
        return {
            "fits_of_0.5s_or_more": int(of.sum()),
            "min": float(ratio[of].min()) if of.any() else None,
            "max": float(ratio[of].max()) if of.any() else None,
        }

    by_model = {
        kind: spread(big & np.array([r["model"] == kind for r in rows]))
        for kind in sorted({r["model"] for r in rows})
    }
    return spread(big), by_model


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows: list[dict[str, Any]] = []
    command = f"python -m bench.fit_cost --repeats {args.repeats} --kinds {args.kinds}"
    load_before = [round(x, 2) for x in os.getloadavg()]  # a shared host: the timings are upper bounds
    if args.recompute is not None:
        rows, command, load_before = previous_fits(args.recompute, load_before)
    if not rows:
        rows = time_fits(args.kinds.split(","), args.repeats)
    readout, step, local, calendar = measured_constants(rows)
    for r in rows:
        r["estimate_measured"] = round(
            readout * r["readout_work"]
            + step * r.get("step_work", 0.0)
            + local * r["local_work"]
            + calendar * r.get("calendar_work", 0.0),
            4,
        )
    overall, by_model = measured_over_estimate(rows)
    out = {
        "command": command,
        "host": {"machine": platform.machine(), "cpus": usable_cpus(), "load_before": load_before},
        "readout_seconds": readout,
        "step_seconds": step,
        "local_seconds": local,
        "calendar_seconds": calendar,
        "measured_over_estimate": overall,
        "measured_over_estimate_by_model": by_model,
        "fits": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "fits"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
