"""Train an RSA forecaster (or its no-REM baseline) and write checkpoint, report and plot.

    python -m export.train --data my.csv --target sales              # configs/own-data.yaml
    python -m export.train configs/etth1-rsa.yaml --horizon 192 --seed 1
    python -m export.train configs/etth1-rsa.yaml --variant baseline --set model.d_model=64

A run folder (default results/runs/<name>/) receives checkpoint.safetensors (best validation epoch),
report.json (config, per-epoch losses, test MSE/MAE, wall time, seed, data hash, learned gates and
λ/γ/θ) and forecast.png (forecasts against the truth on a few test windows).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
import yaml
from tqdm.auto import tqdm

from app.artifacts.contract import CALENDAR_FREQUENCY
from export.bank import expand_bank
from export.calibration_size import calibration_plan
from export.checkpoint import load_checkpoint, save_checkpoint
from export.conformal import DEFAULT_LEVELS
from export.cycle import dominant_period, fit_cycle
from export.data import READ_OPTIONS, DataError, Dataset, ReadOptions, load_csv, load_dataset, split_series
from export.evaluate import evaluate, predict
from export.linear_fit import fit_head, fit_linear_path
from export.naive import UNITS, naive_references, season
from export.naive import summary as naive_summary
from export.nonnegative import resolve_nonnegative, undeclared
from export.paths import REPO_ROOT, portable, resolve
from export.plots import plot_forecasts
from export.readout import ABLATION_MODES, readout_report
from export.reports import InputLengthSearch, TrainingReport, build, read_report, write_report
from export.results import describe_heads
from models import ModelConfig, RSAForecaster

__all__ = ["OWN_DATA_CONFIG", "TrainConfig", "TrainingError", "load_config", "train"]

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


@torch.no_grad()
def least_squares_reference(cfg: TrainConfig, ds: Dataset) -> dict[str, float | list[float]]:
    """What a full least-squares map L→H scores at this run's L, with the same seasonal cycle and RevIN:
    the reference a recurrence must beat to earn its place (its test MSE is reported, never used):
    train, validation (every window and per rolling origin, export/readout.py) and test MSE."""
    period = int(cfg.model.get("cycle_period") or 0)
    ref = RSAForecaster(
        ModelConfig(
            input_length=cfg.input_length,
            horizon=cfg.horizon,
            channels=len(ds.channels),
            d_model=1,
            n_heads=1,
            rem_heads=(0, 0, 0, 0, 0, 0),
            head="last",
            cycle_period=period,
        )
    )
    if ref.cycle is not None:
        fit_cycle(ref, ds.train)
    return {"ridge": cfg.ridge, **readout_report(ref, ds, cfg.ridge, modes=("window",))["window"]}


def build_model(cfg: TrainConfig, channels: int) -> RSAForecaster:
    mcfg = ModelConfig.from_dict({**cfg.model, "channels": channels})
    return RSAForecaster(mcfg.baseline() if cfg.variant == "baseline" else mcfg)


def untrained(cfg: TrainConfig, ds: Dataset) -> RSAForecaster:
    """The network built (seeded) with its seasonal cycle fit and nothing else: what training starts
    from, and what export/sweep.py refits read-outs on."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, len(ds.channels))
    if model.cycle is not None:
        fit_cycle(model, ds.train)
    return model


def start_network(
    cfg: TrainConfig, ds: Dataset, report_linear: bool = True
) -> tuple[RSAForecaster, dict | None, dict | None]:
    """The network before its first gradient step: `untrained`, then its linear path (then frozen, the
    head at zero) or readout set to their least-squares solutions where the config asks, with those
    fits' numbers. `report_linear`: also score the linear path alone on validation and test (a reference
    the report keeps, never used to choose anything)."""
    model = untrained(cfg, ds)
    linear_fit = None
    if cfg.linear_path == "least_squares":
        linear_fit = {"ridge": cfg.ridge, "train_mse": fit_linear_path(model, ds.train, cfg.ridge)}
        assert model.linear is not None  # fit_linear_path refuses a model without it
        model.linear.requires_grad_(False)
        torch.nn.init.zeros_(model.head.weight)
        torch.nn.init.zeros_(model.head.bias)
        # The network at step 0 is the least-squares linear model (with the cycle): a reference for
        # what the attention stack adds.
        if report_linear:
            linear_fit["val_mse"] = evaluate(model, ds.val)["mse"]
            linear_fit["test_mse"] = evaluate(model, ds.test)["mse"]
    readout_fit = None
    if cfg.readout == "least_squares":
        readout_fit = {"ridge": cfg.readout_ridge, "train_mse": fit_head(model, ds.train, cfg.readout_ridge)}
    return model, linear_fit, readout_fit


