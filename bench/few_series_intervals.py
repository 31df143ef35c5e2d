"""Intervals of a global model trained and calibrated on few series (issue 45, item 2): the exporter's
calibration (export/global_models/onnx.py `calibrate_global`) on 1, 3 and 20 series, its coverage on held-out
windows.

Groups of `--sizes` series are drawn from Tourism monthly (long series: 91-333 values, H 24) or another
competition set; per group a global model (the hybrid, `export.panel train`'s default, input length
searched) is trained on the series' training parts and calibrated on them as `export.panel export
--data` does, then each series' official test window (the H values after its training part, never seen)
is forecast with the served intervals (`interval_halfwidths`: the pooled widths times each window's
spread). Printed per group size: the levels the groups got (a group too short to train is counted
apart), the coverage per level pooled over every
test value of every group (target: within 5 points of the level), and the calibration windows.

    .venv/bin/python -m bench.few_series_intervals [--dataset Tourism --frequency monthly] [--groups 40]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

LEVELS = (80.0, 90.0, 95.0, 99.0)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="Tourism")
    p.add_argument("--frequency", default="monthly")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 20])
    p.add_argument("--groups", type=int, default=40, help="groups per size (fewer where the series run out)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--one-window", action="store_true", help="the rule before issue 45: each series' last H values only"
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    from bench.competition_data import load_competition
    from export.global_models.config import PanelConfig
    from export.global_models.onnx import calibrate_global, interval_halfwidths
    from export.global_models.search import train_global

    args = parse_args(argv)
    if args.one_window:
        from export.global_models import calibration  # where calibrate_global reads it

        calibration.calibration_tail = lambda lengths, horizon, *rest: (lambda n: horizon, 1)
    comp = load_competition(args.dataset, args.frequency)
    H, period = comp.horizon, comp.period
    frequency = {12: "1MS", 4: "3MS", 1: "12MS"}.get(period, "1D")
    rng = np.random.default_rng(args.seed)
    print(f"{comp.dataset} {args.frequency}: {len(comp.train)} series, H = {H}; levels asked {list(LEVELS)}")
    print("| series per model | groups | got 80 / 90 / 95 / 99 | coverage 80 | 90 | 95 | 99 | windows |")
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        order = rng.permutation(len(comp.train))
        groups = [order[i : i + size] for i in range(0, len(order) - size + 1, size)][: args.groups]
        got = dict.fromkeys(LEVELS, 0)
        inside: dict[float, list[np.ndarray]] = {lv: [] for lv in LEVELS}
        windows = []
        unfit = 0
        start = time.perf_counter()
        for group in groups:
            train = [comp.train[i] for i in group]
            try:
                model = train_global(train, PanelConfig(horizon=H, period=period), frequency, local=True)
            except ValueError:  # too short to validate on: no model (export.panel train refuses it too)
                unfit += 1
                continue
            intervals, _ = calibrate_global(model, train, LEVELS)
            if intervals is None:
                continue
            windows.append(intervals["calibration"]["windows"])
            forecast = model.forecast(train)
            half = interval_halfwidths(intervals, model, train)  # [levels, S, H]
            actual = comp.test[group]
            for i, lv in enumerate(intervals["levels"]):
                got[lv] += 1
                inside[lv].append(np.abs(actual - forecast) <= half[i])
        seconds = time.perf_counter() - start
        cells = [f"{np.concatenate(inside[lv]).mean():.3f}" if inside[lv] else "none" for lv in LEVELS]
        print(
            f"| {size} | {len(groups)} | {' / '.join(str(got[lv]) for lv in LEVELS)} | {' | '.join(cells)} | "
            f"{int(np.median(windows)) if windows else 0} (median) | {seconds:.0f} s"
            + (f" ({unfit} groups too short to train)" if unfit else "")
        )


if __name__ == "__main__":
    main()
