"""The one place a local engine is built: the engine with the metrics it reports to.

The engine never imports observability (app/engine/types.py's EngineObserver is what it reports to), so
whatever runs one (the service's single process, app/lifecycle.py; the engine process, app/engine/__main__.py)
builds it here.
"""

from __future__ import annotations

from collections.abc import Callable

from app.core.config import Settings
from app.engine.local import LocalEngine
from app.observability.metrics import EngineMetrics


def local_engine(settings: Settings, alone: Callable[[], bool] | None = None) -> LocalEngine:
    """A LocalEngine reporting to a fresh EngineMetrics. `alone`: when a small call may run inline on the
    event loop (None: when no other submit is being handled by this engine)."""
    return LocalEngine(settings, observer=EngineMetrics(settings.max_batch_rows), alone=alone)
