"""The global RSA-Transformer's graph (export/global_models/transformer_onnx.py) against
`PanelTransformer.forecast`: a covariate network (past, future, calendar and a categorical static) with every
weight moved off its start, so the attention, the horizon tokens and the covariate embeddings all count; short
histories with NaN starts, tiny and large levels, constant series; its manifest; its refusal past the
tolerance; its model file."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from app.artifacts.contract import COVARIATE_INPUT, FORECAST_INPUT, MANIFEST_FILE
from app.artifacts.covariates import StaticCovariate
from app.artifacts.manifest import Manifest
from app.artifacts.readout import last_windows, window_scales
from export.covariates import CovariatePlan, calendar_columns
from export.global_models import transformer_onnx
from export.global_models.config import PanelConfig
from export.global_models.onnx import check_covariates
from export.global_models.transformer import Budget, PanelTransformer, transformer_config
from export.global_models.transformer_onnx import (
    TOLERANCE,
    SavedTransformer,
    export_transformer,
    load_transformer,
    run_transformer_graph,
    save_transformer,
)
from models import RSAForecaster

H, PERIOD, L = 7, 7, 21


def plan() -> CovariatePlan:
    stats = {
        "footfall": (100.0, 30.0),
        "promo": (0.25, 0.4),
        "size=big": (0.4, 0.49),
        "size=small": (0.6, 0.49),
    }
    stats.update({c: (0.0, 0.7) for c in calendar_columns(("dayofweek",))})
    return CovariatePlan(
        past=("footfall",),
        future=("promo",),
        calendar=("dayofweek",),
        static=(StaticCovariate("size", ("big", "small")),),
        stats=stats,
    )


def model(covariates: bool) -> PanelTransformer:
    cfg = PanelConfig(horizon=H, period=PERIOD)
    layout = plan().layout(L, H) if covariates else None
    torch.manual_seed(0)
    net = RSAForecaster(transformer_config(cfg, L, True, layout=layout))
    with torch.no_grad():  # off the start: the attention head and the covariates' maps are not 0
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    net.eval()
    return PanelTransformer(config=cfg, network=net, rem=True, budget=Budget(), covariates=layout)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PanelTransformer, Path]]:
    repo = tmp_path_factory.mktemp("repo")
    m = model(covariates=True)
    folder = export_transformer(SavedTransformer(m, "1D", "Europe/Berlin"), repo, "shops")
    yield m, folder


def histories(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = [np.full(L, 3.0), np.zeros(PERIOD), np.full(PERIOD + 2, 1e-3)]
    for n in (PERIOD, PERIOD + 3, L - 1, L, 3 * L):
        level = 10.0 ** rng.uniform(-2, 4)
        out.append(level * (1 + 0.4 * rng.random(n)))
    return out


def test_the_graph_forecasts_as_the_python_model(published: tuple[PanelTransformer, Path]) -> None:
    m, folder = published
    hs = histories(5)  # not the exporter's own check set
    cov = check_covariates(m.covariates, hs, seed=9)
    assert cov is not None and np.isnan(cov).any()  # the short histories' past start
    want = m.forecast(hs, covariates=cov)
    got = run_transformer_graph(folder / "model.onnx", hs, L, cov)
    one = run_transformer_graph(folder / "model.onnx", hs[-1:], L, cov[-1:])  # a batch of one
    np.testing.assert_allclose(one[0], got[-1], rtol=1e-6, atol=1e-6 * float(np.abs(got[-1]).max()))
    scale = window_scales(*last_windows(hs, L), PERIOD)  # the network's unit, as the exporter's check
    assert float((np.abs(got - want) / scale[:, None]).max()) <= TOLERANCE
    np.testing.assert_array_equal(got[1], 0.0)  # an all-zero history forecasts zeros (output_scales)
    np.testing.assert_array_equal(want[1], 0.0)
    # the covariates move the forecast: this is not a network that ignores them
    assert m.covariates is not None
    at_mean = np.broadcast_to(np.asarray(m.covariates.mean), cov.shape)
    assert float((np.abs(m.forecast(hs, covariates=at_mean) - want) / scale[:, None]).max()) > 0.01


def test_the_manifest_is_a_global_model_without_a_readout(published: tuple[PanelTransformer, Path]) -> None:
    m, folder = published
    raw = json.loads((folder / MANIFEST_FILE).read_text())
    manifest = Manifest.model_validate(raw)  # what the service reads
    assert raw["kind"] == "global_transformer" and "readout" not in raw and raw["intervals"] is None
    assert [t.name for t in manifest.inputs] == [FORECAST_INPUT, COVARIATE_INPUT]
    assert m.covariates is not None and manifest.inputs[1].shape == ("batch", m.covariates.width)
    assert manifest.panel is not None and manifest.panel.layout == m.covariates
    assert manifest.panel.min_history == PERIOD and manifest.timezone == "Europe/Berlin"
    assert raw["verification"]["max_error"] <= TOLERANCE and raw["verification"]["series"] > 10


def test_a_graph_past_the_tolerance_is_not_published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transformer_onnx, "TOLERANCE", 0.0)  # float32 never matches float64 exactly
    with pytest.raises(ValueError, match="nothing published"):
        export_transformer(SavedTransformer(model(covariates=False), "1D"), tmp_path, "t")
    assert not (tmp_path / "t").exists() or not any(p.name.isdigit() for p in (tmp_path / "t").iterdir())


def test_the_model_file_round_trips(tmp_path: Path) -> None:
    m = dataclasses.replace(model(covariates=True), history=[{"epoch": 0, "val_mase": 0.9}], best_epoch=3)
    path = save_transformer(SavedTransformer(m, "1D", None), tmp_path / "run" / "model.json")
    back = load_transformer(path)
    assert (back.frequency, back.timezone, back.model.best_epoch) == ("1D", None, 3)
    assert back.model.covariates == m.covariates and back.model.history == m.history
    hs = histories(2)
    cov = check_covariates(m.covariates, hs)
    np.testing.assert_array_equal(back.model.forecast(hs, covariates=cov), m.forecast(hs, covariates=cov))


@pytest.mark.parametrize(
    ("args", "option", "words"),
    [
        (["--epochs", "3"], "--epochs", "--network transformer"),
        (["--network", "transformer", "--effect", "additive"], "--effect", "relative"),
        (["--network", "transformer", "--start", "zeros"], None, "start must be"),
    ],
)
def test_the_cli_refuses_options_the_model_would_ignore(
    tmp_path: Path, args: list[str], option: str | None, words: str
) -> None:
    from typer.testing import CliRunner

    from export.global_models.cli import cli
    from tests.export.test_covariates_served import write_shops

    write_shops(tmp_path / "shops.csv", n=2)
    base = ["train", "--data", str(tmp_path / "shops.csv"), "--horizon", "7", "--out", str(tmp_path / "run")]
    r = CliRunner().invoke(cli, [*base, *args])
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.replace("│", " ").split())
    assert words in text and (option is None or option in text), text
    assert not (tmp_path / "run").exists()


def test_a_still_window_forecasts_its_last_cycle_in_the_graph_and_in_python(tmp_path: Path) -> None:
    """A model without covariates forecasts a window without change as its last cycle repeated
    (readout.hold_still) in the graph and in `PanelTransformer.forecast`; one value changed and it is the
    network's again."""
    m = model(covariates=False)
    folder = export_transformer(SavedTransformer(m, "1D", None), tmp_path, "still")
    cycle = 20.0 + np.arange(PERIOD)
    repeated = np.tile(cycle, 5)
    moved = repeated.copy()
    moved[-2] += 1.0
    short = np.full(PERIOD, 0.4)  # no pair a period apart: the lag is 1
    hs = [np.full(L, 3000.0), repeated, short, moved]
    want = np.stack([np.full(H, 3000.0), cycle[np.arange(H) % PERIOD], np.full(H, 0.4)])
    got, python = run_transformer_graph(folder / "model.onnx", hs, L), m.forecast(hs)
    np.testing.assert_allclose(got[:3], want, rtol=1e-6)
    np.testing.assert_allclose(python[:3], want, rtol=1e-12)
    assert np.abs(got[3] - python[3]).max() <= 1e-3 * float(np.abs(python[3]).max())
    assert np.abs(python[3] - want[1]).max() > 1e-2  # a window that changes is the network's


