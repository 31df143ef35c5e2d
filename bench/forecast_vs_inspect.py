"""Does the forecast path pay for attention inspection?  Side by side, in one run, on one machine:

    .venv/bin/python -m bench.forecast_vs_inspect [model_repository/etth1-rsa/2] [--repeats 200]

- model.onnx: the forecast graph (built without inspection outputs) — what /forecast runs;
- inspect.onnx asked for `forecast` only: what a single graph with extra outputs would cost a forecast;
- inspect.onnx asked for everything: what /attention runs.
Timings are interleaved round by round (so machine noise hits all three alike); medians and ratios
to model.onnx are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("version_dir", nargs="?", default=str(REPO / "model_repository" / "etth1-rsa" / "2"))
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--batches", default="1,8,64")
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

    cases = {
        "model.onnx -> forecast": lambda x: fc.run(["forecast"], feed(x)),
        "inspect.onnx -> forecast only": lambda x: insp.run(["forecast"], feed(x)),
        "inspect.onnx -> all outputs": lambda x: insp.run(None, feed(x)),
    }
    print(f"{vdir}: L={L}, C={C}, provider {fc.get_providers()[0]}, {args.repeats} rounds")
    print(f"{'batch':>5}  {'case':<32}{'median ms':>10}{'ratio':>8}")
    for b in (int(s) for s in args.batches.split(",")):
        x = np.random.default_rng(0).standard_normal((b, L, C)).astype(np.float32)
        times: dict[str, list[float]] = {k: [] for k in cases}
        for f in cases.values():  # warm-up
            f(x)
        for _ in range(args.repeats if b < 64 else max(20, args.repeats // 5)):
            for name, f in cases.items():
                t = time.perf_counter()
                f(x)
                times[name].append(time.perf_counter() - t)
        base = statistics.median(times["model.onnx -> forecast"])
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{b:>5}  {name:<32}{med * 1e3:>10.3f}{med / base:>8.2f}")


if __name__ == "__main__":
    main()
