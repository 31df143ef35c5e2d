"""Training step time of the RSA forecaster: fused attention path vs the explicit reference path.

    .venv/bin/python -m bench.attention_paths [--threads 1] [--steps 10]

Both paths compute the same function (tests/models hold them equal); the fused one runs softmax
attention through F.scaled_dot_product_attention and adds the REM side as one (g·P)·V matmul.
Steps alternate between the two models (bench.harness.measure.interleaved) so machine noise hits both
alike; medians and the ratio are printed.
"""

from __future__ import annotations

import argparse
import math
import statistics

import torch

from bench.harness.measure import interleaved
from models import ModelConfig, RSAForecaster


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.attention_paths", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = ModelConfig(d_model=args.d_model)
    x, y = (
        torch.randn(args.batch, cfg.input_length, cfg.channels),
        torch.randn(args.batch, cfg.horizon, cfg.channels),
    )
    runs = {}
    for fused in (True, False):
        torch.manual_seed(0)
        m = RSAForecaster(cfg)
        for layer in m.layers:
            layer.attn.fused = fused
        runs["fused" if fused else "explicit"] = (m, torch.optim.AdamW(m.parameters(), 1e-3))

    def step(m: RSAForecaster, opt: torch.optim.Optimizer) -> None:
        loss = torch.nn.functional.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    cases = {name: (lambda m=m, opt=opt: step(m, opt)) for name, (m, opt) in runs.items()}
    times = interleaved(cases, repeats=args.steps, budget_s=math.inf, warmup=2)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"batch {args.batch} x {cfg.channels} channels, L={cfg.input_length}, d_model={cfg.d_model}, "
        f"{args.threads} thread(s), {args.steps} steps each"
    )
    for k, v in med.items():
        print(f"  {k:<9} {v * 1e3:8.1f} ms/step")
    print(f"  explicit / fused = {med['explicit'] / med['fused']:.2f}")


if __name__ == "__main__":
    main()
