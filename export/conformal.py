"""Split-conformal prediction intervals per horizon step and channel, from an exported ONNX model.

    python -m export.conformal model_repository/etth1-rsa/2   # calibrate, publish version 3, evaluate
    python -m export.conformal model_repository/etth1-rsa/3   # has intervals: evaluate only

Calibration runs the version's `model.onnx` (ONNX Runtime, CPU) over every window of the validation
split of the data set its manifest names, read the way training read it, and keeps, per level, horizon
step and channel, the conformal quantile of the scores (order statistic ceil((n + 1)·level) of n
windows, the finite-sample correction): the absolute residuals |y - forecast| on the raw scale, or
those divided by each window's own spread. Which (`METHODS`) is chosen on splits of the validation
split itself (`select_method`: rolling origins and halves, never the test split). The service answers
forecast ± that width (× the request's spread): constants in the manifest's `intervals` block, no
extra inference. A version
without intervals is published again as a new version: the same graphs byte for byte, the manifest
with the block. docs/intervals.md has the method, the choices we measured and the limits.

Evaluation (the report under results/intervals/, read by export/results.py): coverage, mean width and
the interval (Winkler) score per level on every test window, per horizon step and per request horizon
(the service slices the widths to the horizon asked), beside every candidate method calibrated on the
whole validation split, signed residuals and a naive baseline pooled over the steps.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from app.artifacts.conformal import conformal_quantile
from app.artifacts.contract import (
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    INSPECT_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    PHASE_INPUT,
)
from export.calibration_size import calibration_plan
from export.conformal_evaluation import evaluate, plot_bands
from export.conformal_methods import (
    _METHODS,
    _SCALE_FLOOR,
    METHODS,
    Method,
    SplitForecasts,
    WindowScaleSpec,
    _float32_up,
    fit_method,
    select_method,
    served_bounds,
    served_intervals,
)
from export.data import ETT_DIR, DataError, Dataset, ReadOptions, Split, load_dataset
from export.paths import portable, resolve
from export.publish import publish_version
from export.reports import IntervalEvaluation, build, read_report
from export.reports import write_report as save_report

__all__ = [
    "DEFAULT_LEVELS",
    "METHODS",
    "Method",
    "SplitForecasts",
    "WindowScaleSpec",
    "calibrate",
    "conformal_quantile",
    "evaluate",
    "fit_method",
    "for_checkpoint",
    "intervals_block",
    "publish",
    "select_method",
    "served_bounds",
    "served_intervals",
    "split_forecasts",
]

log = logging.getLogger(__name__)

# Percent. Their quantiles (TimeGPT's mapping, docs/intervals.md) are 0.005 ... 0.995.
DEFAULT_LEVELS: tuple[float, ...] = (50, 80, 90, 95, 99)
CALIBRATION_SPLIT = "val"
# Rows per ONNX Runtime call: a few MB of input, far below what a session call costs to start; fewer
# where one attention matrix of the call (rows × channels × heads × queries × L float32, the graph holds
# a few at once) would pass _ATTENTION_BYTES: 256 rows of a full-attention L = 720 model are 14.5 GB per
# matrix, and the exporter was killed for memory on this 24 GB machine.
_BATCH = 256
_ATTENTION_BYTES = 256 * 2**20


def _session(model_path: Path) -> Any:  # an ort.InferenceSession (onnxruntime ships no types)
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1  # the machine is shared; calibration is a few seconds either way
    return ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])


def _raw_rows(ds: Dataset, split: Split) -> np.ndarray:
    """The split's rows as the file holds them (float64), channels in the model's order."""
    start, end = ds.borders[split.name]
    columns = [ds.series.columns.index(c) for c in ds.channels]
    return ds.series.values[start:end][:, columns]


def attention_bytes_per_row(architecture: Mapping[str, Any]) -> int:
    """Bytes of one attention matrix per window of a model of this architecture (a ModelConfig as a
    dict): channels × heads × queries × L float32, one query row for a last-step model."""
    length = architecture["input_length"]
    queries = 1 if architecture.get("head") == "state" else length
    return architecture["channels"] * architecture["n_heads"] * queries * length * 4


def calibration_batch(architecture: dict[str, Any] | None) -> int:
    """Rows per session call for a model of this architecture (a ModelConfig as a dict; None, a graph
    that states none: the plain cap)."""
    if architecture is None:
        return _BATCH
    return max(1, min(_BATCH, _ATTENTION_BYTES // attention_bytes_per_row(architecture)))


def split_forecasts(
    model_path: Path,
    ds: Dataset,
    split: Split,
    period: int | None,
    batch: int = _BATCH,
    limit: int | None = None,
) -> SplitForecasts:
    """Run every window of `split` (stride 1, none dropped; the first `limit` when given) through the
    ONNX graph, `batch` at a time."""
    raw = _raw_rows(ds, split)
    L, H = split.input_length, split.horizon
    n = split.num_windows if limit is None else min(limit, split.num_windows)
    # [N, C, L] views -> [N, L, C]; the graph wants C-ordered float32 like a request's window.
    windows = np.lib.stride_tricks.sliding_window_view(raw, L, axis=0)[:n].transpose(0, 2, 1)
    targets = np.lib.stride_tricks.sliding_window_view(raw, H, axis=0)[L : L + n].transpose(0, 2, 1)
    windows = np.ascontiguousarray(windows, dtype=np.float32)
    phases = split.phases(np.arange(n), period).numpy() if period else None
    session = _session(model_path)
    out = []
    for i in range(0, n, batch):
        feeds: dict[str, np.ndarray] = {FORECAST_INPUT: windows[i : i + batch]}
        if phases is not None:
            feeds[PHASE_INPUT] = phases[i : i + batch]
        out.append(session.run([FORECAST_OUTPUT], feeds)[0])
    return SplitForecasts(windows, np.ascontiguousarray(targets, dtype=np.float64), np.concatenate(out))


def calibrate(residuals: np.ndarray, levels: Sequence[float]) -> np.ndarray:
    """Widths [K, H, C] (float32): per level (percent), step and channel, the conformal quantile of the
    absolute residuals [n, H, C]."""
    scores = np.abs(residuals)
    return np.stack([_float32_up(conformal_quantile(scores, level / 100)) for level in levels])


def _float32_text(value: np.float32) -> float:
    """The float whose shortest repr is the float32's shortest repr, so that JSON holds e.g. 2.54 (what
    the service casts back to exactly this float32) rather than 2.5399999618530273."""
    return float(str(value))


def intervals_block(
    widths: np.ndarray,
    levels: Sequence[float],
    calibration: dict[str, Any],
    scale: WindowScaleSpec | None = None,
) -> dict[str, Any]:
    """The manifest's `intervals` object (docs/artifacts.md)."""
    return {
        "method": "split_conformal",
        "residuals": "absolute",
        "scale": "none" if scale is None else "window",
        **({} if scale is None else {"window_scale": scale.model_dump()}),
        "levels": [float(level) for level in levels],
        "widths": [
            [[_float32_text(v) for v in row] for row in per_level] for per_level in widths.astype(np.float32)
        ],
        "calibration": calibration,
    }


