"""Intervals of a global model trained and calibrated on few series (issue 45, item 2): the exporter's
calibration (export/global_models/calibration.py `calibrate_global`) on 1, 3 and 20 series, its coverage
on held-out windows, with how far chance alone moves it.

    python -m bench.few_series_intervals --json results/intervals/few_series.json        # ~15 min
    python -m bench.few_series_intervals --data M3:monthly --sizes 1 --groups 40          # a smoke run

Each competition set (`--data`, default M3 and Tourism monthly and quarterly) is cut into groups of `--sizes`
series (a seeded permutation; every group by default). Per group a global model (the hybrid, `export.panel
train`'s default: input length, local half and random layer chosen on validation) is trained on the series'
training parts and calibrated on them as `export.panel export --data` does; then each series' official test
window (the H values after its training part, never seen) is forecast with the served intervals
(`interval_halfwidths`: the pooled widths times each window's spread). Per group size: the levels the groups
got (a group too short to train counted apart), the coverage per level pooled over every test value of every
group, a bootstrap 90% interval of that coverage (groups resampled: a group's H values move together), and the
calibration windows, and the tail the calibrated widths show: per pair of levels both calibrated (never
extrapolated), the median over groups of the higher width over the lower (`tail_ratios`), beside the ratio a
level beyond the windows' reach is extrapolated by (`tail_ratio`, a Laplace error's) and a normal error's. The
target is coverage within 5 points of the level; with 40 lone series the bootstrap interval spans about ±6
points, so a verdict needs the whole set. The service's fit on request calibrates by the same rule
(`calibration_tail`); `--fit-share 0.2` reruns the fit's own rule until 2026-12-05 (20% of each history
held out, at least H), `--one-window` the export's before issue 45.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any
from unittest import mock

import numpy as np

from bench.harness.report import write_json

LEVELS = (80.0, 90.0, 95.0, 99.0)  # scored; calibrated beside 50%, as the exporter asks (DEFAULT_LEVELS)
DATA = ("M3:monthly", "M3:quarterly", "Tourism:monthly", "Tourism:quarterly")
BOOTSTRAP = 2000  # resamples of the groups
TOLERANCE = 5.0  # points: the target
PAIRS = ((80.0, 90.0), (90.0, 95.0), (95.0, 99.0))  # the calibrated widths' ratios reported


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.few_series_intervals",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", action="append", default=None, help="DATASET:frequency, repeatable")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 20])
    p.add_argument("--groups", type=int, default=0, help="groups per size, at most (0: every group)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--one-window", action="store_true", help="the rule before issue 45: each series' last H values only"
    )
    p.add_argument(
        "--fit-share",
        type=float,
        default=None,
        help="the fit on request's rule until 2026-12-05: each series holds out this share (0.2), >= H",
    )
    args = p.parse_args(argv)
    args.data = tuple(args.data or DATA)
    return args


def bootstrap_interval(inside: Sequence[np.ndarray], rng: np.random.Generator) -> tuple[float, float]:
    """A 90% bootstrap interval of the coverage pooled over groups (each an array of inside/outside),
    the groups resampled with replacement."""
    hits = np.array([a.sum() for a in inside], dtype=np.float64)
    counts = np.array([a.size for a in inside], dtype=np.float64)
    pick = rng.integers(0, len(inside), size=(BOOTSTRAP, len(inside)))
    shares = hits[pick].sum(1) / counts[pick].sum(1)
    return float(np.quantile(shares, 0.05)), float(np.quantile(shares, 0.95))


def calibrated_ratios(intervals: dict[str, Any]) -> dict[str, float]:
    """For each pair of levels (`PAIRS`) that a group's windows both calibrate (neither extrapolated nor
    floored by the level below, `floored_levels`): the median over horizon steps of the higher level's
    width over the lower's, the tail the windows themselves show, which `tail_ratio` stands in for where
    a level is extrapolated."""
    report = intervals["calibration"]
    extrapolated = {*report.get("extrapolated_levels", []), *report.get("floored_levels", [])}
    levels = [float(lv) for lv in intervals["levels"]]
    widths = np.asarray(intervals["widths"], dtype=np.float64)[:, :, 0]  # [levels, H]
    out = {}
    for low, high in PAIRS:
        if low in levels and high in levels and not {low, high} & extrapolated:
            a, b = widths[levels.index(low)], widths[levels.index(high)]
            ok = a > 0
            if ok.any():
                out[f"{low:g}-{high:g}"] = float(np.median(b[ok] / a[ok]))
    return out


def one_size(comp: Any, size: int, groups_at_most: int, rng: np.random.Generator) -> dict[str, Any]:
    """Groups of `size` series of `comp`, each trained, calibrated and scored (module doc)."""
    from export.global_models.calibration import DEFAULT_LEVELS, calibrate_global, interval_halfwidths
    from export.global_models.config import PanelConfig
    from export.global_models.search import train_global

    H, period = comp.horizon, comp.period
    frequency = {12: "1MS", 4: "3MS", 1: "12MS"}.get(period, "1D")
    order = rng.permutation(len(comp.train))
    groups = [order[i : i + size] for i in range(0, len(order) - size + 1, size)]
    groups = groups[:groups_at_most] if groups_at_most else groups
    inside: dict[float, list[np.ndarray]] = {lv: [] for lv in LEVELS}
    windows: list[int] = []
    ratios: dict[str, list[float]] = {f"{a:g}-{b:g}": [] for a, b in PAIRS}
    unfit = 0
    start = time.perf_counter()
    for group in groups:
        train = [comp.train[i] for i in group]
        try:
            # `export.panel train`'s defaults: the local half and the random layer chosen on validation
            config = PanelConfig(horizon=H, period=period, lift=None)
            model = train_global(train, config, frequency, local=True)
        except ValueError:  # fewer than min_history + H values: no model (export.panel train refuses it too)
            unfit += 1
            continue
        intervals, _ = calibrate_global(model, train, DEFAULT_LEVELS)  # as export.panel export asks
        if intervals is None or not set(intervals["levels"]) & set(LEVELS):  # 50% alone: none scored
            continue
        windows.append(intervals["calibration"]["windows"])
        for key, ratio in calibrated_ratios(intervals).items():
            ratios[key].append(ratio)
        forecast = model.forecast(train)
        half = interval_halfwidths(intervals, model, train)  # [levels, S, H]
        actual = comp.test[group]
        for i, lv in enumerate(intervals["levels"]):
            if lv in inside:  # 50% is asked, not scored
                inside[lv].append(np.abs(actual - forecast) <= half[i])
    levels: dict[str, dict[str, Any]] = {}
    for lv in LEVELS:
        if not inside[lv]:
            levels[str(lv)] = {"groups": 0}
            continue
        low, high = bootstrap_interval(inside[lv], rng)
        coverage = float(np.concatenate([a.ravel() for a in inside[lv]]).mean())
        levels[str(lv)] = {
            "groups": len(inside[lv]),
            "coverage": round(coverage, 4),
            "bootstrap_90": [round(low, 4), round(high, 4)],
            "within_5": abs(100 * coverage - lv) <= TOLERANCE,
        }
    return {
        "series_per_model": size,
        "groups": len(groups),
        "too_short_to_train": unfit,
        "levels": levels,
        "windows_median": int(np.median(windows)) if windows else 0,
        "tail_ratios": {
            k: {"groups": len(v), "median": round(float(np.median(v)), 3) if v else None}
            for k, v in ratios.items()
        },
        "seconds": round(time.perf_counter() - start, 1),
    }


def row(name: str, r: dict[str, Any]) -> str:
    got = " / ".join(str(r["levels"][str(lv)]["groups"]) for lv in LEVELS)

    def cell(lv: float) -> str:
        c = r["levels"][str(lv)]
        if not c["groups"]:
            return "none"
        low, high = c["bootstrap_90"]
        return f"{c['coverage']:.3f} ({low:.3f}-{high:.3f})"

    short = f", {r['too_short_to_train']} too short to train" if r["too_short_to_train"] else ""
    ratios = " / ".join(
        "-" if t["median"] is None else f"{t['median']:.2f}" for t in r["tail_ratios"].values()
    )
    return (
        f"| {name}, {r['series_per_model']} | {got} of {r['groups']}{short} | "
        f"{' | '.join(cell(lv) for lv in LEVELS)} | {r['windows_median']} | {ratios} |"
    )


def normal_ratio(level: float, calibrated: float) -> float:
    """The ratio of a normal error's |e| quantiles: the extrapolation before `tail_ratio`, for comparison."""
    z = NormalDist().inv_cdf
    return z(0.5 + level / 200) / z(0.5 + calibrated / 200)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    with _tail_rule(args):
        return _run(args)


