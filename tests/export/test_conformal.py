"""Split-conformal calibration from an exported graph: coverage on known noise, the published version,
the report, and the export hook."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from onnx import TensorProto, helper, numpy_helper, save

from app.artifacts.manifest import load_manifest
from export.checkpoint import save_checkpoint
from export.conformal import (
    METHODS,
    calibrate,
    calibration_batch,
    conformal_quantile,
    load_for_manifest,
    publish,
    write_report,
)
from export.conformal import calibrate_dataset as calibrate_version
from export.data import load_dataset
from export.onnx import export_model
from export.results import interval_section
from export.train import TrainConfig, data_meta
from models import ModelConfig, RSAForecaster
from tests.utils.data import ettd_slice

L, H, C, SIGMA = 16, 8, 2, 0.5


def mean_graph(path: Path) -> None:
    """forecast[b, h, c] = mean over the window of channel c: the best forecast of level + white noise."""
    average = numpy_helper.from_array(np.full((H, L), 1 / L, np.float32), "average")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["average", "window"], ["forecast"])],
        "mean",
        [helper.make_tensor_value_info("window", TensorProto.FLOAT, ["batch", L, C])],
        [helper.make_tensor_value_info("forecast", TensorProto.FLOAT, ["batch", H, C])],
        [average],
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10), str(path))


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A version folder of the mean graph, trained (so to speak) on a level plus Gaussian noise."""
    root = tmp_path_factory.mktemp("conformal")
    rng = np.random.default_rng(0)
    n = 12_000
    stamps = np.datetime64("2020-01-01T00:00") + np.arange(n) * np.timedelta64(1, "h")
    values = np.array([20.0, -3.0]) + SIGMA * rng.standard_normal((n, C))
    csv = root / "noise.csv"
    lines = [
        "date,a,b",
        *(f"{t},{x:.6f},{y:.6f}" for t, (x, y) in zip(stamps.astype(str), values, strict=True)),
    ]
    csv.write_text("\n".join(lines) + "\n")
    folder = root / "repo" / "noise" / "1"
    folder.mkdir(parents=True)
    mean_graph(folder / "model.onnx")
    (folder / "inspect.onnx").write_bytes((folder / "model.onnx").read_bytes())  # not served here
    manifest = {
        "name": "noise",
        "version": 1,
        "input_length": L,
        "horizon": H,
        "channels": ["a", "b"],
        "frequency": "1h",
        "frequency_seconds": 3600.0,
        "inputs": [{"name": "window", "dtype": "float32", "shape": ["batch", L, C]}],
        "outputs": [{"name": "forecast", "dtype": "float32", "shape": ["batch", H, C]}],
        "files": {
            name: {
                "sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest(),
                "bytes": (folder / name).stat().st_size,
            }
            for name in ("model.onnx", "inspect.onnx")
        },
        "dataset": {"name": "noise", "file": "noise.csv", "path": str(csv), "mode": "M", "target": "a"},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_conformal_quantile_is_the_corrected_order_statistic() -> None:
    scores = np.arange(1, 101, dtype=np.float64)[:, None]  # n = 100
    assert conformal_quantile(scores, 0.9)[0] == 91  # ceil(101 · 0.9) = 91
    assert conformal_quantile(scores, 0.5)[0] == 51
    assert conformal_quantile(scores, 0.999)[0] == 100  # past n: the largest


def test_gaussian_noise_is_covered_at_the_nominal_rate() -> None:
    rng = np.random.default_rng(1)
    scale = np.linspace(0.5, 2.0, H)[None, :, None]  # widths must follow each step's own spread
    calibration = rng.standard_normal((2000, H, C)) * scale
    fresh = rng.standard_normal((20000, H, C)) * scale
    levels = [50, 80, 90, 95, 99]
    widths = calibrate(calibration, levels)
    assert widths.dtype == np.float32 and (np.diff(widths, axis=0) >= 0).all()
    for level, w in zip(levels, widths, strict=True):
        coverage = (np.abs(fresh) <= w).mean()
        assert abs(coverage - level / 100) < 0.02, (level, coverage)
        # and step by step: the last step's width is about 4x the first's
        assert w[-1].mean() / w[0].mean() == pytest.approx(4, rel=0.15)


def test_a_published_version_covers_the_test_split(version: Path, tmp_path: Path) -> None:
    manifest = json.loads((version / "manifest.json").read_text())
    ds = load_for_manifest(manifest)
    block = calibrate_version(version / "model.onnx", ds, None)
    assert block["calibration"]["windows"] == ds.val.num_windows
    published = publish(version, block)
    assert published.name == "2"
    for name in ("model.onnx", "inspect.onnx"):
        assert (published / name).read_bytes() == (version / name).read_bytes()
    served = load_manifest(published / "manifest.json")  # the service's parser accepts it
    assert served.version == 2 and served.intervals is not None
    assert served.intervals.levels == (50, 80, 90, 95, 99)
    np.testing.assert_array_equal(served.intervals.array, np.asarray(block["widths"], np.float32))
    # level + N(0, σ²) forecast by the window mean: the residual is N(0, σ²(1 + 1/L)); the 90% width is
    # about 1.645 of that std
    w90 = served.intervals.array[2]
    assert w90.mean() == pytest.approx(1.645 * SIGMA * np.sqrt(1 + 1 / L), rel=0.05)

    folder = write_report(published, tmp_path)
    from dataclasses import replace

    from export.reports import IntervalEvaluation, read_report

    raw = json.loads((folder / "report.json").read_text())
    assert (raw["kind"], raw["schema_version"]) == ("interval_evaluation", IntervalEvaluation.schema_version)
    report = read_report(folder / "report.json", IntervalEvaluation)
    assert (folder / "bands.png").stat().st_size > 0
    for row in report.variants["served"]:
        assert abs(row.coverage - row.level / 100) < 0.03, row
        assert len(row.coverage_by_step) == H
    assert set(report.variants) == {"served", "signed", "pooled", *(m.name for m in METHODS)}
    assert report.served_method in report.selection and report.selection_splits
    page = "\n".join(interval_section([replace(report, folder="results/intervals/noise-v2")]))
    assert "## Prediction intervals (noise v2" in page and "| 90% |" in page
    assert "Target: coverage within ±3 points of nominal at 80/90/95%. Met at: 80%, 90%, 95%;" in page
    with pytest.raises(FileExistsError):
        publish(version, block, version=2)


@pytest.mark.parametrize("rows", [600, 200])
def test_the_export_writes_intervals_its_validation_windows_can_calibrate(
    tmp_path: Path, rows: int, caplog: pytest.LogCaptureFixture
) -> None:
    """600 rows leave 53 validation windows: every level asked but 99% (which needs 99) is calibrated,
    and the export says so; 200 rows leave 13, fewer than 30: no intervals at all, and the export says
    why."""
    cfg = ModelConfig(input_length=16, horizon=8, channels=7, d_model=8, n_heads=4, d_ff=16)
    csv = ettd_slice(tmp_path / "etth1_slice.csv", rows=rows)
    ds = load_dataset(csv, cfg.input_length, cfg.horizon)
    path = tmp_path / "checkpoint.safetensors"
    meta = {"train_config": {}, "data": data_meta(ds, csv, TrainConfig(data=str(csv)))}
    save_checkpoint(path, RSAForecaster(cfg), meta)
    levels = (80, 90, 95, 99)  # what --level 80 --level 90 --level 95 --level 99 passes
    with caplog.at_level("INFO", logger="export.conformal"):
        folder = export_model(path, tmp_path / "repo", "tiny", verify_batch_sizes=(1,), levels=levels)
    intervals = load_manifest(folder / "manifest.json").intervals
    n = ds.val.num_windows
    if rows == 200:
        assert n == 13 and intervals is None
        assert (
            "no prediction intervals: the validation split has 13 window(s), fewer than the 30" in caplog.text
        )
        return
    assert n == 53 and intervals is not None and intervals.levels == (80, 90, 95)
    assert intervals.array.shape == (3, cfg.horizon, 7) and intervals.nonnegative == (False,) * 7
    assert intervals.calibration is not None and intervals.calibration["windows"] == n
    assert "intervals at levels 80, 90, 95 calibrated on 53 validation windows (not 99: 99% needs 99)" in (
        caplog.text
    )


def test_calibration_calls_stay_within_the_attention_memory_budget() -> None:
    """256 rows of a full-attention L = 720 model would be 14.5 GB per attention matrix (the exporter
    was killed for memory): the batch shrinks with L², a last-step model's only with L, never below 1."""
    full = {"input_length": 96, "channels": 7, "n_heads": 4, "head": "flatten"}
    assert calibration_batch(full) == 256  # 1.03 MB per row: 260 would fit, the cap is 256
    assert calibration_batch({**full, "input_length": 720}) == 4
    assert calibration_batch({**full, "input_length": 100_000}) == 1
    state = {"input_length": 512, "channels": 7, "n_heads": 36, "head": "state"}
    assert calibration_batch(state) == 256  # one query row: 0.5 MB per row
    assert calibration_batch(None) == 256  # a graph whose manifest states no architecture


def test_export_onnx_takes_the_levels_to_calibrate() -> None:
    """`--level` (repeatable), which docs/intervals.md promised before it existed; bad values refused."""
    from typer.testing import CliRunner

    from export.onnx import main

    app = typer.Typer()
    app.command()(main)
    runner = CliRunner()
    assert "--level" in runner.invoke(app, ["--help"]).output
    refused = runner.invoke(app, ["missing.safetensors", "--name", "x", "--level", "100"])
    assert refused.exit_code == 2 and "--level takes distinct percentages" in refused.output