def _calibration_record(ds: Dataset, n_windows: int) -> dict[str, Any]:
    start, end = ds.borders[CALIBRATION_SPLIT]
    return {
        "split": CALIBRATION_SPLIT,
        "rows": [start, end],
        "windows": n_windows,
        "dataset": ds.series.path.name,
        "sha256": ds.series.sha256,
    }


def calibrate_dataset(
    model_path: Path,
    ds: Dataset,
    period: int | None,
    levels: Sequence[float] = DEFAULT_LEVELS,
    batch: int = _BATCH,
) -> dict[str, Any]:
    """The `intervals` block of the graph at `model_path`, calibrated on the data set's validation split
    by the method `select_method` chooses on splits of that split."""
    val = split_forecasts(model_path, ds, ds.val, period, batch)
    std = np.asarray(ds.scaler.std, dtype=np.float64)
    chosen, selection = select_method(val, levels, std)
    widths, scale = fit_method(_METHODS[chosen], val, levels)
    record = {**_calibration_record(ds, len(val.targets)), "method": chosen, "selection": selection}
    return intervals_block(widths, levels, record, scale)


def for_checkpoint(
    model_path: Path, info: dict[str, Any], levels: Sequence[float] = DEFAULT_LEVELS
) -> dict[str, Any] | None:
    """The export's hook: intervals for a graph just exported from a checkpoint, at the `levels` its
    validation windows can calibrate (export/calibration_size.py, logged), or None (logged) when there are
    too few of them or its data set cannot be read (export itself does not need it)."""
    from export.evaluate import load_for_checkpoint

    try:
        ds = load_for_checkpoint(info)
    except (DataError, OSError) as e:
        log.warning("no prediction intervals: the training data cannot be read (%s)", e)
        return None
    kept, note = calibration_plan(ds.val.num_windows, levels)
    (log.info if kept else log.warning)("%s", note)
    if not kept:
        return None
    config = info["model_config"]
    return calibrate_dataset(model_path, ds, config.get("cycle_period"), kept, calibration_batch(config))


