"""REM folding: precomputed REM kernels in the graph vs recomputing them from λ/γ/θ/μ on every call.

    .venv/bin/python -m bench.rem_folding [--lengths 96,720] [--batches 1,16] [--repeats 100] [--budget 15]
                                          [--device cpu|cuda]
    .venv/bin/python -m bench.rem_folding --smoke       # tiny sizes: seconds, for the tests

For each input length L the architecture of a shipped version (`--architecture`, default 1, the
full-attention model whose H×L×L REM kernels folding precomputes) with `input_length` L, untrained
(speed does not depend on the weights), goes through two exports:

- folded: `export.onnx.export_model`, as the exporter writes every model: σ(μ)·P and 1 − σ(μ) are
  constant initializers (rsa.md §4);
- recompute: the same `ForecastGraph` and the same explicit attention path (the one folding uses,
  not the fused training path), but the REM parameters η, ν, θ and μ are a graph input,
  `rem_parameters` (their values concatenated), so the graph rebuilds every P_h (Tanh, Sigmoid, Pow,
  Cos, Sin over H×L×L) and the gates on every call. They have to be an input: left as initializers,
  the exporter's optimiser and ONNX Runtime's constant folding would fold them back into constants,
  and both graphs would be the same.

Both run in sessions made as the service makes them (`app.engine.session.create_session`, CPU,
`--threads` intra-op threads), on the same real ETTh1 test windows (raw scale, with cycle phases).
Before timing, the bench checks that the folded graph holds no REM arithmetic and the recompute
graph does (the op counts are printed), and that both give the same forecasts (max |diff|).

Timing: per (L, batch), the two graphs alternate call by call (order swapped every round), at most
`--repeats` rounds, none started after `--budget` seconds; medians. recompute/folded > 1 is what
folding saves; it shrinks with the batch, as the kernels are built once per call, not per window.
A (L, batch) whose attention matrix (batch × channels × heads × L² floats) is over `--max-attention-mib`
is skipped, not run: the graph holds a few of those at once.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import Tensor, nn

from app.artifacts.contract import FORECAST_INPUT, FORECAST_OUTPUT, MODEL_FILE, PHASE_INPUT
from bench.harness import models as hm
from bench.harness.cli import bench_parser, ints, parse_with_smoke
from bench.harness.measure import interleaved, median_ms
from bench.harness.report import format_table
from export.checkpoint import load_checkpoint
from export.onnx import FORBIDDEN_OPS, OPSET, TOLERANCE, ForecastGraph, export_model, forbidden_nodes
from models import ModelConfig

REM_INPUT = "rem_parameters"


def is_rem_parameter(name: str) -> bool:
    """η, ν, θ of the REM banks and the gate μ: what folding turns into constants (as export.train's
    param_groups tells them apart)."""
    return ".rem." in name or name.endswith(".mu")


class RecomputedREMGraph(nn.Module):
    """`ForecastGraph` whose REM parameters come in as one input vector, so that nothing can fold them."""

    def __init__(self, graph: ForecastGraph):
        super().__init__()
        self.forecast = graph
        params = dict(graph.named_parameters())
        self.names = [n for n in params if is_rem_parameter(n)]
        self.shapes = [params[n].shape for n in self.names]

    def rem_vector(self) -> Tensor:
        """The current values, in the order forward() reads them."""
        params = dict(self.forecast.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names])

    def forward(self, window: Tensor, phase: Tensor | None, rem: Tensor) -> Tensor:
        parts = rem.split([s.numel() for s in self.shapes])
        values = {n: p.view(s) for n, p, s in zip(self.names, parts, self.shapes, strict=True)}
        args = (window,) if phase is None else (window, phase)
        return torch.func.functional_call(self.forecast, values, args)


def export_recompute(graph: RecomputedREMGraph, cfg: ModelConfig, path: Path) -> None:
    """The exporter's own settings (dynamo, opset, dynamic batch), with the REM vector as a third input."""
    batch = torch.export.Dim("batch", min=1)
    example = (
        torch.zeros(2, cfg.input_length, cfg.channels),
        torch.tensor([0, cfg.cycle_period - 1]) if cfg.cycle_period else None,
        graph.rem_vector(),
    )
    names = [FORECAST_INPUT, PHASE_INPUT, REM_INPUT] if cfg.cycle_period else [FORECAST_INPUT, REM_INPUT]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            graph,
            example,
            dynamo=True,
            input_names=names,
            output_names=[FORECAST_OUTPUT],
            dynamic_shapes=({0: batch}, {0: batch} if cfg.cycle_period else None, None),
            opset_version=OPSET,
            verbose=False,
        )
    program.save(str(path))


@dataclass(frozen=True)
class Graphs:
    """Both graphs of one input length, and what is needed to feed them."""

    cfg: ModelConfig
    folded: Path
    recompute: Path
    rem: np.ndarray  # the value of `rem_parameters`
    feeds: dict[int, hm.Feed]


def build_graphs(length: int, batches: Sequence[int], tmp: Path, version: int) -> Graphs:
    cfg = ModelConfig.from_dict({**hm.shipped_architecture(version=version), "input_length": length})
    checkpoint = hm.untrained_checkpoint(cfg, tmp / f"l{length}.safetensors")
    folded = export_model(
        checkpoint,
        tmp / "repo",
        f"rem-l{length}",
        version=1,
        verify_batch_sizes=hm.LONG_INPUT_VERIFY_BATCHES,
        levels=hm.NO_INTERVALS,
    )
    model, info = load_checkpoint(checkpoint)
    for layer in model.layers:  # the explicit attention path, as in the folded graph
        layer.attn.fused = False
    scaler = info["data"]["scaler"]
    graph = RecomputedREMGraph(
        ForecastGraph(copy.deepcopy(model), np.array(scaler["mean"]), np.array(scaler["std"])).eval()
    )
    recompute = tmp / f"recompute-l{length}.onnx"
    export_recompute(graph, model.cfg, recompute)
    return Graphs(
        model.cfg,
        folded / MODEL_FILE,
        recompute,
        graph.rem_vector().numpy(),
        hm.raw_test_feeds(info, cfg, batches),
    )


