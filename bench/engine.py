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

The helpers here (`interleaved`, `untrained_checkpoint`, `raw_test_feeds`, `format_table`, ...) are
shared with bench.rem_folding and bench.scaling.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from app.artifacts.contract import FORECAST_INPUT, FORECAST_OUTPUT, MANIFEST_FILE, MODEL_FILE, PHASE_INPUT
from export.checkpoint import load_checkpoint, save_checkpoint
from export.conformal import attention_bytes_per_row
from export.data import ETT_DIR, StandardScaler, load_dataset
from export.evaluate import load_for_checkpoint
from export.onnx import TOLERANCE, ForecastGraph, export_model
from export.paths import REPO_ROOT
from export.train import TrainConfig, data_meta, load_config, train
from models import ModelConfig, RSAForecaster

SHIPPED_MODEL = REPO_ROOT / "model_repository" / "etth1-rsa"
# The shipped model's recipe (etth1-rsa/5: the REM read-out, fixed REM heads read at the last step).
TRAIN_CONFIG = REPO_ROOT / "configs" / "etth1-rem-readout.yaml"
ETTH1 = ETT_DIR / "ETTh1.csv"
BENCH_MODEL = "etth1-rsa"
# Verification batches for models exported at long inputs: the exporter's default includes 64, where
# the inspection graph at L = 720 would hold ~4 GB per attention output.
LONG_INPUT_VERIFY_BATCHES = (1, 7)

Feed = dict[str, np.ndarray]  # graph input name -> array, one row per window
K = TypeVar("K", bound=Hashable)  # what names a timed case


# -- shared helpers ---------------------------------------------------------------------------------------
def shipped_architecture(model_dir: Path = SHIPPED_MODEL, version: int | None = None) -> dict[str, Any]:
    """The ModelConfig of a shipped version (None: the latest), from its manifest."""
    versions = sorted((p for p in model_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    chosen = versions[-1] if version is None else model_dir / str(version)
    return json.loads((chosen / MANIFEST_FILE).read_text())["architecture"]


def add_architecture_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--architecture",
        type=int,
        default=1,
        metavar="VERSION",
        help="the shipped version whose architecture is exported at each L (default 1: full L×L "
        "attention, the serving benchmark's model; 4, the default model, forms only the last query row)",
    )


def untrained_checkpoint(cfg: ModelConfig, path: Path, *, seed: int = 0, csv: Path = ETTH1) -> Path:
    """A freshly initialised model saved with the metadata a training run writes (data set, scaler), so
    that the project's exporter takes it. For benches where speed, not accuracy, is measured."""
    ds = load_dataset(csv, cfg.input_length, cfg.horizon)
    torch.manual_seed(seed)
    meta = {"train_config": {}, "data": data_meta(ds, csv, TrainConfig(data=str(csv)))}
    save_checkpoint(path, RSAForecaster(dataclasses.replace(cfg, channels=len(ds.channels))), meta)
    return path


def raw_test_feeds(info: Mapping[str, Any], cfg: ModelConfig, batches: Sequence[int]) -> dict[int, Feed]:
    """Per batch size, that many ETTh1 test windows spread over the split, on the raw scale (what a client
    sends), with their cycle phases when the model has a cycle."""
    split = load_for_checkpoint(dict(info)).test
    scaler = StandardScaler.from_dict(info["data"]["scaler"])
    feeds: dict[int, Feed] = {}
    for b in batches:
        starts = np.linspace(0, split.num_windows - 1, num=b).astype(np.int64)
        x, _ = split.windows(starts)
        feed = {FORECAST_INPUT: scaler.inverse_transform(x.numpy()).astype(np.float32)}
        if cfg.cycle_period:
            feed[PHASE_INPUT] = split.phases(starts, cfg.cycle_period).numpy()
        feeds[b] = feed
    return feeds


def attention_mib(cfg: ModelConfig, rows: int) -> float:
    """One attention matrix of the forecast graph in MiB: rows × channels sequences × heads × L × L
    float32. The graph holds a few of them at once: what makes memory grow as L². A last-step model
    (head "state") forms only the last query's row: × L, not × L²."""
    return rows * attention_bytes_per_row(cfg.to_dict()) / 2**20


def interleaved(
    cases: Mapping[K, Callable[[], object]], *, repeats: int, budget_s: float, warmup: int = 1
) -> dict[K, list[float]]:
    """Seconds per call of each case, the cases run round-robin with the order rotated every round, so
    that the machine's drift hits all alike. At most `repeats` rounds, none started after `budget_s`
    (at least one runs)."""
    names = list(cases)
    for _ in range(warmup):  # first calls plan memory, fill caches, spin up thread pools
        for f in cases.values():
            f()
    times: dict[K, list[float]] = {n: [] for n in names}
    deadline = time.perf_counter() + budget_s
    for r in range(max(1, repeats)):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - t0)
        if time.perf_counter() >= deadline:
            break
    return times


