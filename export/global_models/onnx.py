"""A global REM read-out (export/global_models/model.py's `GlobalModel`) as an ONNX graph and a served model
version.

The graph, its run and its parity check are export/global_models/graph.py's; this module writes the manifest
every global model shares (`panel_manifest`, the transformer's too) and publishes a version
(`export_global`). A history shorter than L is fed with its missing start as NaN: the graph masks those
steps exactly as `GlobalModel.forecast` does, so nothing is ever filled with invented values
(docs/artifacts.md, "Global models").

Given the training series, `calibrate_global` (export/global_models/calibration.py) adds split-conformal
intervals pooled across series, in units of each series' own seasonal-naive error, which the service
computes from the window it forecasts.

    python -m export.panel export --model runs/stores/model.json --name stores --repository model_repository
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.artifacts.contract import (
    COVARIATE_INPUT,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    GLOBAL_READOUT_KIND,
    LOCAL_INPUT,
    LOCAL_WEIGHT_INPUT,
    MANIFEST_FILE,
    MODEL_FILE,
)
from export.global_models.calibration import (
    DEFAULT_LEVELS,
    calibrate_global,
    calibration_report,
    calibration_tail,
    group_coverage,
    history_groups,
    interval_halfwidths,
    readout_spec,
    series_spread,
    windows_needed,
)
from export.global_models.graph import (
    OPSET,
    TOLERANCE,
    check_covariates,
    check_histories,
    frequency_seconds,
    global_graph,
    run_graph,
    verify,
    windows_of,
)
from export.publish import publish_version

if TYPE_CHECKING:
    from app.artifacts.covariates import CovariateLayout
    from app.artifacts.hybrid import LocalSpec
    from export.global_models.model import GlobalModel

__all__ = [  # the graph's and the calibration's names too (export/global_models/graph.py, calibration.py)
    "DEFAULT_LEVELS",
    "GLOBAL_KIND",
    "OPSET",
    "TOLERANCE",
    "calibrate_global",
    "calibration_report",
    "calibration_tail",
    "check_covariates",
    "check_histories",
    "export_global",
    "frequency_seconds",
    "global_graph",
    "group_coverage",
    "history_groups",
    "interval_halfwidths",
    "panel_manifest",
    "readout_spec",
    "run_graph",
    "series_spread",
    "verify",
    "windows_needed",
    "windows_of",
]

GLOBAL_KIND = GLOBAL_READOUT_KIND  # the manifest's `kind`


def panel_manifest(
    *,
    name: str,
    version: int,
    kind: str,
    description: str,
    input_length: int,
    horizon: int,
    channel: str,
    frequency: str | None,
    timezone: str | None,
    min_history: int,
    period: int,
    layout: CovariateLayout | None,
    files: dict[str, Any],
    intervals: dict[str, Any] | None,
    local: LocalSpec | None = None,
) -> dict[str, Any]:
    """What every global model's manifest holds (the read-out's and the transformer's): the graph's
    inputs (`window`, and `covariates` for a covariate model) and output, the frequency and zone, the
    `panel` block the service serves it by, the files and the intervals."""
    L, H = input_length, horizon
    return {
        "name": name,
        "version": version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "kind": kind,
        "description": description,
        "input_length": L,
        "horizon": H,
        "channels": [channel],
        "frequency": frequency,
        **({} if timezone is None else {"timezone": timezone}),
        "frequency_seconds": frequency_seconds(frequency),
        "inputs": [{"name": FORECAST_INPUT, "dtype": "float32", "shape": ["batch", L, 1]}]
        + (
            []
            if layout is None
            else [{"name": COVARIATE_INPUT, "dtype": "float32", "shape": ["batch", layout.width]}]
        )
        + (
            []
            if local is None
            else [
                {"name": LOCAL_INPUT, "dtype": "float32", "shape": ["batch", H]},
                {"name": LOCAL_WEIGHT_INPUT, "dtype": "float32", "shape": ["batch", 1]},
            ]
        ),
        "outputs": [{"name": FORECAST_OUTPUT, "dtype": "float32", "shape": ["batch", H, 1]}],
        "panel": {
            "min_history": min_history,
            "period": period,
            "missing": "nan",
            **({} if layout is None else {"covariates": {**layout.to_json(), "list": layout.describe()}}),
            **({} if local is None else {"local": local.to_json()}),
        },
        "opset": OPSET,
        "files": files,
        # null without the training series to calibrate on (`export --data`)
        "intervals": intervals,
    }


def manifest_of(
    model: GlobalModel,
    name: str,
    version: int,
    channel: str,
    files: dict[str, Any],
    intervals: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cfg = model.config
    manifest = panel_manifest(
        name=name,
        version=version,
        kind=GLOBAL_KIND,
        description=(
            "A global REM read-out (closed-form ridge over a fixed REM bank"
            + ("" if model.lift is None else f" and a fixed random layer of {model.lift.width} ReLU outputs")
            + f") of period {cfg.period}"
            + (
                ""
                if model.local is None
                else f", averaged with {' and '.join(model.local.members)} fitted per series on the last "
                f"{model.local.length} values (the read-out's weight {1 - model.local.share:.3g}"
                + ("" if model.local.tilt is None else ", tilted per series by its features")
                + (f"; {model.local.long_note()}" if model.local.long_period is not None else "")
                + ")"
            )
            + f": forecasts any {model.frequency} series of at least {model.min_history} values, seen in "
            "training or not."
        ),
        input_length=model.window_length,
        horizon=cfg.horizon,
        channel=channel,
        frequency=model.frequency,
        timezone=model.timezone,
        min_history=model.min_history,
        period=cfg.period,
        layout=model.covariates,
        files=files,
        intervals=intervals,
        local=model.local,
    )
    # What the service's fit on request (/v1/.../fit_forecast) refits with (app/artifacts/readout.py).
    manifest["readout"] = readout_spec(model).to_json()
    if model.training is not None:  # the training data's end: a backtest's in-sample cutoffs (how its file
        # was read, `read`, is the exporter's and forecast's, not the service's)
        manifest["panel"]["training"] = {k: v for k, v in model.training.items() if k != "read"}
    manifest["architecture"] = {
        "config": model.to_json()["config"],
        "input_length": model.input_length,
        "search": model.search,
        **({"covariate_report": model.covariate_report} if model.covariate_report else {}),
    }
    return manifest


def export_global(
    model: GlobalModel,
    repository: Path,
    name: str,
    version: int | None = None,
    channel: str = "y",
    intervals: dict[str, Any] | None = None,
    dataset: dict[str, Any] | None = None,
) -> Path:
    """Build the graph, check it against the numpy model, publish a version (with `intervals` from
    `calibrate_global`, or none); returns its folder. `dataset`: the manifest's `dataset` block (what the
    model was trained on: export/pretrained.py names the data's origin and licence there)."""
    import onnx

    from app.artifacts.repository import sha256_of

    def write(staging: Path, number: int) -> None:
        path = staging / MODEL_FILE
        onnx.save(global_graph(model), str(path))
        verification = verify(path, model)
        files = {MODEL_FILE: {"sha256": sha256_of(path), "bytes": path.stat().st_size}}
        manifest = manifest_of(model, name, number, channel, files, intervals)
        manifest["verification"] = {"provider": "CPUExecutionProvider", **verification}
        if dataset is not None:
            manifest["dataset"] = dataset
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")

    return publish_version(Path(repository) / name, write, version)
