"""Intervals of series shorter than a global model's window, with and without the short-history blocks of
its widths (`intervals.history`, docs/intervals.md "Short series"): the default model of each competition
set (trained and calibrated as the competitions bench does: `ours_config`, the hybrid, `calibrate_global`)
forecasts every series from its first n values, scored on the next H of the same history (never the
official hold-out), for n from min_history to past the read-out's window L.

    python -m bench.short_series_intervals --json results/intervals/short_series.json   # about 5 min
    python -m bench.short_series_intervals --data M3:monthly                             # one set

Per set and n: the series long enough (n + H values), the share of their next H values inside the 80% and
95% intervals the service answers (`interval_halfwidths`, the service's rule) with the blocks and with the
pooled widths alone (the manifest without `history`), both in the same run, and the block n falls in."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.report import write_json

SETS = ("M3:monthly", "M3:quarterly", "M3:yearly", "Tourism:monthly", "Tourism:quarterly")
LEVELS = (80.0, 95.0)


def lengths(edges: Sequence[int], min_history: int, input_length: int, period: int) -> list[int]:
    """The history lengths scored: each block's first and middle value, the first after the blocks and
    the middle of the rest (the pooled widths'), L and L plus a cycle."""
    blocks = list(pairwise(edges))
    inner = {a for a, _ in blocks} | {(a + b) // 2 for a, b in blocks}
    last = edges[-1] if edges else min_history
    inner |= {last, (last + input_length) // 2}
    return sorted(inner | {min_history, input_length, input_length + max(period, 1)})


def one_set(name: str) -> dict[str, Any]:
    from bench.competition_data import load_competition
    from bench.competition_ours import ours_config
    from export.global_models.onnx import calibrate_global, interval_halfwidths
    from export.global_models.search import train_global

    dataset, frequency = name.split(":")
    comp = load_competition(dataset, frequency)
    start = time.perf_counter()
    model = train_global(comp.train, ours_config(comp, None), local=True)
    intervals, said = calibrate_global(model, comp.train, list(LEVELS))
    if intervals is None:
        return {"data": name, "intervals": said}
    history = intervals.get("history")
    pooled = {k: v for k, v in intervals.items() if k != "history"}
    edges = history["values"] if history else []
    H, L = comp.horizon, model.input_length
    rows = []
    for n in lengths(edges, model.min_history, L, comp.period):
        series = [np.asarray(x, dtype=np.float64) for x in comp.train if len(x) >= n + H]
        if not series:
            continue
        cut = [x[:n] for x in series]
        errors = np.abs(np.stack([x[n : n + H] for x in series]) - model.forecast(cut))
        row: dict[str, Any] = {
            "values": n,
            "series": len(series),
            "block": next((f"{a}-{b - 1}" for a, b in pairwise(edges) if a <= n < b), "pooled"),
        }
        for label, block in (("blocks", intervals), ("pooled", pooled)):
            half = interval_halfwidths(block, model, cut)  # [levels, S, H]
            for level, h in zip(intervals["levels"], half, strict=True):
                row[f"{label}_{level:g}"] = round(float((errors <= h).mean()), 4)
        rows.append(row)
    return {
        "data": name,
        "horizon": H,
        "input_length": L,
        "min_history": model.min_history,
        "intervals": said,
        "history": edges,
        "rows": rows,
        "seconds": round(time.perf_counter() - start, 1),
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{report['data']}: L = {report.get('input_length')}, min_history {report.get('min_history')}, "
        f"blocks {report.get('history')} ({report.get('seconds')} s)",
        "  n  series  block      80% blocks / pooled   95% blocks / pooled",
    ]
    for r in report.get("rows", []):
        lines.append(
            f"{r['values']:>4} {r['series']:>6}  {r['block']:<9}  {r['blocks_80']:.3f} / {r['pooled_80']:.3f}"
            f"        {r['blocks_95']:.3f} / {r['pooled_95']:.3f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--data", action="append", choices=SETS, help="one set (repeatable; default: all)")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    reports = []
    for name in args.data or SETS:
        reports.append(one_set(name))
        print(table(reports[-1]), flush=True)
    if args.json is not None:
        write_json(
            args.json,
            {
                "kind": "short_series_intervals",
                "command": "python -m bench.short_series_intervals",
                "levels": list(LEVELS),
                "sets": reports,
                "seconds": round(time.perf_counter() - start, 1),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