# -- an exported version ---------------------------------------------------------------------------


def load_for_manifest(manifest: dict[str, Any], data: Path | None = None) -> Dataset:
    """The data set a version was trained on (or `data`), split the way training split it."""
    d = manifest.get("dataset") or {}
    if data is None and not d:
        raise DataError("the manifest names no data set; pass --data")
    path = data or (resolve(d["path"]) if d.get("path") else ETT_DIR / d["file"])
    options = ReadOptions.from_record(d)
    ds = load_dataset(
        path,
        manifest["input_length"],
        manifest["horizon"],
        mode=d.get("mode", "M"),
        target=d.get("target", "auto"),
        protocol=d.get("protocol", "auto") if data is None else "auto",
        options=options,
    )
    if ds.channels != list(manifest["channels"]):
        raise DataError(
            f"{path.name} gives the columns {ds.channels}; the model needs {manifest['channels']}"
        )
    if data is None and d.get("sha256") and ds.series.sha256 != d["sha256"]:
        raise DataError(f"{path} has changed since training (sha256 differs); pass --data to use it anyway")
    return ds


def publish(source: Path, block: dict[str, Any], version: int | None = None) -> Path:
    """`source` (a version folder) again as a new version of the same model with `block` as its
    intervals: graphs copied byte for byte (their sha256 checked), the manifest otherwise unchanged but
    for version, creation time and where it came from. Published through export/publish.py (a temporary
    folder renamed into place, under the service's folder rule)."""
    manifest = json.loads((source / MANIFEST_FILE).read_text())

    def write(staging: Path, version: int) -> None:
        for name in (MODEL_FILE, INSPECT_FILE):
            shutil.copyfile(source / name, staging / name)
            spec = manifest["files"][name]
            if _sha256(staging / name) != spec["sha256"]:
                raise ValueError(f"{source / name} differs from its manifest's sha256")
        manifest.update(
            version=version,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            intervals=block,
            derived_from={"version": int(source.name), "change": "prediction intervals added"},
        )
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")

    return publish_version(source.parent, write, version or None)


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- evaluation (export/conformal_evaluation.py scores; this writes the report) ------------------------


