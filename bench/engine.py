"""The engine: the same trained weights in PyTorch eager and in the service's ONNX Runtime session.

    .venv/bin/python -m bench.engine [--threads 1] [--batches 1,8,64,256] [--repeats 200] [--budget 15]
                                     [--device cpu|cuda]
    .venv/bin/python -m bench.engine --smoke        # tiny sizes (version 4's architecture), for the tests

The repository holds no PyTorch checkpoint, so the bench makes one: the shipped model's architecture
(`architecture` in the latest `model_repository/etth1-rsa/<version>/manifest.json`) trained briefly on
ETTh1 by the project's own trainer (`export.train.train` with configs/etth1-rem-readout.yaml, one epoch over
`--train-windows` random windows), then exported by the project's exporter (`export.onnx.export_model`,
which verifies its own output) into a temporary model repository. Both engines run those same weights:

- torch: `ForecastGraph` (the exporter's wrapper: scaler, model, unscaler) around the checkpoint's model
  in `eval()` mode under `torch.no_grad()`, exactly as trained: REM kernels computed from η, ν, θ, μ on
  every call, softmax attention through the fused `F.scaled_dot_product_attention` path;
- ORT: `model.onnx` in a session made by `app.engine.session.create_session` with `RuntimeOptions`
  (`--device`, cpu by default), as the service makes it: its CPU arena, all graph optimisations,
  sequential.

Fairness: torch's intra-op threads are set to ORT's `intra_op_num_threads` (`--threads`, default 1:
the machine is shared and one thread varies least); ORT's inter-op threads are 1 as in the service,
and eager PyTorch uses none. Inputs are real ETTh1 test windows on the raw scale, with their cycle
phases, the same arrays for both. Before anything is timed the two engines' forecasts are compared
on them at every batch size (max |torch − ORT|, must be within the exporter's tolerance).

Timing: per batch size, the two engines alternate call by call (the order swapped every round), so
the machine's drift hits both alike; at most `--repeats` rounds and no new round after `--budget`
seconds; medians. Read the last column: torch/ORT > 1 means ORT is faster. The targets (ORT at least
2x faster at batch 1, ahead at every size) are reported, never asserted.

"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from app.artifacts.contract import FORECAST_INPUT, FORECAST_OUTPUT, MODEL_FILE, PHASE_INPUT
from bench.harness.cli import add_device_argument, bench_parser, ints, parse_with_smoke
from bench.harness.measure import interleaved, median_ms
from bench.harness.models import (
    NO_INTERVALS,
    Feed,
    ort_session,
    quiet_exporter,
    raw_test_feeds,
    shipped_architecture,
    torch_threads,
    untrained_checkpoint,
)
from bench.harness.report import format_table, verdict
from export.checkpoint import load_checkpoint
from export.onnx import TOLERANCE, ForecastGraph, export_model
from export.paths import REPO_ROOT
from export.train import load_config, train
from models import ModelConfig

# The shipped model's recipe (etth1-rsa/5: the REM read-out, fixed REM heads read at the last step).
TRAIN_CONFIG = REPO_ROOT / "configs" / "etth1-rem-readout.yaml"
BENCH_MODEL = "etth1-rsa"


# The smoke run compares freshly initialised weights (`--train-windows 0`): training, with its least-squares
# read-out and evaluations over whole splits, took ~115 of its ~130 s, and parity and speed do not depend
# on what the weights learned. It runs version 4's architecture: the same kind as the default (REM heads
# read at the last step), 36 heads instead of 87, so the export's calibration pass costs a third as much.
SMOKE_ARGS = ("--batches", "1,8", "--repeats", "3", "--budget", "1", "--train-windows", "0", "--version", "4")


@dataclass(frozen=True)
class EngineRow:
    batch: int
    torch_ms: float
    ort_ms: float
    rounds: int
    max_abs_diff: float

    @property
    def ratio(self) -> float:
        """torch / ORT: above 1, ORT is faster."""
        return self.torch_ms / self.ort_ms


def train_briefly(
    out: Path, *, train_windows: int, threads: int, seed: int = 0, version: int | None = None
) -> Path:
    """A shipped version's architecture (None: the latest) trained for one epoch of `train_windows`
    windows by export.train with the shipped model's config; returns the checkpoint."""
    arch = {k: v for k, v in shipped_architecture(version=version).items() if k != "channels"}
    cfg = load_config(TRAIN_CONFIG)
    cfg = dataclasses.replace(
        cfg,
        model=arch,
        epochs=1,
        max_train_windows=train_windows,
        # Reports that cost whole passes over the splits and change no weight: not for a speed bench.
        select_step0=False,
        reference_least_squares=False,
        readout_ablation=False,
        seed=seed,
        threads=threads,
        out=str(out),
        name="bench-engine",
        progress=False,
        plot_windows=1,
    )
    return train(cfg) / "checkpoint.safetensors"


