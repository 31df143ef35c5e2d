"""Metrics over every window of a split (no dropped last batch), and the evaluate command.

python -m export.evaluate results/runs/etth1-rsa-h96-s0/checkpoint.safetensors [--data CSV] [--split test]
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Annotated, Literal

import torch
import typer

from export.checkpoint import load_checkpoint
from export.data import DataError, Dataset, ReadOptions, Split, load_dataset
from export.paths import resolve
from export.reports import EvaluationReport, to_dict
from models import RSAForecaster

__all__ = ["ablations", "evaluate", "load_for_checkpoint", "predict"]

log = logging.getLogger(__name__)


def predict(model: RSAForecaster, split: Split, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Forecasts and targets [n, H, C] for the windows starting at ``idx``, with their cycle phases
    when the model has a cycle."""
    x, y = split.windows(idx)
    period = model.cfg.cycle_period
    return model(x, phase=split.phases(idx, period) if period else None), y


@torch.no_grad()
def evaluate(model: RSAForecaster, split: Split, batch_size: int = 512) -> dict[str, float]:
    """MSE and MAE on the scaled data, averaged over every window, step and channel of `split`."""
    was_training = model.training
    model.eval()
    se = ae = 0.0
    n = split.num_windows
    for start in range(0, n, batch_size):
        pred, y = predict(model, split, torch.arange(start, min(start + batch_size, n)))
        err = pred - y
        se += float((err * err).sum(dtype=torch.float64))
        ae += float(err.abs().sum(dtype=torch.float64))
    count = n * split.horizon * split.data.shape[1]
    model.train(was_training)
    return {"mse": se / count, "mae": ae / count, "windows": n}


@torch.no_grad()
def ablations(model: RSAForecaster, split: Split) -> dict[str, float]:
    """MSE on `split` with the recurrence taken out of the trained model, two ways: `gates_zero`, every
    REM head's gate forced to 0 (its softmax alone at full weight), and `rem_zero`, every REM replaced
    by zeros (the softmax keeps its weight 1 − g, as if the memory were empty)."""
    out = {}
    for name in ("gates_zero", "rem_zero"):
        ablated = copy.deepcopy(model).fold()
        for attn in ablated.attentions():
            if not attn.has_rem:
                continue
            attn.rem_scaled.zero_()
            if name == "gates_zero":
                attn.softmax_scale.fill_(1.0)
        out[name] = evaluate(ablated, split)["mse"]
    return out


def load_for_checkpoint(info: dict, data: str | None = None) -> Dataset:
    """The data set a checkpoint was trained on (or another CSV), split the same way."""
    d = info["data"]
    cfg = info["model_config"]
    options = ReadOptions.from_record(d)  # older checkpoints keep none
    path = resolve(data or d["path"])
    try:
        ds = load_dataset(
            path,
            cfg["input_length"],
            cfg["horizon"],
            mode=d["mode"],
            target=d["target"],
            protocol=d["protocol"] if data is None else "auto",
            options=options,
        )
    except DataError as e:
        if data is None:
            raise
        raise DataError(
            f"{e}. The model was trained on {d['path']} and needs the columns {d['channels']}"
        ) from None
    if ds.channels != list(d["channels"]):
        raise DataError(
            f"{path.name} gives the columns {ds.channels}, but the model was trained on {d['path']} and "
            f"needs {d['channels']}, in that order"
        )
    if data is None and ds.series.sha256 != d["sha256"]:
        raise DataError(
            f"{ds.series.path} has changed since training (sha256 {ds.series.sha256[:12]}…, the checkpoint "
            f"was trained on {d['sha256'][:12]}…); pass the data file explicitly to evaluate on it anyway"
        )
    return ds


def main(
    checkpoint: Annotated[Path, typer.Argument(help="checkpoint.safetensors written by export.train")],
    data: Annotated[str | None, typer.Option(help="CSV to evaluate on (default: the training data)")] = None,
    split: Annotated[Literal["train", "val", "test"], typer.Option(help="which split")] = "test",
    batch_size: int = 512,
) -> None:
    """Evaluate a checkpoint: MSE and MAE on the scaled data over every window of a split."""
    model, info = load_checkpoint(checkpoint)
    try:
        ds = load_for_checkpoint(info, data)
    except DataError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    metrics = evaluate(model, getattr(ds, split), batch_size)
    report = EvaluationReport(
        str(checkpoint),
        str(ds.series.path),
        split,
        mse=metrics["mse"],
        mae=metrics["mae"],
        windows=int(metrics["windows"]),  # evaluate's count of windows, an int in its dict of floats
    )
    typer.echo(json.dumps(to_dict(report)))


if __name__ == "__main__":
    typer.run(main)