@pytest.mark.parametrize("covariates", [False, True])
def test_a_series_below_zero_is_forecast_as_minus_its_mirror_image(tmp_path: Path, covariates: bool) -> None:
    """A transformer trained on series that never go below zero (`PanelConfig.mirror`, set by
    `train_panel_transformer` as the read-out's search sets it) reads a window below zero as its mirror
    image, in the graph and in `PanelTransformer.forecast`: -x is forecast as minus x's forecast. Without
    it (before 2026-12-06, and for a model trained on series below zero) the network read -x as a shape it
    never saw."""
    m = model(covariates)
    m = dataclasses.replace(m, config=dataclasses.replace(m.config, mirror=True))
    folder = export_transformer(SavedTransformer(m, "1D", None), tmp_path, "mirrored")
    hs = histories(3)[3:]  # series that change, of every length
    cov = check_covariates(m.covariates, hs, seed=4)
    path = folder / "model.onnx"
    up, down = m.forecast(hs, covariates=cov), m.forecast([-h for h in hs], covariates=cov)
    np.testing.assert_allclose(down, -up, rtol=1e-12)
    graph_up = run_transformer_graph(path, hs, L, cov)
    graph_down = run_transformer_graph(path, [-h for h in hs], L, cov)
    np.testing.assert_allclose(graph_down, -graph_up, rtol=1e-6, atol=1e-6 * float(np.abs(graph_up).max()))
    plain = dataclasses.replace(m, config=dataclasses.replace(m.config, mirror=False))
    assert np.abs(plain.forecast([-h for h in hs], covariates=cov) + up).max() > 1e-3 * np.abs(up).max()


def test_training_sets_the_mirror_from_the_series() -> None:
    """`train_panel_transformer` leaves a given `mirror` as it is and sets an unset one: True where no
    training series goes below zero."""
    from export.global_models.transformer import train_panel_transformer

    rng = np.random.default_rng(0)
    series = [10.0 + rng.random(40) for _ in range(4)]
    budget = Budget(epochs=1, windows_per_epoch=16, batch_size=8, patience=1, refit=False)
    cfg = PanelConfig(horizon=H, period=PERIOD)
    assert train_panel_transformer(series, cfg, L, budget=budget, d_model=8).config.mirror is True
    below = [*series, -series[0]]
    assert train_panel_transformer(below, cfg, L, budget=budget, d_model=8).config.mirror is False
    kept = dataclasses.replace(cfg, mirror=False)
    assert train_panel_transformer(series, kept, L, budget=budget, d_model=8).config.mirror is False
