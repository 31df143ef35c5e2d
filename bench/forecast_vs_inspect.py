"""Does the forecast path pay for attention inspection?  Side by side, in one run, on one machine:

    .venv/bin/python -m bench.forecast_vs_inspect [model_repository/etth1-rsa/2] [--repeats 200]

- model.onnx: the forecast graph (built without inspection outputs) — what /forecast runs;
- inspect.onnx asked for `forecast` only: what a single graph with extra outputs would cost a forecast;
- inspect.onnx asked for everything: what /attention runs.
Timings are interleaved round by round (bench.harness.measure.interleaved: machine noise hits all three
alike); medians and ratios to model.onnx are printed.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bench.harness import REPO
from bench.harness.cli import ints
from bench.harness.measure import interleaved, median_ms
from bench.harness.report import format_table

BASE = "model.onnx -> forecast"


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.forecast_vs_inspect", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("version_dir", nargs="?", default=str(REPO / "model_repository" / "etth1-rsa" / "2"))
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--batches", type=ints, default=(1, 8, 64))
    args = ap.parse_args()
    vdir = Path(args.version_dir)
    manifest = json.loads((vdir / "manifest.json").read_text())
    L, C = manifest["input_length"], len(manifest["channels"])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # one core each, no thread-pool noise between the three
    fc = ort.InferenceSession(str(vdir / "model.onnx"), opts, providers=["CPUExecutionProvider"])
    insp = ort.InferenceSession(str(vdir / "inspect.onnx"), opts, providers=["CPUExecutionProvider"])
    period = (manifest.get("cycle") or {}).get("period")

    def feed(x: np.ndarray) -> dict[str, np.ndarray]:  # a cycle model also takes each window's phase
        return {"window": x} if period is None else {"window": x, "phase": np.arange(len(x)) % period}

    cases: dict[str, Callable[[np.ndarray], object]] = {
        BASE: lambda x: fc.run(["forecast"], feed(x)),
        "inspect.onnx -> forecast only": lambda x: insp.run(["forecast"], feed(x)),
        "inspect.onnx -> all outputs": lambda x: insp.run(None, feed(x)),
    }
    print(f"{vdir}: L={L}, C={C}, provider {fc.get_providers()[0]}, {args.repeats} rounds")
    rows = []
    for b in args.batches:
        x = np.random.default_rng(0).standard_normal((b, L, C)).astype(np.float32)
        repeats = args.repeats if b < 64 else max(20, args.repeats // 5)
        bound = {name: (lambda f=f, x=x: f(x)) for name, f in cases.items()}
        times = interleaved(bound, repeats=repeats, budget_s=math.inf)
        base = median_ms(times[BASE])
        rows += [
            [name, b, f"{median_ms(ts):.3f}", f"{median_ms(ts) / base:.2f}"] for name, ts in times.items()
        ]
    print(format_table(["case", "batch", "median ms", "ratio"], rows))


if __name__ == "__main__":
    main()