#: The window lengths `model.input_length: auto` compares: the long-term forecasting literature's.
INPUT_LENGTHS = (96, 192, 336, 512)


def choose_input_length(cfg: TrainConfig) -> tuple[TrainConfig, dict[str, Any]]:
    """`model.input_length: auto`: among INPUT_LENGTHS that the file's splits can hold, the one whose
    least-squares start (`start_network`) scores the lowest validation MSE. Every length is scored on the
    same validation targets (the validation split's windows end on the same rows whatever L), and the
    test split is not looked at. Returns the config with that length, and the comparison."""
    data_path = resolve(cfg.data)
    series = load_csv(data_path, read_options(cfg))
    scores: dict[str, float | str] = {}
    for length in INPUT_LENGTHS:
        trial = dataclasses.replace(cfg, model={**cfg.model, "input_length": length})
        try:
            ds = split_series(series, length, trial.horizon, cfg.mode, cfg.target, cfg.protocol)
        except DataError:
            scores[str(length)] = "too long for the file"
            continue
        try:
            model, _, _ = start_network(resolve_auto(trial, ds), ds, report_linear=False)
        except ValueError as e:
            scores[str(length)] = f"not built: {e}"
            continue
        scores[str(length)] = evaluate(model, ds.val)["mse"]
    scored = {k: v for k, v in scores.items() if isinstance(v, float)}
    if not scored:
        raise DataError(
            f"{data_path.name}: no window length of {list(INPUT_LENGTHS)} fits the file with horizon "
            f"{cfg.horizon} ({scores}); give a shorter one with --input-length, or a shorter --horizon"
        )
    chosen = int(min(scored, key=lambda k: scored[k]))
    search = {
        "rule": "the lowest validation MSE of the least-squares start",
        "validation_mse": scores,
        "chosen": chosen,
    }
    return dataclasses.replace(cfg, model={**cfg.model, "input_length": chosen}), search