@contextlib.contextmanager
def _tail_rule(args: argparse.Namespace) -> Iterator[None]:
    """The export's calibration tail replaced by an earlier rule for the run (`--one-window`, `--fit-share`),
    restored after it."""
    from export.global_models import calibration  # where calibrate_global reads it

    share = args.fit_share

    def one_window(lengths: Sequence[int], horizon: int, *rest: Any) -> tuple[Callable[[int], int], int]:
        return (lambda n: horizon), 1

    def share_rule(lengths: Sequence[int], horizon: int, *rest: Any) -> tuple[Callable[[int], int], int]:
        return (lambda n: max(horizon, round(share * n))), 2  # 2: rolling windows (the export's line)

    rule = one_window if args.one_window else share_rule if share is not None else None
    if rule is None:
        yield
        return
    with mock.patch.object(calibration, "calibration_tail", rule):
        yield


def _run(args: argparse.Namespace) -> dict[str, Any]:
    from app.artifacts.readout.calibration import tail_ratio
    from bench.competition_data import load_competition

    print(
        "| data, series per model | got 80 / 90 / 95 / 99 | coverage 80 (bootstrap 90%) | 90 | 95 | 99 "
        "| windows (median) | calibrated width ratios 90/80, 95/90, 99/95 (median) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    results: list[dict[str, Any]] = []
    for spec in args.data:
        dataset, frequency = spec.split(":")
        comp = load_competition(dataset, frequency)
        for size in args.sizes:
            # Each cell's own generator (the seed, the set, the size): its groups do not depend on how many
            # groups the cells before it scored (one shared generator redrew every later cell's groups
            # whenever an earlier cell's calibration changed what its bootstrap drew).
            rng = np.random.default_rng([args.seed, zlib.crc32(spec.encode()), size])
            r = {"data": spec, "horizon": comp.horizon, **one_size(comp, size, args.groups, rng)}
            results.append(r)
            print(row(f"{dataset} {frequency}", r), flush=True)
    report = {
        "command": "python -m bench.few_series_intervals "
        + " ".join(f"--data {d}" for d in args.data)
        + f" --sizes {' '.join(map(str, args.sizes))} --groups {args.groups} --seed {args.seed}"
        + (" --one-window" if args.one_window else "")
        + (f" --fit-share {args.fit_share:g}" if args.fit_share is not None else ""),
        "levels": list(LEVELS),
        "tolerance_points": TOLERANCE,
        "tail_ratio": {f"{a:g}-{b:g}": round(tail_ratio(b, a), 3) for a, b in PAIRS},
        "normal_ratio": {f"{a:g}-{b:g}": round(normal_ratio(b, a), 3) for a, b in PAIRS},
        "results": results,
    }
    if args.json is not None:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