def median_ms(seconds: Sequence[float]) -> float:
    return 1e3 * statistics.median(seconds)


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Right-aligned columns, the first left-aligned; a rule under the header."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    return "\n".join([line(cells[0]), "-" * len(line(cells[0])), *(line(r) for r in cells[1:])])


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to `n` for the block (the caller's setting restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def quiet_exporter() -> None:
    """The exporter's notes (torchvision ops it does not need, initializers it does not deduplicate)
    are noise here."""
    for name in ("torch", "onnx_ir"):
        logging.getLogger(name).setLevel(logging.ERROR)


def ort_session(path: Path, threads: int, device: str = "cpu") -> Any:
    """A session exactly as the service creates one (its options, the CPU arena, ORT_ENABLE_ALL), on
    `device`; stops the bench if that is not the provider really running it (CUDA missing)."""
    from app.engine.providers import CPU, CUDA, RuntimeOptions
    from app.engine.session import create_session

    session = create_session(path, RuntimeOptions(device=device, intra_op_threads=threads))
    wanted = CUDA if device == "cuda" else CPU
    if session.get_providers()[0] != wanted:
        raise SystemExit(f"--device {device}: asked for {wanted}, the session runs {session.get_providers()}")
    return session


def add_device_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="the ONNX Runtime provider (cuda: CUDAExecutionProvider, an error if it cannot run)",
    )


def ints(text: str) -> tuple[int, ...]:
    """A comma-separated list of integers (argparse type)."""
    return tuple(int(x) for x in text.split(",") if x)


def parse_with_smoke(
    ap: argparse.ArgumentParser, argv: Sequence[str] | None, smoke: Sequence[str]
) -> argparse.Namespace:
    """`--smoke` puts the tiny sizes `smoke` first, so that flags given with it still win."""
    given = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(given)
    return ap.parse_args([*smoke, *given]) if args.smoke else args


# -- this bench -------------------------------------------------------------------------------------------
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
        f"ORT >= 2x faster at batch 1: {'-' if first is None else 'met' if first.ratio >= 2 else 'NOT met'}"
        + ("" if first is None else f" ({first.ratio:.2f}x)"),
        f"ORT ahead at every batch size: {'met' if all(r.ratio > 1 for r in rows) else 'NOT met'}",
    ]
    head = (
        f"Same trained weights, torch eager (no_grad) vs ORT (service session options), on {device}, "
        f"{threads} intra-op thread(s) each; medians of interleaved calls; win/s = windows per second."
    )
    return "\n".join([head, table, *targets])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.engine",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--smoke", action="store_true", help=f"tiny sizes (the tests): {' '.join(SMOKE_ARGS)}")
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
        version_dir = export_model(checkpoint, Path(tmp) / "repo", BENCH_MODEL, version=1)
        prepared = time.perf_counter() - t0
        rows = compare(checkpoint, version_dir, args)
    what = (
        f"trained ({args.train_windows} windows, 1 epoch)"
        if args.train_windows
        else "initialised (untrained)"
    )
    print(f"{what} and exported in {prepared:.0f} s")
    print(report(rows, args.threads, args.device))


if __name__ == "__main__":
    main()
