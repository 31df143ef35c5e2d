"""Training reports for tests: a partial report completed with filler, as export/reports.py's
TrainingReport reads it (every field it declares present)."""

from __future__ import annotations

# What every training report holds beyond what a test looks at (export/reports.py TrainingReport).
_FILLER = {
    "variant": "rsa",
    "seed": 0,
    "model_config": {},
    "val": {"mse": 0.0},
    "config": {},
    "parameters": 1,
    "windows": {"train": 1, "val": 1, "test": 1},
    "epochs": [],
    "best_epoch": 0,
    "wall_time_s": 60.0,
    "seconds_per_epoch": None,
    "recurrence": [],
    "environment": {"torch": "2", "threads": 1, "python": "3.11", "machine": "x86_64", "cpus": 2},
    "checkpoint": "checkpoint.safetensors",
    "plot": "forecast.png",
}
_DATA = {
    "path": "",
    "sha256": "0",
    "target": None,
    "protocol": "standard",
    "borders": [],
    "channels": [],
    "frequency": "1h",
    "frequency_seconds": 3600.0,
}


def full(r: dict) -> dict:
    """A test's partial report completed with filler, as a TrainingReport reads it."""
    return {**_FILLER, **r, "data": {**_DATA, "name": "ETTh1", "mode": "M", **r.get("data", {})}}