def _say(line: str) -> None:
    """A progress line on stderr (where tqdm's bars go on a terminal)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def selection_note(cfg: TrainConfig, best: dict[str, Any], history: list[dict], step0: dict | None) -> str:
    """Which network the checkpoint holds and why: an epoch, or the untrained network (step 0)."""
    if best["epoch"] == 0:
        assert step0 is not None
        trained = min(history, key=lambda h: h["val_mse"]) if history else None
        beaten = (
            f"; the best trained epoch, {trained['epoch']}, reached {trained['val_mse']:.4f}"
            if trained is not None
            else ""
        )
        return (
            "kept step 0, the network before any gradient step (its readout fit by least squares): "
            f"validation MSE {step0['val_mse']:.4f}, and no epoch improved on it by the required "
            f"{cfg.min_gain:.1%}{beaten}"
        )
    stopped = (
        f"; stopped after {cfg.patience} epoch(s) without improvement" if len(history) < cfg.epochs else ""
    )
    return (
        f"kept epoch {best['epoch']} of {len(history)}: the lowest validation MSE, {best['val_mse']:.4f}"
        + stopped
    )


def prepare(cfg: TrainConfig) -> tuple[TrainConfig, Dataset, dict[str, Any] | None]:
    """The run's config with every `auto` resolved (`model.input_length` by `choose_input_length`), its
    data set, and that input-length search (None without one); the model settings are judged here,
    before any fit."""
    search = None
    if cfg.model.get("input_length") == "auto":
        cfg, search = choose_input_length(cfg)
    ds: Dataset = load_dataset(
        resolve(cfg.data),
        cfg.input_length,
        cfg.horizon,
        mode=cfg.mode,
        target=cfg.target,
        protocol=cfg.protocol,
        options=read_options(cfg),
    )
    try:
        cfg = resolve_auto(cfg, ds)
        resolve_nonnegative(cfg.nonnegative, ds)  # a declared channel that is not, before any training
        build_model(cfg, len(ds.channels))
    except ValueError as e:  # settings that only the data or the whole model config can judge
        raise TrainingError(f"model settings: {e}") from None
    return cfg, ds, search


def train(cfg: TrainConfig) -> Path:
    """Train, keep the best validation epoch, test it; returns the run folder."""
    t_start = time.perf_counter()
    threads = cfg.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(cfg.seed)
    cfg, ds, search = prepare(cfg)
    data_path = resolve(cfg.data)
    # Bars on a terminal; in a log (stderr not a terminal) they would be escape codes: one line per epoch.
    bars = cfg.progress and sys.stderr.isatty()
    lines = cfg.progress and not bars
    # The linear path's test MSE is reported, never used to choose anything.
    model, linear_fit, readout_fit = start_network(cfg, ds)
    reference = least_squares_reference(cfg, ds) if cfg.reference_least_squares else None
    # What each half of the layer gives a refitted read-out, at step 0 (export/readout.py).
    readout_ablation = (
        readout_report(model, ds, cfg.readout_ridge, ABLATION_MODES) if cfg.readout_ablation else None
    )
    run_dir = resolve(cfg.out) / cfg.run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt_path = run_dir / "checkpoint.safetensors"
    ckpt_path.unlink(missing_ok=True)  # a reused run folder must not lend this run an old checkpoint

    opt = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr)
    n_train = ds.train.num_windows
    per_epoch = min(n_train, cfg.max_train_windows) if cfg.max_train_windows else n_train
    steps_per_epoch = math.ceil(per_epoch / cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(cfg.epochs * steps_per_epoch))
    meta = {"train_config": dataclasses.asdict(cfg), "data": data_meta(ds, data_path, cfg)}
    windows = {"train": n_train, "val": ds.val.num_windows, "test": ds.test.num_windows}
    _, calibration = calibration_plan(windows["val"], DEFAULT_LEVELS)
    if lines:
        _say(
            f"{cfg.run_name}: windows of L = {cfg.input_length} in, H = {cfg.horizon} out: train "
            f"{windows['train']}, validation {windows['val']}, test {windows['test']}; {calibration}"
        )

    history: list[dict[str, float]] = []
    best = {"val_mse": math.inf, "epoch": -1}
    step0 = None
    if cfg.select_step0:
        # The untrained network's test MSE is reported, never used to choose anything.
        step0 = {"val_mse": evaluate(model, ds.val)["mse"], "test_mse": evaluate(model, ds.test)["mse"]}
        best = {"val_mse": step0["val_mse"], "epoch": 0}
        save_checkpoint(ckpt_path, model, meta)
        if lines:
            _say(f"{cfg.run_name}: step 0 (before training, a candidate): val MSE {step0['val_mse']:.4f}")
    bad_epochs = 0
    epochs_bar = tqdm(range(cfg.epochs), desc=cfg.run_name, unit="epoch", disable=not bars)
    for epoch in epochs_bar:
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(n_train, generator=gen)[:per_epoch]
        running, seen = 0.0, 0
        batches = tqdm(order.split(cfg.batch_size), leave=False, unit="batch", disable=not bars)
        for idx in batches:
            pred, y = predict(model, ds.train, idx)
            loss = torch.nn.functional.mse_loss(pred, y)
            opt.zero_grad(set_to_none=True)
            if not math.isfinite(loss.item()):
                raise TrainingError(
                    f"epoch {epoch + 1}: training loss is {loss.item()}; lower lr or check the data"
                )
            loss.backward()
            opt.step()
            sched.step()
            running += loss.item() * len(idx)
            seen += len(idx)
            batches.set_postfix(loss=f"{running / seen:.4f}")
        val = evaluate(model, ds.val)
        seconds = time.perf_counter() - t0
        history.append(
            {
                "epoch": epoch + 1,
                "train_loss": running / seen,
                "val_mse": val["mse"],
                "val_mae": val["mae"],
                "lr_end": float(sched.get_last_lr()[0]),  # cfg.lr (a float) times the schedule factor
                "seconds": seconds,
            }
        )
        improved = val["mse"] < best["val_mse"] * (1.0 - cfg.min_gain)
        if improved:
            best = {"val_mse": val["mse"], "epoch": epoch + 1}
            save_checkpoint(ckpt_path, model, meta)
            bad_epochs = 0
        else:
            bad_epochs += 1
        epochs_bar.set_postfix(train=f"{running / seen:.4f}", val=f"{val['mse']:.4f}", best=best["epoch"])
        if lines:
            holder = "step 0" if best["epoch"] == 0 else f"epoch {best['epoch']}"
            kept = "best so far, saved" if improved else f"the best is still {holder}"
            _say(
                f"{cfg.run_name}: epoch {epoch + 1}/{cfg.epochs}: train loss {running / seen:.4f}, "
                f"val MSE {val['mse']:.4f} ({kept}), {seconds:.1f} s"
            )
        if bad_epochs >= cfg.patience:
            break

    if best["epoch"] < 0:
        raise TrainingError(
            f"validation MSE was never finite ({history[-1]['val_mse']}); no checkpoint written"
        )
    model, _ = load_checkpoint(ckpt_path)
    test = evaluate(model, ds.test)
    naive = naive_references(ds, ds.test, model.cfg.cycle_period)
    plot_forecasts(model, ds, run_dir / "forecast.png", n_windows=cfg.plot_windows, title=cfg.run_name)
    wall = time.perf_counter() - t_start
    report = {  # checked field by field against TrainingReport (export/reports.py)
        "name": cfg.run_name,
        "variant": cfg.variant,
        "config": dataclasses.asdict(cfg),
        "model_config": model.cfg.to_dict(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seed": cfg.seed,
        "data": {k: v for k, v in meta["data"].items() if k != "scaler"},
        "windows": windows,
        "calibration": calibration,
        "epochs": history,
        "linear_fit": linear_fit,
        "readout_fit": readout_fit,
        "step0": step0,
        "least_squares_reference": reference,
        "readout_ablation": readout_ablation,
        "best_epoch": best["epoch"],
        "selection": selection_note(cfg, best, history, step0),
        "input_length_search": search,
        "val": {"mse": best["val_mse"]},
        "test": {"mse": test["mse"], "mae": test["mae"]},
        "naive": naive,
        "units": UNITS,
        "wall_time_s": wall,
        "seconds_per_epoch": sum(h["seconds"] for h in history) / len(history) if history else None,
        "recurrence": model.recurrence_report(),
        "environment": {
            "torch": torch.__version__,
            "threads": threads,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "checkpoint": "checkpoint.safetensors",
        "plot": "forecast.png",
    }
    write_report(run_dir / "report.json", build(TrainingReport, report))
    return run_dir


def main(
    config: Annotated[
        Path | None, typer.Argument(help="YAML config file (see configs/; default: configs/own-data.yaml)")
    ] = None,
    horizon: Annotated[int | None, typer.Option(help="forecast horizon H")] = None,
    input_length: Annotated[int | None, typer.Option(help="input window L")] = None,
    variant: Annotated[str | None, typer.Option(help="rsa or baseline")] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    epochs: Annotated[int | None, typer.Option()] = None,
    data: Annotated[str | None, typer.Option(help="CSV file")] = None,
    target: Annotated[
        str | None,
        typer.Option(help="target column (default: OT, or the file's one numeric column; mode M: the first)"),
    ] = None,
    mode: Annotated[str | None, typer.Option(help="M: every column in and out; S: the target only")] = None,
    timestamp_column: Annotated[str | None, typer.Option(help="the timestamp column's name")] = None,
    date_format: Annotated[
        str | None,
        typer.Option(help="the timestamps' format, e.g. '%d/%m/%Y' (default: read off the column)"),
    ] = None,
    dayfirst: Annotated[
        bool | None,
        typer.Option(
            "--dayfirst/--monthfirst",
            help="dates like 01/02/2015: day first or month first (default: refuse)",
        ),
    ] = None,
    drop: Annotated[
        list[str] | None, typer.Option(help="a column to leave out (repeat for more), e.g. a text column")
    ] = None,
    keep: Annotated[
        list[str] | None, typer.Option(help="the only column to use (repeat for more); default: all")
    ] = None,
    fill: Annotated[
        str | None,
        typer.Option(
            help="missing values and steps: none (an error), linear or ffill (rows inserted, filled)"
        ),
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option(
            help="IANA zone of timestamps without offset, e.g. Europe/Berlin: local times, daylight saving "
            "understood, the cycle follows local time (default: UTC)"
        ),
    ] = None,
    nonnegative: Annotated[
        list[str] | None,
        typer.Option(
            help="a channel that is never negative (repeat for more), or all, none, auto (default: channels "
            "with no negative value and 5% zeros in the training rows): interval bounds clipped at 0"
        ),
    ] = None,
    out: Annotated[str | None, typer.Option(help="folder for run folders")] = None,
    name: Annotated[str | None, typer.Option(help="run name")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="key=value override, e.g. model.d_model=64")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="no progress bars or per-epoch lines")] = False,
) -> None:
    """Train an RSA forecaster (or the baseline) and write checkpoint, report.json and forecast.png."""
    overrides = list(set_ or [])
    for key, value in (
        ("model.horizon", horizon),
        ("model.input_length", input_length),
        ("variant", variant),
        ("seed", seed),
        ("epochs", epochs),
        ("data", data),
        ("target", target),
        ("mode", mode),
        ("timestamp_column", timestamp_column),
        ("fill", fill),
        ("timezone", timezone),
        ("out", out),
        ("name", name),
    ):
        if value is not None:
            overrides.append(f"{key}={value}")
    for key, value in (("date_format", date_format), ("dayfirst", dayfirst)):
        if value is not None:
            overrides.append(f"{key}={json.dumps(value)}")  # a YAML (JSON) string or boolean, as written
    for key, names in (("drop", drop), ("keep", keep), ("nonnegative", nonnegative)):
        if names:
            overrides.append(f"{key}={json.dumps(list(names))}")  # a YAML (JSON) list
    if quiet:
        overrides.append("progress=false")
    if config is None:
        typer.echo(f"config: {portable(OWN_DATA_CONFIG)} (none given); {CONFIG_RULE}")
        config = OWN_DATA_CONFIG
    try:
        cfg = load_config(config, overrides)
    except (ValueError, TypeError) as e:
        raise typer.BadParameter(str(e)) from e
    try:
        run_dir = train(cfg)
    except (DataError, TrainingError) as e:  # say what is wrong, no stack trace
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for line in summary_lines(read_report(run_dir / "report.json", TrainingReport)):
        typer.echo(line)
    typer.echo(f"  -> {run_dir}")


def search_line(search: InputLengthSearch) -> str:
    scores = ", ".join(
        f"{length} ({value:.4f})" if isinstance(value, float) else f"{length} ({value})"
        for length, value in search.validation_mse.items()
    )
    return f"input length {search.chosen}: {search.rule} among {scores}"


def summary_lines(report: TrainingReport) -> list[str]:
    """The CLI's account of a run: test error with its units and the naive references, the windows, what
    was kept, the intervals the export will calibrate, the recurrence, what was done to the data."""
    test, windows, data = report.test, report.windows, report.data
    per_epoch = report.seconds_per_epoch
    timing = (
        f"{len(report.epochs)} epoch(s), "
        + (f"{per_epoch:.0f} s/epoch, " if per_epoch is not None else "no training, ")
        + f"{report.wall_time_s / 60:.1f} min"
    )
    out = [
        f"{report.name}: test MSE {test.mse:.4f}, MAE {test.mae:.4f} (standardised: each channel "
        "minus its training mean, over its training std)",
        *([f"  {naive_summary(test.mse, report.naive)}"] if report.naive is not None else []),
        f"  windows (L = {report.model_config.input_length} in, H = {report.model_config.horizon} out): "
        f"train {windows.train}, "
        f"validation {windows.val}, test {windows.test}",
        f"  {report.selection} ({timing})",
        *([f"  {search_line(report.input_length_search)}"] if report.input_length_search else []),
        f"  export: {report.calibration}",
    ]
    out += [f"  layer {layer['layer']}: {describe_heads(layer['heads'])}" for layer in report.recurrence]
    if data.nonnegative:
        out.append(
            f"  non-negative ({data.nonnegative_rule}): {data.nonnegative}: interval bounds clipped at 0"
        )
    hint = [c for c in data.never_negative if c not in data.nonnegative]
    if hint:
        out.append(
            f"  channels {hint} have no negative value in the training rows: if they can never be negative "
            f"(sales, counts, spend), add --nonnegative {hint[0]} so that their interval bounds stay >= 0"
        )
    out += [f"  data: {note}" for note in data.notes]
    return out


if __name__ == "__main__":
    typer.run(main)
