"""The CUDA runners: the bound runner (device buffers per bucket, pinned host staging, padding) and the
graph runner (a CUDA graph per bucket) answer bit for bit as the plain CUDA session, every shipped version."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.artifacts.manifest import load_manifest
from app.engine.model import OnnxModel
from app.engine.providers import CUDA, RuntimeOptions
from app.engine.runners import BoundRunner, PlainRunner, default_buckets
from app.engine.session import create_session
from tests.gpu.conftest import SHIPPED, real_windows

ROWS = (1, 2, 3, 7, 8, 64, 200, 256)
CUDA_OPTIONS = RuntimeOptions(device="cuda")


@pytest.mark.parametrize("graphs", [False, True], ids=["bound", "graph"])
@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: f"v{p.name}")
def test_bound_and_graph_runners_answer_as_the_plain_session(folder: Path, graphs: bool) -> None:
    manifest = load_manifest(folder / "manifest.json")
    path = folder / "model.onnx"
    plain = PlainRunner(create_session(path, CUDA_OPTIONS))
    runner = BoundRunner(
        create_session(path, CUDA_OPTIONS, graphs=graphs),
        manifest,
        default_buckets(256),
        device="cuda",
        graphs=graphs,
    )
    assert runner.provider == CUDA and runner._pinning is not None and runner._pinning.pinned
    runner.warmup(real_windows(manifest, 1))
    big = real_windows(manifest, 256, seed=7)
    for rows in ROWS:
        feed = real_windows(manifest, rows, seed=rows)
        np.testing.assert_array_equal(runner.run(feed), plain.run(feed), err_msg=f"{rows} rows")
        runner.run(big)  # the next smaller call must not see these rows
    runner.close()


def test_the_service_loads_the_bound_runner_with_graphs_when_asked(tmp_path: Path) -> None:
    folder = SHIPPED[-1]
    manifest = load_manifest(folder / "manifest.json")
    model = OnnxModel(folder, manifest, RuntimeOptions(device="cuda", cuda_graphs=True), max_rows=64)
    model.load()
    model.warmup()
    runner = model.runner
    assert isinstance(runner, BoundRunner) and runner.graphs, "CUDA graphs fell back (see the log)"
    assert runner.buckets == default_buckets(64) and model.policy.max_calls == 1
    plain = OnnxModel(folder, manifest, RuntimeOptions(device="cuda", cuda_io_binding=False))
    plain.load()
    assert isinstance(plain.runner, PlainRunner) and plain.provider == CUDA
    feed = real_windows(manifest, 5)
    np.testing.assert_array_equal(model.run_forecast(feed), plain.run_forecast(feed))
