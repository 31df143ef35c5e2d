"""Fixtures for the service tests: a fake model repository and clients whose lifespan has run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

with warnings.catch_warnings():
    # Starlette 1.x nudges TestClient users towards `httpx2`; our pinned httpx works, so keep the noise out.
    warnings.filterwarnings("ignore", message=".*`httpx` with `starlette.testclient` is deprecated.*")
    from fastapi.testclient import TestClient

from app.core.config import Settings
from app.engine.local import LocalEngine
from app.main import create_app
from app.protocols.registry import REGISTRY, Registry
from app.runtime import Runtime
from tests.app.fakes import write_cycle_repository, write_repository
from tests.utils.speed import scaled

ROOT = Path(__file__).resolve().parents[2]


def make_settings(repository: Path, **overrides: Any) -> Settings:
    """Test settings: CPU, one thread per session (the machine is shared), env vars overridden."""
    values: dict[str, Any] = {
        "model_repository": repository,
        "models": [],
        "device": "cpu",
        "intra_op_threads": 1,
        "max_batch_rows": 256,
        "max_batch_wait_ms": 2.0,
        "max_queue_rows": 16384,
        # A deadline no test means to reach, unless it sets its own: stretched on a busy machine, where
        # the documented attention request (a PNG) took past 10 s (tests/utils/speed.py).
        "request_timeout_s": scaled(10.0),
        "log_level": "INFO",
        "parse_process_min_bytes": 0,  # no worker process per test app (tests/app/core/test_offload.py)
    }
    values.update(overrides)
    return Settings(**values)


def wait_for(predicate: Callable[[], bool], timeout_s: float = 15.0, what: str = "condition") -> None:
    timeout_s = scaled(timeout_s)  # on a quiet machine; stretched on a busy one
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def wait_loaded(client: TestClient) -> None:
    """Until no version is still loading (ready or not)."""

    def done() -> bool:
        body = client.get("/readyz").json()
        return not any("loading" in e for m in body["models"] for e in m["errors"])

    wait_for(done, what="models to finish loading")


# TEST_ENGINE=remote runs every TestClient app as a front end of a real engine process (what RSA_WORKERS
# > 1 runs), so that the suite checks the remote engine as it checks the local one; tests that reach into
# the engine's objects (`engine_of`) skip then.
REMOTE = os.environ.get("TEST_ENGINE") == "remote"
# For tests that patch what the engine runs (its sessions, NVML, the file system it reads): in process only.
in_process_engine = pytest.mark.skipif(
    REMOTE, reason="patches the engine's own code, which runs in its process"
)


@contextmanager
def running_client(
    settings: Settings, *, ready: bool = True, protocols: Registry = REGISTRY
) -> Iterator[TestClient]:
    """A TestClient whose lifespan ran; by default it waits for /readyz 200. `protocols`: what it speaks."""
    with engine_process(settings) as address:
        if address is not None:
            settings = settings.model_copy(update={"engine_address": address})
        app = create_app(settings, protocols)
        with TestClient(app, raise_server_exceptions=False) as client:
            if ready:
                wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz 200")
            else:
                wait_loaded(client)
            yield client


@contextmanager
def engine_process(settings: Settings) -> Iterator[str | None]:
    """With TEST_ENGINE=remote, `python -m app.engine` serving these settings; else nothing."""
    if not REMOTE:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="test-engine-"))
    address = f"ipc://{folder}/engine.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    env.update(settings_env(settings))
    process = subprocess.Popen([sys.executable, "-m", "app.engine", address], env=env, cwd=ROOT)
    try:
        wait_for(
            lambda: (folder / "engine.sock").exists() or process.poll() is not None, what="engine socket"
        )
        yield address
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


def settings_env(settings: Settings) -> dict[str, str]:
    """The RSA_* variables that make these settings in another process."""
    env = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        if isinstance(value, list):
            value = ",".join(
                v.get_secret_value() if hasattr(v, "get_secret_value") else str(v) for v in value
            )
        elif isinstance(value, bool):
            value = "true" if value else "false"
        env[f"RSA_{name.upper()}"] = str(value)
    return env


def runtime_of(client: TestClient) -> Runtime:
    """The app's runtime (settings, engine, service, handlers, metrics), as the lifespan built it."""
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]  # typed as a bare ASGI app
    return runtime


def engine_of(client: TestClient) -> LocalEngine:
    """The app's engine, in this process (what tests reach into: batchers, runners)."""
    engine = runtime_of(client).engine
    if not isinstance(engine, LocalEngine):
        pytest.skip(
            "reaches into the engine's objects, which live in the engine process (TEST_ENGINE=remote)"
        )
    return engine


@pytest.fixture(scope="session")
def toy_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Model "toy", versions 1 and 2 (different weights). Shared: tests must not modify it."""
    return write_repository(tmp_path_factory.mktemp("model_repository"))


@pytest.fixture(scope="session")
def cycle_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Models "hourly" (period 24), "daily" (period 7), "weekly" (period 168) and "plain" (no cycle)."""
    return write_cycle_repository(tmp_path_factory.mktemp("cycle_repository"))


@pytest.fixture(scope="module")
def client(toy_repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(toy_repository)) as c:
        yield c


@cache
def _reference_session(path: str) -> ort.InferenceSession:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def ort_run(
    onnx_path: Path, windows: np.ndarray, outputs: list[str] | None = None, phases: Any = None
) -> list[np.ndarray]:
    """A direct ONNX Runtime call, the reference every served result is compared with. `phases` (one
    per window) only for a graph with a cycle."""
    session = _reference_session(str(onnx_path))
    feed = {"window": np.asarray(windows, np.float32)}
    if phases is not None:
        feed["phase"] = np.asarray(phases, np.int64)
    return session.run(outputs, feed)


def ort_forecast(onnx_path: Path, windows: np.ndarray, phases: Any = None) -> np.ndarray:
    return ort_run(onnx_path, windows, ["forecast"], phases)[0]
