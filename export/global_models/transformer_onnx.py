"""The global RSA-Transformer (export/global_models/transformer.py's `PanelTransformer`) as an ONNX graph and
a served model version, and its model file.

The graph takes exactly the global read-out's inputs (export/global_models/onnx.py): `window` float32
[batch, L, 1], raw, NaN where a short history has not started, and for a covariate model `covariates`
float32 [batch, D], raw, in app/artifacts/covariates.py's layout. Everything `PanelTransformer.forecast`
does happens inside it: each window's scale (the mean |value| of its last cycle's observed steps, else of
the window's, else 1), the masked start read as 0, the covariates standardised with the layout's training
mean and std (NaN, a short series' past start, read as 0), the network with every REM and gate folded
into constants for its L (+ H horizon tokens) steps, and the un-scaling. The service therefore serves it
as it serves a global read-out (the manifest's `panel` block and the graph's inputs are all it reads);
the manifest's `kind` is `global_transformer` and it has no `readout` block: a network is not refit on
request (/v1 fit_forecast answers 422 not_refittable). Beside it, `inspect.onnx` (issue 48): the same
graph with the attention matrices as outputs, which /v1 attention reads as a multichannel model's.

The model file (`python -m export.panel train --network transformer`): `model.json` (kind
`rsa-transformer-global`: the panel settings, the network's config, the covariate layout, the training
record, the frequency and zone) and `model.safetensors` beside it, the network's state dict.

    python -m export.panel train --data shops.csv --horizon 7 --future promo --network transformer \
        --out runs/t
    python -m export.panel export --model runs/t/model.json --name shops --repository model_repository
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from app.artifacts.contract import (
    COVARIATE_INPUT,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    GLOBAL_TRANSFORMER_KIND,
    INSPECT_FILE,
    INSPECT_OUTPUTS,
    MANIFEST_FILE,
    MODEL_FILE,
)
from app.artifacts.covariates import CovariateLayout
from app.artifacts.readout import PARITY_TOLERANCE, STILL_SHARE, TINY, scale_errors
from export.global_models.config import PanelConfig
from export.global_models.graph import check_parity
from export.global_models.onnx import check_covariates, check_histories, panel_manifest, windows_of
from export.global_models.transformer_model import Budget, PanelTransformer, covariate_parts
from export.publish import publish_version
from models import Covariates, ModelConfig, RSAForecaster

__all__ = [
    "TOLERANCE",
    "TRANSFORMER_FILE_KIND",
    "TRANSFORMER_KIND",
    "SavedTransformer",
    "TransformerGraph",
    "TransformerInspectGraph",
    "export_transformer",
    "load_transformer",
    "save_transformer",
    "verify_transformer",
]

TRANSFORMER_KIND = GLOBAL_TRANSFORMER_KIND  # the manifest's `kind`
TRANSFORMER_FILE_KIND = "rsa-transformer-global"  # model.json's `kind`
SCHEMA_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
# ONNX Runtime (float32 throughout) against `PanelTransformer.forecast` (float64 scaling around the float32
# network): |onnx − reference| in units of each window's scale (the network's own output unit, so the bound
# means the same for a series near 0.01 and one near 10,000) or the forecast, the larger: the read-out's
# check (export/global_models/graph.py `check_parity`).
TOLERANCE = PARITY_TOLERANCE


class TransformerGraph(nn.Module):
    """Raw window [B, L, 1] (NaN before a short history's start) and, for a covariate model, raw
    covariates [B, D] -> the raw forecast [B, H, 1]: `PanelTransformer.forecast` in tensors."""

    # Buffers registered by name (register_buffer), declared here for the type checker; cov_mean and
    # cov_std only for a covariate model.
    sums: Tensor
    cov_mean: Tensor
    cov_std: Tensor

    def __init__(
        self, network: RSAForecaster, period: int, layout: CovariateLayout | None, mirror: bool = False
    ) -> None:
        super().__init__()
        self.mirror = mirror  # PanelConfig.mirror: a window below zero read as its mirror image
        L = network.cfg.input_length
        last = max(period, 1)
        self.network = network
        self.layout = layout
        sums = torch.zeros(L, 2)  # column 0: the last cycle's steps; column 1: every step
        sums[L - last :, 0] = 1.0
        sums[:, 1] = 1.0
        self.register_buffer("sums", sums)
        self.period = last
        if layout is not None:
            self.register_buffer("cov_mean", torch.tensor(layout.mean, dtype=torch.float32))
            self.register_buffer("cov_std", torch.tensor(layout.std, dtype=torch.float32))

    def forward(self, window: Tensor, covariates: Tensor | None = None) -> Tensor:
        u, cov, scale = self.prepare(window, covariates)
        y = self.network(u, covariates=cov)
        assert isinstance(y, Tensor)
        return self.held(window, y * scale.unsqueeze(-1))  # [B, H, 1]

    def held(self, window: Tensor, forecast: Tensor) -> Tensor:
        """`forecast` [B, H, 1] with each still window's its last cycle repeated (readout.hold_still, the
        read-out graph's `still` nodes); a covariate model's as it is."""
        if self.layout is not None:
            return forecast
        x = window[..., 0]  # [B, L]
        missing = torch.isnan(x)
        mask = (~missing).to(x.dtype)
        x0 = torch.where(missing, torch.zeros_like(x), x)
        L, H = x.shape[1], forecast.shape[1]

        def change(lag: int) -> tuple[Tensor, Tensor, Tensor]:
            both = mask[:, lag:] * mask[:, :-lag]
            pairs = both.sum(1, keepdim=True)
            moved = ((x0[:, lag:] - x0[:, :-lag]).abs() * both).sum(1, keepdim=True)
            cycle = x0[:, [L - lag + h % lag for h in range(H)]]  # [B, H]: the last cycle, repeated
            return moved / torch.clamp(pairs, min=1.0), cycle, pairs

        moved, cycle, _ = change(1)
        if 1 < self.period < L:
            moved_p, cycle_p, pairs_p = change(self.period)
            paired = pairs_p > 0
            moved, cycle = torch.where(paired, moved_p, moved), torch.where(paired, cycle_p, cycle)
        mean_abs = (x0.abs() * mask).sum(1, keepdim=True) / torch.clamp(mask.sum(1, keepdim=True), min=1.0)
        still = moved <= STILL_SHARE * mean_abs  # [B, 1]
        return torch.where(still.unsqueeze(-1), cycle.unsqueeze(-1), forecast)

    def prepare(self, window: Tensor, covariates: Tensor | None) -> tuple[Tensor, Covariates | None, Tensor]:
        """(the normalised window u [B, L, 1], the standardised covariates, what each window's forecast
        is multiplied back by [B, 1]: its scale, 0 for an all-zero window, readout.output_scales')."""
        x = window[..., 0]  # [B, L]
        missing = torch.isnan(x)
        mask = (~missing).to(x.dtype)
        x0 = torch.where(missing, torch.zeros_like(x), x)
        # app/artifacts/readout.py's window_scales: the last cycle's mean |value|, else the window's, else 1
        # (output_scales: else 0, for the forecast)
        sums = x0.abs() @ self.sums  # [B, 2]
        counts = torch.clamp(mask @ self.sums, min=1.0)
        means = sums / counts
        last, whole = means[:, :1], means[:, 1:]
        s = torch.where(last > TINY, last, whole)
        if self.mirror:  # readout's _sign: the mean of the values whose mean |value| gave the scale
            signed = (x0 @ self.sums) / counts
            below = torch.where(last > TINY, signed[:, :1], signed[:, 1:]) < 0
            s = torch.where(below, -s, s)
        ok = s.abs() > TINY
        scale = torch.where(ok, s, torch.ones_like(s))  # [B, 1]
        u = (x0 / scale).unsqueeze(-1)  # [B, L, 1], 0 where missing
        cov = None
        if self.layout is not None:
            if covariates is None:
                raise ValueError("a covariate model takes its covariates")
            z = (covariates - self.cov_mean) / self.cov_std
            z = torch.where(torch.isnan(z), torch.zeros_like(z), z)
            cov = covariate_parts(self.layout, z)
        return u, cov, torch.where(ok, s, torch.zeros_like(s))


class TransformerInspectGraph(TransformerGraph):
    """The forecast and, per layer and head, the softmax, REM and mixed matrices (issue 48): the global
    model's inspect.onnx, the multichannel models' (export/onnx.py `InspectGraph`) outputs for C = 1,
    over its T = L (+ H horizon tokens with future covariates) tokens."""

    def forward(  # type: ignore[override]
        self, window: Tensor, covariates: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        u, cov, scale = self.prepare(window, covariates)
        y, maps = self.network(u, return_attn=True, covariates=cov)
        return self.held(window, y * scale.unsqueeze(-1)), maps["softmax"], maps["rem"], maps["mixed"]


def _export(module: TransformerGraph, path: Path, outputs: Sequence[str] = (FORECAST_OUTPUT,)) -> None:
    """The graph exported as export/onnx.py exports versions 1-3 (`export_graph`): the window, and the
    covariate row where the model reads covariates."""
    from export.onnx import export_graph

    cfg = module.network.cfg
    names = [FORECAST_INPUT] + ([COVARIATE_INPUT] if module.layout is not None else [])
    example: tuple[Tensor, ...] = (torch.zeros(2, cfg.input_length, 1),)
    if module.layout is not None:
        example += (torch.zeros(2, module.layout.width),)
    export_graph(module, example, names, path, outputs)


def transformer_graph(model: PanelTransformer) -> TransformerGraph:
    """The graph module of `model`: a folded copy of its network (every REM and gate a constant)."""
    folded = copy.deepcopy(model.network).eval().fold()
    return TransformerGraph(folded, model.config.period, model.covariates, bool(model.config.mirror)).eval()


def transformer_inspect_graph(model: PanelTransformer) -> TransformerInspectGraph:
    """The inspection graph module of `model`, on a folded copy of its network as `transformer_graph`."""
    folded = copy.deepcopy(model.network).eval().fold()
    return TransformerInspectGraph(
        folded, model.config.period, model.covariates, bool(model.config.mirror)
    ).eval()


def verify_inspect(path: Path, forecast_path: Path, model: PanelTransformer) -> dict[str, Any]:
    """The inspection graph's forecast against the forecast graph's on `_check_set` (ValueError past
    TOLERANCE in units of `PARITY_UNIT`), and its matrices finite."""
    import onnxruntime as ort

    histories, covariates = _check_set(model)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feed = {FORECAST_INPUT: windows_of(histories, model.input_length)}
    if covariates is not None:
        feed[COVARIATE_INPUT] = np.asarray(covariates, dtype=np.float32)
    out = session.run(list(INSPECT_OUTPUTS), feed)
    want = run_transformer_graph(forecast_path, histories, model.input_length, covariates)
    err = scale_errors(np.asarray(out[0])[:, :, 0], want, histories, model.input_length, model.config.period)
    worst = float(err.max())
    if not (worst <= TOLERANCE and all(np.isfinite(a).all() for a in out)):
        raise ValueError(
            f"{INSPECT_FILE}'s forecast differs from {MODEL_FILE}'s by {worst:.3g}; nothing published"
        )
    return {"series": len(histories), "max_error": worst, "tolerance": TOLERANCE}


def _check_set(model: PanelTransformer) -> tuple[list[np.ndarray], np.ndarray | None]:
    """export/global_models/onnx.py's check histories (every length from min_history to past L, levels from
    0.01 to 10,000, a constant and an all-zero series) with a large and a tiny constant one, two below
    zero (the mirror's sign, where the model has it), and random raw covariate rows (the past start NaN
    where a history is shorter than L)."""
    L, low = model.input_length, model.config.history
    histories = check_histories(L, model.config.period, low)
    histories += [np.full(L, 1e4), np.full(low, 1e-2), -histories[0], -histories[1]]
    return histories, check_covariates(model.covariates, histories)


def run_transformer_graph(
    path: Path, histories: Sequence[np.ndarray], length: int, covariates: np.ndarray | None = None
) -> np.ndarray:
    """ONNX Runtime's forecasts [S, H] of the graph at `path` (CPU)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feed = {FORECAST_INPUT: windows_of(histories, length)}
    if covariates is not None:
        feed[COVARIATE_INPUT] = np.asarray(covariates, dtype=np.float32)
    (out,) = session.run([FORECAST_OUTPUT], feed)
    return np.asarray(out)[:, :, 0]


def verify_transformer(path: Path, model: PanelTransformer) -> dict[str, Any]:
    """ONNX Runtime against `PanelTransformer.forecast` on `_check_set` (with random covariates for a
    covariate model); raises ValueError past TOLERANCE (in units of `PARITY_UNIT`)."""
    histories, covariates = _check_set(model)
    want = model.forecast(histories, covariates=covariates)
    got = run_transformer_graph(path, histories, model.input_length, covariates)
    return check_parity(
        got, want, histories, model.input_length, model.config.period, "PanelTransformer.forecast", TOLERANCE
    )


def _inspect_io(path: Path) -> list[dict[str, Any]]:
    from export.onnx import _io

    return _io(path)


def _forbidden(path: Path) -> list[str]:
    from export.onnx import forbidden_nodes

    return forbidden_nodes(path)


def describe(model: PanelTransformer, frequency: str | None) -> str:
    cfg = model.network.cfg
    layout = model.covariates
    reads = "" if layout is None else f", reading {len(layout.describe())} covariates"
    what = "RSA-Transformer (REM heads mixed with softmax attention)" if model.rem else "Transformer"
    return (
        f"A global {what} of period {model.config.period}: {cfg.n_layers} layer of {cfg.n_heads} heads, "
        f"d_model {cfg.d_model}, {model.parameters} parameters{reads}; forecasts any {frequency} series "
        f"of at least {model.config.history} values, seen in training or not, each window scaled by its "
        "own last cycle. Not refittable on request."
    )


def export_transformer(
    saved: SavedTransformer,
    repository: Path,
    name: str,
    version: int | None = None,
    channel: str = "y",
    intervals: dict[str, Any] | None = None,
) -> Path:
    """Export the graph, check it against `PanelTransformer.forecast` (refusing to publish past
    TOLERANCE), publish a version (with `intervals`, or none); returns its folder."""
    import onnx
    import onnxruntime as ort

    from app.artifacts.repository import sha256_of

    model = saved.model
    graph = transformer_graph(model)

    def write(staging: Path, number: int) -> None:
        path = staging / MODEL_FILE
        _export(graph, path)
        onnx.checker.check_model(str(path), full_check=True)
        bad = _forbidden(path)
        if bad:
            raise ValueError(f"{MODEL_FILE} still computes REM/gate values: {bad[:5]}")
        verification = verify_transformer(path, model)
        # The inspection graph (issue 48): what /v1 attention reads, as for the multichannel models.
        inspect_path = staging / INSPECT_FILE
        _export(transformer_inspect_graph(model), inspect_path, INSPECT_OUTPUTS)
        onnx.checker.check_model(str(inspect_path), full_check=True)
        bad = _forbidden(inspect_path)
        if bad:
            raise ValueError(f"{INSPECT_FILE} still computes REM/gate values: {bad[:5]}")
        verification["inspect"] = verify_inspect(inspect_path, path, model)
        files = {p.name: {"sha256": sha256_of(p), "bytes": p.stat().st_size} for p in (path, inspect_path)}
        manifest = panel_manifest(
            name=name,
            version=number,
            kind=TRANSFORMER_KIND,
            description=describe(model, saved.frequency),
            input_length=model.input_length,
            horizon=model.config.horizon,
            channel=channel,
            frequency=saved.frequency,
            timezone=saved.timezone,
            min_history=model.config.history,
            period=model.config.period,
            layout=model.covariates,
            files=files,
            intervals=intervals,
        )
        manifest["inspect_outputs"] = _inspect_io(inspect_path)
        manifest["layers"] = model.network.recurrence_report()
        manifest["architecture"] = {
            "config": model.network.cfg.to_dict(),
            "panel_config": asdict(model.config),
            "rem": model.rem,
            "parameters": model.parameters,
            "training": _record(model),
        }
        manifest["verification"] = {
            "provider": "CPUExecutionProvider",
            "onnx": onnx.__version__,
            "onnxruntime": ort.__version__,
            "torch": torch.__version__,
            **verification,
        }
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")

    return publish_version(Path(repository) / name, write, version)


# -- training from the CLI ----------------------------------------------------------------------------


# -- the model file ----------------------------------------------------------------------------------


@dataclass
class SavedTransformer:
    """A trained global transformer with what its data said: the frequency and the zone its local times
    were read in (None: UTC or offsets)."""

    model: PanelTransformer
    frequency: str | None = None
    timezone: str | None = None


# PanelTransformer's fields that are not its network, settings or layout: the training record (held-out
# forecasts and what calibration needs included), saved as JSON (arrays as lists) and read back by name.
_OWN_FIELDS = ("config", "network", "rem", "budget", "covariates")


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return {"ndarray": v.tolist()}
    if isinstance(v, float) and not np.isfinite(v):
        return None  # inf: never validated
    return v


def _record(model: PanelTransformer) -> dict[str, Any]:
    out = {f.name: _jsonable(getattr(model, f.name)) for f in fields(model) if f.name not in _OWN_FIELDS}
    out["fit_seconds"] = round(model.fit_seconds, 3)
    return {"budget": asdict(model.budget), **out}


def _from_record(d: dict[str, Any]) -> dict[str, Any]:
    """The record's fields as PanelTransformer takes them (arrays, tuples, inf where null)."""
    out: dict[str, Any] = {}
    if "drop" in d and "read" not in d:  # a model.json of before `read`: it recorded the columns left out
        out["read"] = {"drop": d["drop"]}
    for f in fields(PanelTransformer):
        if f.name in _OWN_FIELDS or f.name not in d:
            continue
        v = d[f.name]
        if isinstance(v, dict) and set(v) == {"ndarray"}:
            v = np.asarray(v["ndarray"], dtype=np.float64)
        elif v is None and isinstance(f.default, float):
            v = f.default
        elif isinstance(v, list) and isinstance(f.default, tuple):
            v = tuple(v)
        out[f.name] = v
    return out


def save_transformer(saved: SavedTransformer, path: Path) -> Path:
    """`path` (model.json) and model.safetensors beside it (the network's state dict)."""
    from safetensors.torch import save_file

    model = saved.model
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.network.state_dict().items()}
    save_file(state, str(path.with_name(WEIGHTS_FILE)))
    info = {
        "kind": TRANSFORMER_FILE_KIND,
        "schema_version": SCHEMA_VERSION,
        "config": asdict(model.config),
        "model_config": model.network.cfg.to_dict(),
        "rem": model.rem,
        "weights": WEIGHTS_FILE,
        "frequency": saved.frequency,
        "timezone": saved.timezone,
        "covariates": None if model.covariates is None else model.covariates.to_json(),
        "training": _record(model),
    }
    path.write_text(json.dumps(info) + "\n")
    return path


def is_transformer_file(path: Path) -> bool:
    """Whether `path` is a model.json written by `save_transformer` (else: a global read-out's)."""
    try:
        return json.loads(Path(path).read_text()).get("kind") == TRANSFORMER_FILE_KIND
    except (OSError, ValueError, AttributeError):
        return False


def load_transformer(path: Path) -> SavedTransformer:
    from safetensors.torch import load_file

    path = Path(path)
    d = json.loads(path.read_text())
    if d.get("kind") != TRANSFORMER_FILE_KIND or d.get("schema_version") != SCHEMA_VERSION:
        found = f"{d.get('kind')!r}, schema {d.get('schema_version')!r}"
        raise ValueError(f"not a global transformer of schema {SCHEMA_VERSION}: {found}")
    network = RSAForecaster(ModelConfig.from_dict(d["model_config"]))
    network.load_state_dict(load_file(str(path.with_name(d["weights"]))))
    network.eval()
    training = d.get("training") or {}
    model = PanelTransformer(
        config=PanelConfig(**d["config"]),
        network=network,
        rem=bool(d["rem"]),
        budget=Budget(**training.get("budget", {})),
        covariates=None if d.get("covariates") is None else CovariateLayout.from_json(d["covariates"]),
        **_from_record(training),
    )
    return SavedTransformer(model, d.get("frequency"), d.get("timezone"))