def rem_ops(path: Path) -> str:
    """Counts of the ops that compute a REM or a gate, e.g. "Pow 3, Sigmoid 3", or "none"."""
    ops = Counter(n.op_type for n in onnx.load(str(path)).graph.node if n.op_type in FORBIDDEN_OPS)
    return ", ".join(f"{op} {k}" for op, k in sorted(ops.items())) or "none"


@dataclass(frozen=True)
class Row:
    length: int
    batch: int
    folded_ms: float | None  # None: skipped (memory)
    recompute_ms: float | None
    rounds: int
    max_abs_diff: float | None
    attention_mib: float


def measure(g: Graphs, args: argparse.Namespace) -> list[Row]:
    folded = hm.ort_session(g.folded, args.threads, args.device)
    recompute = hm.ort_session(g.recompute, args.threads, args.device)
    if forbidden_nodes(g.folded) or not forbidden_nodes(g.recompute):
        raise SystemExit(f"L={g.cfg.input_length}: the folded graph must have no REM ops, the other some")
    rows = []
    for batch, feed in g.feeds.items():
        mib = hm.attention_mib(g.cfg, batch)
        if mib > args.max_attention_mib:
            rows.append(Row(g.cfg.input_length, batch, None, None, 0, None, mib))
            continue
        rec_feed = {**feed, REM_INPUT: g.rem}

        def run_folded(feed: hm.Feed = feed) -> np.ndarray:
            return folded.run([FORECAST_OUTPUT], feed)[0]

        def run_recompute(feed: hm.Feed = rec_feed) -> np.ndarray:
            return recompute.run([FORECAST_OUTPUT], feed)[0]

        diff = float(np.max(np.abs(run_folded() - run_recompute())))
        if not diff <= TOLERANCE:
            raise SystemExit(f"L={g.cfg.input_length}, batch {batch}: the graphs differ by {diff:.3g}")
        times = interleaved(
            {"folded": run_folded, "recompute": run_recompute}, repeats=args.repeats, budget_s=args.budget
        )
        rows.append(
            Row(
                g.cfg.input_length,
                batch,
                median_ms(times["folded"]),
                median_ms(times["recompute"]),
                len(times["folded"]),
                diff,
                mib,
            )
        )
    return rows


def report(rows: Sequence[Row], ops: dict[int, tuple[str, str]], threads: int, device: str) -> str:
    def cell(r: Row) -> list[object]:
        if r.folded_ms is None or r.recompute_ms is None:
            return [r.length, r.batch, "skipped", "", "", "", "", f"{r.attention_mib:.1f}"]
        return [
            r.length,
            r.batch,
            f"{r.folded_ms:.3f}",
            f"{r.recompute_ms:.3f}",
            f"{r.recompute_ms / r.folded_ms:.2f}",
            f"{r.max_abs_diff:.1e}",
            r.rounds,
            f"{r.attention_mib:.1f}",
        ]

    header = [
        "L",
        "batch",
        "folded ms",
        "recompute ms",
        "recompute/folded",
        "max|diff|",
        "rounds",
        "attn MiB",
    ]
    lines = [
        f"ONNX Runtime (service session options, {device}, {threads} intra-op thread(s)); medians of "
        "interleaved calls; attn MiB = one batch x C x H x L x L float32 matrix.",
        format_table(header, [cell(r) for r in rows]),
        "REM/gate ops in each graph (folded | recompute):",
        *(f"  L={length}: {f} | {r}" for length, (f, r) in ops.items()),
    ]
    return "\n".join(lines)


# One length: the exports are most of the time (about 20 s per length on the 2-core machine, 2026-12-06).
SMOKE_ARGS = ("--lengths", "16", "--batches", "1,4", "--repeats", "3", "--budget", "1")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = bench_parser("bench.rem_folding", __doc__, SMOKE_ARGS)
    ap.add_argument("--lengths", type=ints, default=(96, 720), help="input lengths L")
    ap.add_argument("--batches", type=ints, default=(1, 16), help="windows per call")
    ap.add_argument("--repeats", type=int, default=100, help="rounds per (L, batch), at most")
    ap.add_argument("--budget", type=float, default=15.0, help="seconds per (L, batch), at most")
    hm.add_export_arguments(ap, threads="ORT intra-op threads", skip="skip bigger (L, batch)")
    args = parse_with_smoke(ap, argv, SMOKE_ARGS)
    if args.threads < 1 or args.repeats < 1 or not args.lengths or not args.batches:
        ap.error("--threads and --repeats must be >= 1, --lengths and --batches not empty")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    hm.quiet_exporter()
    rows: list[Row] = []
    ops: dict[int, tuple[str, str]] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-rem-") as tmp:
        for length in args.lengths:
            g = build_graphs(length, args.batches, Path(tmp), args.architecture)
            ops[length] = (rem_ops(g.folded), rem_ops(g.recompute))
            rows += measure(g, args)
    print(
        f"architecture of etth1-rsa version {args.architecture}; exported and measured in "
        f"{time.perf_counter() - t0:.0f} s"
    )
    print(report(rows, ops, args.threads, args.device))


if __name__ == "__main__":
    main()
