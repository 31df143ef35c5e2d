"""In-process benchmark material: shipped architectures, untrained checkpoints the exporter takes, real
test feeds, and ONNX Runtime sessions made exactly as the service makes them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.artifacts.contract import FORECAST_INPUT, MANIFEST_FILE, PHASE_INPUT
from app.artifacts.publish import version_numbers
from bench.harness.cli import add_device_argument
from export.checkpoint import save_checkpoint
from export.conformal import attention_bytes_per_row
from export.data import ETT_DIR, StandardScaler, load_dataset
from export.evaluate import load_for_checkpoint
from export.paths import REPO_ROOT
from export.train import TrainConfig, data_meta
from models import ModelConfig, RSAForecaster

SHIPPED_MODEL = REPO_ROOT / "model_repository" / "etth1-rsa"
ETTH1 = ETT_DIR / "ETTh1.csv"
# Verification batches for models exported at long inputs: the exporter's default includes 64, where
# the inspection graph at L = 720 would hold ~4 GB per attention output.
LONG_INPUT_VERIFY_BATCHES = (1, 7)
# `levels` for the exports of speed and memory benches: no interval calibrated (its pass over the
# validation windows was 5 of an export's 12 s at L 16 on the 2-core machine, 2026-12-06).
NO_INTERVALS: tuple[float, ...] = ()

Feed = dict[str, np.ndarray]  # graph input name -> array, one row per window


def shipped_architecture(model_dir: Path = SHIPPED_MODEL, version: int | None = None) -> dict[str, Any]:
    """The ModelConfig of a shipped version (None: the latest), from its manifest."""
    chosen = model_dir / str(version_numbers(model_dir)[-1] if version is None else version)
    return json.loads((chosen / MANIFEST_FILE).read_text())["architecture"]


def add_export_arguments(ap: argparse.ArgumentParser, *, threads: str, skip: str) -> None:
    """The flags of a bench that exports a shipped architecture at several input lengths and runs it:
    `--threads` (ORT intra-op, `threads` its help), `--device`, `--architecture`, and
    `--max-attention-mib` (`skip` its help: what is skipped above it)."""
    ap.add_argument("--threads", type=int, default=1, help=threads)
    add_device_argument(ap)
    ap.add_argument(
        "--architecture",
        type=int,
        default=1,
        metavar="VERSION",
        help="the shipped version whose architecture is exported at each L (default 1: full L×L "
        "attention, the serving benchmark's model; 4, the default model, forms only the last query row)",
    )
    ap.add_argument("--max-attention-mib", type=float, default=1024.0, help=skip)


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
