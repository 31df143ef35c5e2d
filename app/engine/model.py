"""One model version's sessions: its forecast runner and its inspection session. Numpy in, numpy out.

`OnnxModel.load()` creates the forecast runner (app/engine/runners.py: one per provider); the
inspection session is created on the first `inspect()` call, so forecasting never pays for it. Calls
block: run them off the event loop.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort

from app.artifacts.contract import (
    ATTN_MIXED,
    ATTN_REM,
    ATTN_SOFTMAX,
    FORECAST_OUTPUT,
    INSPECT_FILE,
    MODEL_FILE,
)
from app.artifacts.feed import build_feed, zeros_feed
from app.artifacts.manifest import Manifest
from app.engine.gate import cuda_call
from app.engine.providers import RuntimeOptions
from app.engine.runners import CallPolicy, Runner, create_runner
from app.engine.session import SessionLoadError, check_io, create_session
from app.engine.types import Feed, InspectResult  # InspectResult re-exported (app/engine/local.py)


class OnnxModel:
    """The sessions of one model version: `runner` for forecasts (at most `max_rows` rows per call, as
    the batcher sizes them), the inspection session for attention."""

    def __init__(
        self, folder: Path, manifest: Manifest, options: RuntimeOptions, max_rows: int = 256
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.options = options
        self.max_rows = max_rows
        self._runner: Runner | None = None
        self._inspect_session: ort.InferenceSession | None = None
        self._inspect_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        """Create the forecast runner on the best allowed provider and check it against the manifest."""
        self._runner = create_runner(self.folder / MODEL_FILE, self.manifest, self.options, self.max_rows)

    def warmup(self) -> None:
        """Runs so that the first request does not pay for lazy initialisation (every batch bucket, and
        its CUDA graph, on a bound runner). Also checks the output shape against the manifest, which the
        graph's metadata may not state."""
        m = self.manifest
        out = self.runner.warmup(self._zeros_feed())
        if out.shape != (1, m.horizon, m.n_channels):
            raise SessionLoadError(
                f"{self.folder / MODEL_FILE}: forecast shape {list(out.shape)} for one window, the manifest "
                f"says [1, {m.horizon}, {m.n_channels}]"
            )

    def close(self) -> None:
        """Drop the sessions (an unloaded version): ONNX Runtime frees them with their last reference."""
        if self._runner is not None:
            self._runner.close()
        self._runner = None
        with self._inspect_lock:
            self._inspect_session = None

    @property
    def loaded(self) -> bool:
        return self._runner is not None

    @property
    def runner(self) -> Runner:
        if self._runner is None:
            raise RuntimeError(f"{self.folder}: session not loaded; call load() first")
        return self._runner

    @property
    def provider(self) -> str:
        """The execution provider actually running the forecast graph."""
        return self.runner.provider

    @property
    def policy(self) -> CallPolicy:
        return self.runner.policy

    @property
    def inspect_provider(self) -> str | None:
        return self._inspect_session.get_providers()[0] if self._inspect_session is not None else None

    # -- inference -----------------------------------------------------------------------------
    def feed(self, windows: np.ndarray, phases: np.ndarray | None = None) -> Feed:
        """The graph inputs for windows (and their phases, for a cycle model)."""
        return build_feed(self.manifest, windows, phases)

    def run_forecast(self, feed: Feed, alone: bool = False) -> np.ndarray:
        """The forecast runner on a ready feed (what the batcher calls): [batch, H, C]."""
        return self.runner.run(feed, alone)

    def release_memory(self) -> bool:
        """What the runner can give back once the version is idle (the batcher's release hook)."""
        return self.runner.release_memory()

    def inspect_feed(self, feed: Feed) -> InspectResult:
        """The forecast plus per-layer, per-head attention matrices from inspect.onnx, for a ready feed."""
        session = self._inspect()
        with cuda_call(session.get_providers()[0]):
            forecast, softmax, rem, mixed = session.run(
                [FORECAST_OUTPUT, ATTN_SOFTMAX, ATTN_REM, ATTN_MIXED], feed
            )
        return InspectResult(forecast=forecast, softmax=softmax, rem=rem, mixed=mixed)

    def _zeros_feed(self) -> Feed:
        """One all-zeros window (phase 0 when the model has a cycle), for warm-ups."""
        return zeros_feed(self.manifest, 1)

    def _inspect(self) -> ort.InferenceSession:
        with self._inspect_lock:
            if self._inspect_session is None:
                path = self.folder / INSPECT_FILE
                session = create_session(path, self.options)
                check_io(session, self.manifest, (FORECAST_OUTPUT, ATTN_SOFTMAX, ATTN_REM, ATTN_MIXED), path)
                with cuda_call(session.get_providers()[0]):
                    session.run([ATTN_MIXED], self._zeros_feed())  # warm-up
                self._inspect_session = session
            return self._inspect_session
