"""Intervals of series shorter than a global model's window, with and without the short-history blocks of
its widths (`intervals.history`, docs/intervals.md "Short series"): the default model of each competition
set (trained and calibrated as the competitions bench does: `ours_config`, the hybrid, `calibrate_global`)
forecasts every series from its first n values, scored on the next H of the same history (never the
official hold-out), for n from min_history to past the read-out's window L.

    python -m bench.short_series_intervals --json results/intervals/short_series.json   # about a minute
    python -m bench.short_series_intervals --data M3:monthly                             # one set

Per set and n: the series long enough (n + H values), the share of their next H values inside the 80% and
95% intervals the service answers (`interval_halfwidths`, the service's rule) with the blocks and with the
pooled widths alone (the manifest without `history`), both in the same run, and the block n falls in.
Without `--data`, also the shipped pretrained models with blocks, through the service, on the held-back
M1 competition's series cut alike (`served`)."""

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


# The shipped pretrained models with blocks, on the held-back M1 competition (never used for a choice):
# model -> (M1 frequency, H, the history lengths scored).
PRETRAINED = {
    "pretrained-quarterly": ("quarterly", 8, (8, 10, 12, 14, 16, 20, 24, 32)),
    "pretrained-yearly": ("yearly", 6, (2, 3, 4, 5, 6, 8, 12)),
}


def served(name: str) -> dict[str, Any]:
    """The shipped model `name` through the service (in-process, the shipped repository) on M1 series cut
    to their first n values: coverage of the next H values by the intervals it answers, and by its pooled
    widths alone (the manifest without `history`, the same rule, the same forecasts and windows)."""
    from app.artifacts.manifest import IntervalsSpec, load_manifest
    from app.core.config import Settings
    from bench.competition_data import load_competition
    from bench.harness.in_process import serve_in_process
    from export.global_models.graph import windows_of
    from export.paths import REPO_ROOT

    frequency, H, ns = PRETRAINED[name]
    repository = REPO_ROOT / "model_repository"
    manifest = load_manifest(repository / name / "1" / "manifest.json")
    assert manifest.intervals is not None and manifest.intervals.history is not None, name
    pooled = IntervalsSpec.model_validate({**manifest.intervals.model_dump(by_alias=True), "history": None})
    comp = load_competition("M1", frequency)
    settings = Settings(model_repository=repository, models=[name], device="cpu", request_timeout_s=600)
    rows = []
    with serve_in_process(settings) as client:
        for n in ns:
            series = [np.asarray(x, dtype=np.float64) for x in comp.train if len(x) >= n + H]
            cut = [x[:n] for x in series]
            body = {"series": [{"values": x.tolist()} for x in cut], "level": list(LEVELS)}
            answer = client.post(f"/v1/models/{name}/forecast", json=body)
            answer.raise_for_status()
            forecasts = answer.json()["forecasts"]
            y = np.stack([x[n : n + H] for x in series])
            point = np.array([f["forecast"] for f in forecasts], dtype=np.float64)[:, :, 0]
            windows = windows_of(cut, manifest.input_length)  # [S, W, 1], as the service reads them
            alone = pooled.widths_for(H, windows)  # [levels, S, H, 1]
            row: dict[str, Any] = {"values": n, "series": len(series)}
            for level in LEVELS:
                lo = np.array([f[f"lo-{level:g}"] for f in forecasts], dtype=np.float64)[:, :, 0]
                hi = np.array([f[f"hi-{level:g}"] for f in forecasts], dtype=np.float64)[:, :, 0]
                k = list(pooled.levels).index(level)
                row[f"blocks_{level:g}"] = round(float(((y >= lo) & (y <= hi)).mean()), 4)
                inside = np.abs(y - point) <= alone[k, :, :, 0]
                row[f"pooled_{level:g}"] = round(float(inside.mean()), 4)
            rows.append(row)
    return {
        "data": f"M1 {frequency} (held back)",
        "model": name,
        "history": list(manifest.intervals.history.values),
        "rows": rows,
    }


def table(report: dict[str, Any]) -> str:
    shape = ""
    if "input_length" in report:
        shape = f"L = {report['input_length']}, min_history {report['min_history']}, "
    lines = [
        f"{report['data']}{' ' + report['model'] if 'model' in report else ''}: {shape}"
        f"blocks {report.get('history')}",
        "  n  series  block      80% blocks / pooled   95% blocks / pooled",
    ]
    for r in report.get("rows", []):
        lines.append(
            f"{r['values']:>4} {r['series']:>6}  {r.get('block', ''):<9}  {r['blocks_80']:.3f} / "
            f"{r['pooled_80']:.3f}        {r['blocks_95']:.3f} / {r['pooled_95']:.3f}"
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
    shipped = []
    if not args.data:
        for name in PRETRAINED:
            shipped.append(served(name))
            print(table(shipped[-1]), flush=True)
    if args.json is not None:
        write_json(
            args.json,
            {
                "kind": "short_series_intervals",
                "command": "python -m bench.short_series_intervals",
                "levels": list(LEVELS),
                "sets": reports,
                "pretrained": shipped,
                "seconds": round(time.perf_counter() - start, 1),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