def compare(checkpoint: Path, version_dir: Path, args: argparse.Namespace) -> list[EngineRow]:
    """Check the two engines agree on every batch, then time them side by side. On CUDA both take host
    arrays and return host arrays, as the service's session does (copies included in the time)."""
    model, info = load_checkpoint(checkpoint)
    scaler = info["data"]["scaler"]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: this torch build has no CUDA (the CPU wheel); install a CUDA one")
    device = torch.device(args.device)
    if args.device == "cuda":
        # Full fp32 on both sides, as the service's session computes by default (RSA_CUDA_TF32 off). torch's
        # cuDNN convolutions (the token embedding's Conv1d) default to TF32: on the H200 (2026-12-04,
        # results/gpu/) torch and ORT then differed by 2.1e-3 std at 64-256 rows, 2e-6 at 1-8.
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    graph = ForecastGraph(model, np.array(scaler["mean"]), np.array(scaler["std"])).eval().to(device)
    session = ort_session(version_dir / MODEL_FILE, args.threads, args.device)
    feeds = raw_test_feeds(info, model.cfg, args.batches)

    def run_torch(feed: Feed) -> np.ndarray:
        phase = feed.get(PHASE_INPUT)
        with torch.no_grad():
            out = graph(
                torch.from_numpy(feed[FORECAST_INPUT]).to(device),
                None if phase is None else torch.from_numpy(phase).to(device),
            )
        return out.cpu().numpy()  # waits for the device, as session.run does

    def run_ort(feed: Feed) -> np.ndarray:
        return session.run([FORECAST_OUTPUT], feed)[0]

    # Compared as the exporter compares (export.onnx._verify): in units of each channel's training std,
    # since one float32 rounding step of a raw value near 15 is already ~1e-6 and L = 512 sums add up.
    std = np.asarray(scaler["std"], np.float64)
    diffs = {b: float(np.max(np.abs(run_torch(f) - run_ort(f)) / std)) for b, f in feeds.items()}
    worst = max(diffs.values())
    if not worst <= TOLERANCE:  # timing two different functions would mean nothing
        raise SystemExit(
            f"the engines disagree: max |torch - ORT| / std = {worst:.3g} > {TOLERANCE} ({diffs})"
        )
    rows = []
    for b, feed in feeds.items():
        times = interleaved(
            {"torch": lambda f=feed: run_torch(f), "ort": lambda f=feed: run_ort(f)},
            repeats=args.repeats,
            budget_s=args.budget,
        )
        rows.append(
            EngineRow(b, median_ms(times["torch"]), median_ms(times["ort"]), len(times["ort"]), diffs[b])
        )
    return rows


def report(rows: Sequence[EngineRow], threads: int, device: str = "cpu") -> str:
    table = format_table(
        ["batch", "torch ms", "ORT ms", "torch win/s", "ORT win/s", "torch/ORT", "max|diff|/std", "rounds"],
        [
            [
                r.batch,
                f"{r.torch_ms:.3f}",
                f"{r.ort_ms:.3f}",
                f"{1e3 * r.batch / r.torch_ms:.0f}",
                f"{1e3 * r.batch / r.ort_ms:.0f}",
                f"{r.ratio:.2f}",
                f"{r.max_abs_diff:.1e}",
                r.rounds,
            ]
            for r in rows
        ],
    )
    first = next((r for r in rows if r.batch == 1), None)
    targets = [
        f"ORT >= 2x faster at batch 1: {'-' if first is None else verdict(first.ratio >= 2)}"
        + ("" if first is None else f" ({first.ratio:.2f}x)"),
        f"ORT ahead at every batch size: {verdict(all(r.ratio > 1 for r in rows))}",
    ]
    head = (
        f"Same trained weights, torch eager (no_grad) vs ORT (service session options), on {device}, "
        f"{threads} intra-op thread(s) each; medians of interleaved calls; win/s = windows per second."
    )
    return "\n".join([head, table, *targets])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = bench_parser("bench.engine", __doc__, SMOKE_ARGS)
    ap.add_argument("--batches", type=ints, default=(1, 8, 64, 256), help="windows per call")
    ap.add_argument("--repeats", type=int, default=200, help="rounds per batch size, at most")
    ap.add_argument("--budget", type=float, default=15.0, help="seconds per batch size, at most")
    ap.add_argument(
        "--train-windows", type=int, default=4096, help="training windows (one epoch); 0: untrained weights"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads = ORT intra-op threads")
    ap.add_argument(
        "--version",
        type=int,
        default=None,
        help="the shipped version whose architecture runs (default: latest)",
    )
    add_device_argument(ap)
    args = parse_with_smoke(ap, argv, SMOKE_ARGS)
    if min(args.threads, args.repeats, *args.batches) < 1 or args.train_windows < 0 or not args.batches:
        ap.error("--threads, --repeats and --batches must be >= 1, --train-windows >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    quiet_exporter()
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp, torch_threads(args.threads):
        t0 = time.perf_counter()
        if args.train_windows:
            checkpoint = train_briefly(
                Path(tmp) / "runs",
                train_windows=args.train_windows,
                threads=args.threads,
                version=args.version,
            )
        else:
            arch = {k: v for k, v in shipped_architecture(version=args.version).items() if k != "channels"}
            checkpoint = untrained_checkpoint(
                ModelConfig.from_dict(arch), Path(tmp) / "untrained.safetensors"
            )
        version_dir = export_model(
            checkpoint, Path(tmp) / "repo", BENCH_MODEL, version=1, levels=NO_INTERVALS
        )
        what = (
            f"trained ({args.train_windows} windows, 1 epoch)"
            if args.train_windows
            else "initialised (untrained)"
        )
        print(f"{what} and exported in {time.perf_counter() - t0:.0f} s", flush=True)
        rows = compare(checkpoint, version_dir, args)
    print(report(rows, args.threads, args.device))


if __name__ == "__main__":
    main()