def write_report(version_dir: Path, out_root: Path, data: Path | None = None) -> Path:
    """Evaluate a version that has intervals on its data set's test split: report.json and bands.png in
    `<out_root>/<model>-v<version>/`; returns that folder."""
    manifest = json.loads((version_dir / MANIFEST_FILE).read_text())
    levels, widths, scale = served_intervals(manifest["intervals"])
    block = manifest["intervals"]
    ds = load_for_manifest(manifest, data)
    period = (manifest.get("cycle") or {}).get("period")
    model_path = version_dir / MODEL_FILE
    batch = calibration_batch(manifest.get("architecture"))
    val = split_forecasts(model_path, ds, ds.val, period, batch)
    test = split_forecasts(model_path, ds, ds.test, period, batch)
    std = np.asarray(ds.scaler.std, dtype=np.float64)
    folder = out_root / f"{manifest['name']}-v{manifest['version']}"
    folder.mkdir(parents=True, exist_ok=True)
    channel = ds.target if ds.target in ds.channels else ds.channels[-1]
    shown = plot_bands(test, widths, levels, ds.channels, channel, folder / "bands.png", scale)
    served = block["calibration"].get("method", "absolute")
    _, selection = select_method(val, levels, std)  # what the rule finds on this version's validation split
    selection = dict(selection)
    splits = selection.pop("splits", [])
    start, end = ds.borders["test"]
    report = {  # checked field by field against IntervalEvaluation (export/reports.py)
        "model": manifest["name"],
        "version": manifest["version"],
        "dataset": ds.series.path.name,
        "horizon": manifest["horizon"],
        "input_length": manifest["input_length"],
        "channels": ds.channels,
        "levels": levels,
        "calibration": block["calibration"],
        "test": {"split": "test", "rows": [start, end], "windows": len(test.targets)},
        "units": "width and interval score in units of each channel's training standard deviation",
        "scale_floor": _SCALE_FLOOR,
        "served_method": served,
        "methods": {m.name: m.description for m in METHODS},
        "selection": selection,
        "selection_splits": splits,
        "variants": evaluate(val, test, levels, widths, std, scale),
        "plot": {"file": "bands.png", "channel": channel, "windows": shown},
        "command": f"python -m export.conformal {portable(version_dir)}",
    }
    save_report(folder / "report.json", build(IntervalEvaluation, report), indent=1)
    return folder


def main(
    version_dir: Annotated[
        Path, typer.Argument(help="an exported version folder, e.g. model_repository/etth1-rsa/2")
    ],
    data: Annotated[
        Path | None, typer.Option(help="CSV to calibrate and evaluate on (default: the training data)")
    ] = None,
    level: Annotated[
        list[float] | None,
        typer.Option(help="a level to calibrate, in percent (repeatable; default 50 80 90 95 99)"),
    ] = None,
    version: Annotated[int | None, typer.Option(help="the new version's number (default: next free)")] = None,
    out: Annotated[Path, typer.Option(help="where the evaluation report goes")] = Path("results/intervals"),
) -> None:
    """Calibrate prediction intervals for an exported version (published as a new version), then
    evaluate them on the test split."""
    version_dir = resolve(version_dir)
    manifest = json.loads((version_dir / MANIFEST_FILE).read_text())
    levels = sorted(level) if level else list(DEFAULT_LEVELS)
    if not all(0 < v < 100 for v in levels) or len(set(levels)) != len(levels):
        typer.echo("error: --level takes distinct percentages strictly between 0 and 100", err=True)
        raise typer.Exit(2)
    try:
        if not manifest.get("intervals"):
            ds = load_for_manifest(manifest, data)
            levels, note = calibration_plan(ds.val.num_windows, levels)
            if not levels:
                raise ValueError(note)
            period = (manifest.get("cycle") or {}).get("period")
            batch = calibration_batch(manifest.get("architecture"))
            block = calibrate_dataset(version_dir / MODEL_FILE, ds, period, levels, batch)
            version_dir = publish(version_dir, block, version)
            typer.echo(
                f"{portable(version_dir)}: intervals at levels {levels} from "
                f"{block['calibration']['windows']} validation windows"
            )
        folder = write_report(version_dir, resolve(out), data)
    except (DataError, FileExistsError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for row in read_report(folder / "report.json", IntervalEvaluation).variants["served"]:
        typer.echo(
            f"level {row.level:g}: test coverage {100 * row.coverage:.1f}%, "
            f"mean width {row.width:.3f}, interval score {row.winkler:.3f}"
        )
    typer.echo(f"wrote {portable(folder)}")


if __name__ == "__main__":
    typer.run(main)
