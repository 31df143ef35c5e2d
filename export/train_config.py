"""A training run's settings (`TrainConfig`, read from a YAML config with `--set` overrides by
`load_config`), what only its data can decide (`resolve_auto`: the cycle, the heads' season, `auto`
sizes), how it reads its file (`read_options`), what a checkpoint keeps of the data (`data_meta`), and
the optimiser's settings every gradient training shares (`param_groups`, `warmup_cosine`).

`python -m export.train` (export/train.py) trains with them; export/global_models/transformer.py,
export/sweep.py and the benchmarks read them without importing the training loop.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from app.artifacts.contract import CALENDAR_FREQUENCY
from export.bank import expand_bank
from export.cycle import dominant_period
from export.data import READ_OPTIONS, Dataset, ReadOptions
from export.naive import season
from export.nonnegative import resolve_nonnegative, undeclared
from export.paths import REPO_ROOT, portable
from models import ModelConfig, RSAForecaster

#: The config `python -m export.train` uses when none is given: the recipe for your own data.
OWN_DATA_CONFIG = REPO_ROOT / "configs" / "own-data.yaml"

# Which config for which data: printed by the CLI when it picks one, and in the README.
CONFIG_RULE = (
    "which config: your own data: none (configs/own-data.yaml, version 4's REM read-out recipe reading its "
    "cycle, θ and dilations off your data); ETTh1/ETTh2 as published: configs/etth1-rem-readout.yaml (the "
    "shipped model); configs/etth1-rem-readout-trained.yaml, configs/etth1-rsa.yaml and "
    "configs/etth1-transformer.yaml reproduce earlier versions"
)


class TrainingError(RuntimeError):
    """No usable checkpoint: training diverged, or the model settings cannot build a model."""


@dataclass
class TrainConfig:
    name: str = ""  # run name; empty: <data>-<variant>-h<horizon>-s<seed>
    data: str = "data/ETT/ETTh1.csv"  # relative paths are relative to the repo root
    mode: str = "M"  # M: all columns in and out; S: the target only
    target: str = "auto"  # auto: OT if the file has it, else its one numeric column (else an error)
    timestamp_column: str | None = None  # None: a column named date/time/timestamp/datetime, or the first
    drop: list[str] = field(default_factory=list)  # columns to leave out (text, identifiers)
    keep: list[str] = field(default_factory=list)  # the only value columns to use; empty: all but `drop`
    fill: str = "none"  # missing values and steps: none (an error naming the lines), linear, ffill
    date_format: str | None = None  # e.g. "%d/%m/%Y"; None: the format that reads the column
    dayfirst: bool | None = None  # dates like 01/02/2015: true day first, false month first; None: refuse
    # IANA zone of timestamps written without offset (e.g. Europe/Berlin): local times, daylight saving
    # understood; the manifest keeps it and the cycle follows its wall clock. None: timestamps are UTC.
    timezone: str | None = None
    # Channels whose interval bounds are clipped at 0: auto (those with no negative value and at least
    # 5% zeros in the training rows), none, all, or a list of names (export/nonnegative.py).
    nonnegative: str | list[str] = "auto"
    protocol: str = "auto"  # ETT split for ETT files, chronological 70/10/20 otherwise
    variant: str = "rsa"  # rsa, or baseline: same network, no REM, learned positional encoding
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig fields (channels comes from the data)
    epochs: int = 8  # 0 trains nothing: the model is its closed-form start (needs select_step0)
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.05
    rem_lr_mult: float = 1.0  # learning-rate multiplier for η, ν, θ and μ
    # learned: the residual linear path trains with the rest. least_squares: it is set to its ridge
    # solution on the training windows and frozen, and the attention head starts at zero, so the
    # network starts as the least-squares linear model (export/linear_fit.py).
    linear_path: str = "learned"
    ridge: float = 1.0  # L2 penalty of the least-squares fit (normalised units)
    # learned: the head starts at PyTorch's random init. least_squares: at its ridge solution on the
    # features the untrained network gives every training window (export/linear_fit.fit_head).
    readout: str = "learned"
    readout_ridge: float = 1.0
    # The untrained network (step 0) as a selection candidate: a trained epoch replaces the best model
    # only when it improves validation MSE by at least min_gain (relative), so long horizons keep the
    # least-squares start when training improves validation by a hair (rsa.md §7).
    select_step0: bool = False
    min_gain: float = 0.0
    # Report beside the run what a full least-squares map L→H (with the cycle) scores at the same L.
    reference_least_squares: bool = False
    # For a model read at its last step: report the read-out refitted on the REM half alone, the softmax
    # half alone, both, and the last value alone (export/readout.py), at step 0.
    readout_ablation: bool = False
    patience: int = 3  # early stopping: epochs without a better validation MSE
    seed: int = 0
    threads: int = 0  # 0: the CPUs this process may run on
    out: str = "results/runs"
    max_train_windows: int = 0  # 0: every window each epoch; >0: a random subset (smoke tests)
    plot_windows: int = 3
    progress: bool = True  # progress bars on a terminal, one plain line per epoch otherwise

    def __post_init__(self) -> None:
        if self.variant not in ("rsa", "baseline"):
            raise ValueError(f"variant must be 'rsa' or 'baseline', got {self.variant!r}")
        if self.linear_path not in ("learned", "least_squares"):
            raise ValueError(f"linear_path must be 'learned' or 'least_squares', got {self.linear_path!r}")
        if self.linear_path == "least_squares" and not (
            self.model.get("linear_residual", True) and self.model.get("revin", True)
        ):
            raise ValueError("linear_path least_squares needs model.linear_residual and model.revin")
        if self.readout not in ("learned", "least_squares"):
            raise ValueError(f"readout must be 'learned' or 'least_squares', got {self.readout!r}")
        if self.readout == "least_squares" and not self.model.get("revin", True):
            raise ValueError("readout least_squares needs model.revin")
        if self.readout_ablation and (self.model.get("head") != "state" or not self.model.get("revin", True)):
            raise ValueError(
                "readout_ablation needs a model read at its last step (model.head: state) with revin"
            )
        for name in ("ridge", "readout_ridge", "min_gain"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("batch_size", "patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.epochs < 0 or (self.epochs == 0 and not self.select_step0):
            raise ValueError(
                f"epochs must be >= 1, or 0 with select_step0 (the untrained model is the result), "
                f"got {self.epochs}"
            )
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        unknown = set(self.model) - {f.name for f in dataclasses.fields(ModelConfig)}
        if unknown:
            raise ValueError(f"unknown model settings {sorted(unknown)}")
        period = self.model.get("cycle_period", 0)
        if period != "auto" and (not isinstance(period, int) or isinstance(period, bool) or period < 0):
            raise ValueError(f"model.cycle_period must be 'auto' or an integer >= 0, got {period!r}")
        theta = self.model.get("theta_init")
        if theta is not None and theta != "auto" and not isinstance(theta, int | float):
            raise ValueError(f"model.theta_init must be 'auto', a number or null, got {theta!r}")
        length = self.model.get("input_length", 1)
        if length != "auto" and (not isinstance(length, int) or isinstance(length, bool) or length < 1):
            raise ValueError(f"model.input_length must be 'auto' or a positive integer, got {length!r}")
        if length == "auto" and "least_squares" not in (self.linear_path, self.readout):
            raise ValueError(
                "model.input_length auto compares the least-squares start at each length: it needs "
                "linear_path or readout least_squares"
            )

    @property
    def horizon(self) -> int:
        return int(self.model.get("horizon", ModelConfig.horizon))

    @property
    def input_length(self) -> int:
        """The window length (after `choose_input_length`, when the config says auto)."""
        length = self.model.get("input_length", ModelConfig.input_length)
        if length == "auto":
            raise ValueError("model.input_length is auto: choose_input_length resolves it")
        return int(length)

    @property
    def run_name(self) -> str:
        return self.name or f"{Path(self.data).stem.lower()}-{self.variant}-h{self.horizon}-s{self.seed}"


def _parse_value(text: str) -> Any:
    return yaml.safe_load(text)  # numbers, booleans, lists as YAML reads them


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """A YAML file, then `key=value` overrides (dotted keys reach into `model`)."""
    raw: dict[str, Any] = {}
    if path is not None:
        raw = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a mapping of settings")
    raw.setdefault("model", {})
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not key=value")
        target = raw
        *parents, leaf = key.strip().split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = _parse_value(value)
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}; known: {sorted(known)}")
    return TrainConfig(**raw)


def warmup_cosine(total_steps: int, warmup: float = 0.05) -> Callable[[int], float]:
    """LR factor: linear warm-up over the first 5% of steps, then cosine decay to zero."""
    w = max(1, int(total_steps * warmup))

    def factor(step: int) -> float:
        if step < w:
            return (step + 1) / w
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - w) / max(1, total_steps - w))))

    return factor


def param_groups(model: RSAForecaster, cfg: TrainConfig) -> list[dict[str, Any]]:
    """Weight decay on matrices only (nanoGPT's rule); the REM scalars and gates (η, ν, θ, μ) get no
    decay and their own learning-rate multiplier: a handful of scalars behind saturating squashes."""
    rem = {n for n, _ in model.named_parameters() if ".rem." in n or n.endswith(".mu")}
    named = list(model.named_parameters())

    def decayed(n: str, p: torch.nn.Parameter) -> bool:  # the cycle table is a profile, not a map
        return p.dim() >= 2 and n != "cycle"

    return [
        {"params": [p for n, p in named if n not in rem and decayed(n, p)], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in named if n not in rem and not decayed(n, p)], "weight_decay": 0.0},
        {"params": [p for n, p in named if n in rem], "weight_decay": 0.0, "lr": cfg.lr * cfg.rem_lr_mult},
    ]


def resolve_auto(cfg: TrainConfig, ds: Dataset) -> TrainConfig:
    """``model.cycle_period: auto`` becomes the training data's dominant period (up to the window
    length), or 0 for data that steps calendar months (a cycle's phase counts fixed steps). The season
    of the REM heads (``model.theta_init: auto``, and the cyclic and dilated heads of a ``rem_bank``) is
    that cycle, or without one the data's season (`export.naive.season`: a calendar year of monthly
    data, else the dominant period). A theta_init left unset in a model with a cycle starts at 2π over
    the cycle too: the cyclic heads start at the data's season, not at the 2π/24 of hourly data.
    ``model.n_heads: auto`` becomes the number of heads in ``rem_bank``, ``model.d_model: auto`` n_heads
    (one dimension per head), so that a bank's size is stated once."""
    model = dict(cfg.model)
    calendar = CALENDAR_FREQUENCY.fullmatch(ds.series.frequency) is not None
    if calendar and model.get("cycle_period") == "auto":
        model["cycle_period"] = 0
    if model.get("cycle_period") and calendar:
        # A cycle's phase counts fixed steps since the epoch (docs/artifacts.md); months have none.
        raise ValueError(
            f"model.cycle_period is {model['cycle_period']!r}, but {ds.series.name} steps calendar months "
            f"({ds.series.frequency}); seasonal cycles need a fixed step: set model.cycle_period to 0 or auto"
        )
    if model.get("cycle_period") == "auto":
        model["cycle_period"] = dominant_period(ds.train.data, cfg.input_length)
    cycle = int(model.get("cycle_period") or 0)

    def heads_season() -> int:
        return cycle or season(ds)[0]

    if model.get("theta_init") == "auto":
        model["theta_init"] = 2 * math.pi / heads_season()
    elif "theta_init" not in model and cycle:
        model["theta_init"] = 2 * math.pi / cycle
    if model.get("rem_bank"):
        spec = model["rem_bank"]
        needs = isinstance(spec, dict) and (spec.get("cyclic") or spec.get("dilated"))
        bank = expand_bank(spec, heads_season() if needs else cycle)
        if model.get("n_heads") == "auto":
            model["n_heads"] = len(bank)
        # the baseline has no REM heads, only their number
        model["rem_bank"] = [] if cfg.variant == "baseline" else bank
    if model.get("d_model") == "auto":
        model["d_model"] = model.get("n_heads", ModelConfig.n_heads)
    for name in ("n_heads", "d_model"):
        if model.get(name) == "auto":
            raise ValueError(f"model.{name}: auto needs model.rem_bank (the heads it counts)")
    return dataclasses.replace(cfg, model=model)


