"""Checkpoints: the uncompiled model's state dict in safetensors, the configs in its metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file

from models import ModelConfig, RSAForecaster

__all__ = ["load_checkpoint", "save_checkpoint"]


def save_checkpoint(path: Path, model: RSAForecaster, meta: dict[str, Any]) -> None:
    """Write weights and metadata (model config, training config, data set, scaler, channels)."""
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    info = {"model_config": model.cfg.to_dict(), **meta}
    tmp = path.with_suffix(".tmp")
    save_file(state, str(tmp), metadata={"rsa": json.dumps(info)})
    tmp.replace(path)  # never a half-written checkpoint under the real name


def load_checkpoint(path: str | Path) -> tuple[RSAForecaster, dict[str, Any]]:
    """The model (eval mode) and the metadata saved with it. safetensors holds tensors only, so
    loading runs no pickled code."""
    from safetensors import safe_open

    path = Path(path)
    with safe_open(str(path), framework="pt") as f:
        info = json.loads((f.metadata() or {})["rsa"])
    model = RSAForecaster(ModelConfig.from_dict(info["model_config"]))
    model.load_state_dict(load_file(str(path)))
    return model.eval(), info
