"""The engine's plain types, for every side of the engine boundary: a leaf module.

It imports numpy and nothing of the engine (no onnxruntime, no batcher), so that a front end (the
engine API, its client, the protocols, the inference service) can name what crosses the boundary without
loading a runtime. tests/test_imports.py checks that `import app.engine.api` loads no onnxruntime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = [
    "BatchEvent",
    "EngineObserver",
    "EngineSnapshot",
    "Feed",
    "InspectResult",
    "ModelSnapshot",
    "ServingSnapshot",
    "VersionObserver",
    "VersionSnapshot",
    "feed_rows",
]

Feed = Mapping[str, np.ndarray]  # input name -> [n, ...], one row per window; every array has the same n


def feed_rows(inputs: Feed) -> int:
    """The rows in a feed; every input must have that many (one per series)."""
    lengths = {name: int(array.shape[0]) for name, array in inputs.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"a feed needs one or more inputs with equal row counts, got {lengths}")
    return next(iter(lengths.values()))


@dataclass(frozen=True)
class InspectResult:
    """Outputs of inspect.onnx for a batch of windows (N layers, Hh heads)."""

    forecast: np.ndarray  # [batch, H, C]
    softmax: np.ndarray  # [batch, C, N, Hh, L, L]
    rem: np.ndarray  # [N, Hh, L, L]
    mixed: np.ndarray  # [batch, C, N, Hh, L, L]


# -- what the engine tells observability ---------------------------------------------------------------
# The engine hands an observer (app/observability/metrics.py's EngineMetrics) events as they happen and a
# snapshot of its state when a scrape asks; it never imports observability.


@dataclass(frozen=True)
class BatchEvent:
    """One session call, done: its rows, how long the call ran, and how it ended (`stopped`: cancelled by
    a shutdown, not a failure)."""

    rows: int
    run_s: float
    outcome: Literal["ok", "failed", "stopped"]


class VersionObserver(Protocol):
    """One version's events (label children bound once, by `EngineObserver.version`)."""

    def on_batch(self, event: BatchEvent) -> None: ...

    def on_queue_wait(self, seconds: float) -> None:
        """A request answered: the time its rows waited in the queue before their first session call."""

    def on_retry(self, reason: str) -> None:
        """A session call retried in halves (reason: out_of_memory)."""


@dataclass(frozen=True)
class ServingSnapshot:
    """A ready version's serving state."""

    provider: str
    input_length: int
    horizon: int
    queued_rows: int
    backlog_s: float
    cuda_device_id: int | None  # the device, when the version runs on the CUDA provider


@dataclass(frozen=True)
class VersionSnapshot:
    name: str
    version: int
    state: str  # loading, ready, failed, unloading (app/engine/catalog.py's LOAD_STATES)
    serving: ServingSnapshot | None  # None unless ready


@dataclass(frozen=True)
class ModelSnapshot:
    name: str
    error: str | None  # the model cannot be served at all
    versions: tuple[VersionSnapshot, ...]


@dataclass(frozen=True)
class EngineSnapshot:
    """The engine's state when a scrape asks."""

    error: str | None  # the repository itself is unusable
    runtime_version: str  # onnxruntime's
    models: tuple[ModelSnapshot, ...]


class EngineObserver(Protocol):
    """What the engine reports to: per-version events, a version gone, and its state at scrape time."""

    def version(self, model: str, version: int, provider: str) -> VersionObserver: ...

    def forget(self, model: str, version: int) -> None:
        """The version was unloaded: drop its series."""

    def families(self, snapshot: EngineSnapshot) -> list[Metric]:
        """Every metric family of the engine now."""