def read_options(cfg: TrainConfig) -> ReadOptions:
    """How the run reads its file (`READ_OPTIONS`): the one object load_dataset takes; a checkpoint keeps
    its `record()`."""
    return ReadOptions(**{key: getattr(cfg, key) for key in READ_OPTIONS}, timezone=cfg.timezone)


def data_meta(ds: Dataset, path: Path, cfg: TrainConfig) -> dict[str, Any]:
    """What a checkpoint keeps of its data: where it came from, how it was read (so that evaluation and
    export read it the same way), its split, channels, frequency, the channels that are never negative
    (and how that was decided) and scaler."""
    nonnegative, how = resolve_nonnegative(cfg.nonnegative, ds)
    return {
        "name": ds.series.name,
        "path": portable(path),
        "sha256": ds.series.sha256,
        "mode": ds.mode,
        "target": ds.target,
        "protocol": ds.protocol,
        "borders": ds.borders,
        "channels": ds.channels,
        "frequency": ds.series.frequency,
        "frequency_seconds": ds.series.frequency_seconds,
        **read_options(cfg).record(),
        "date_format_read": ds.series.date_format,
        "inserted_steps": ds.series.inserted_steps,
        "nonnegative": nonnegative,
        "nonnegative_rule": how,
        "never_negative": undeclared(ds, []),  # no negative value in the training rows (the CLI's hint)
        "notes": list(ds.series.notes),
        "scaler": ds.scaler.to_dict(),
    }
