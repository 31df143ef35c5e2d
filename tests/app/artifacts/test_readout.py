"""app/artifacts/readout.py (the global read-out's numpy home) and app/artifacts/initializers.py (a graph's
constants replaced without the onnx package): the manifest block round trip and its refusals, the feature
cache between IRLS passes changing no number, and the initializer rewrite read back by ONNX Runtime."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from app.artifacts import readout
from app.artifacts.initializers import replace_initializers
from export.global_onnx import export_global, readout_spec, run_graph
from export.panel import PanelConfig, train_global
from tests.utils.panel import store


def panel() -> list[np.ndarray]:
    return [store(i, 40 + 3 * i) for i in range(12)]


CFG = PanelConfig(horizon=6, period=12, input_periods=2, irls=2)


def test_the_readout_block_round_trips_and_refuses_what_it_cannot_read() -> None:
    spec = readout_spec(train_global(panel(), CFG))
    assert readout.ReadoutSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ValueError, match="schema 1"):
        readout.ReadoutSpec.from_json({**spec.to_json(), "schema": 2})
    broken = spec.to_json()
    del broken["ridge"]
    with pytest.raises(ValueError, match="incomplete or malformed"):
        readout.ReadoutSpec.from_json(broken)


def test_features_kept_between_passes_change_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    series, fit = panel(), CFG.fit_settings
    kernels = readout.rem_kernels(readout_spec(train_global(series, CFG)).heads, 24)
    cached = readout.fit_weights(series, fit, kernels)
    monkeypatch.setattr(readout, "CACHE_ROWS", 0)  # every pass reads the series again
    np.testing.assert_array_equal(readout.fit_weights(series, fit, kernels), cached)


def test_initializers_are_replaced_in_place_and_read_by_onnx_runtime(tmp_path: Path) -> None:
    model = train_global(panel(), CFG, frequency="1MS")
    folder = export_global(model, tmp_path, "stores")
    graph = (folder / "model.onnx").read_bytes()
    other = dataclasses.replace(model, weights=model.weights * 0.5 + 1.0)
    patched = replace_initializers(
        graph,
        {"readout": other.weights[:-1].astype(np.float32), "bias": other.weights[-1].astype(np.float32)},
    )
    assert len(patched) == len(graph) and patched != graph
    (tmp_path / "patched.onnx").write_bytes(patched)
    histories = panel()
    got = run_graph(tmp_path / "patched.onnx", histories, model.input_length)
    np.testing.assert_allclose(got, other.forecast(histories), rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="holds"):
        replace_initializers(graph, {"bias": np.zeros(7, np.float32)})  # H = 6
    with pytest.raises(ValueError, match="no initializer"):
        replace_initializers(graph, {"nothing": np.zeros(6, np.float32)})
