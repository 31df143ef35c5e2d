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
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
import typer
from tqdm.auto import tqdm

from export.calibration_size import calibration_plan
from export.checkpoint import load_checkpoint, save_checkpoint
from export.conformal import DEFAULT_LEVELS
from export.cycle import fit_cycle
from export.data import DataError, Dataset, load_csv, load_dataset, split_series
from export.evaluate import evaluate, predict
from export.linear_fit import fit_head, fit_linear_path
from export.naive import UNITS, naive_references
from export.naive import summary as naive_summary
from export.nonnegative import resolve_nonnegative
from export.paths import portable, resolve
from export.plots import plot_forecasts
from export.readout import ABLATION_MODES, readout_report
from export.reports import InputLengthSearch, TrainingReport, build, read_report, write_report
from export.results import describe_heads
from export.train_config import (
    CONFIG_RULE,
    OWN_DATA_CONFIG,
    TrainConfig,
    TrainingError,
    data_meta,
    load_config,
    param_groups,
    read_options,
    resolve_auto,
    warmup_cosine,
)
from export.train_options import (
    ConfigArgument,
    DataOption,
    DateFormatOption,
    DayfirstOption,
    DropOption,
    EpochsOption,
    FillOption,
    HorizonOption,
    InputLengthOption,
    KeepOption,
    ModeOption,
    NameOption,
    NonnegativeOption,
    OutOption,
    QuietOption,
    SeedOption,
    SetOption,
    TargetOption,
    TimestampColumnOption,
    TimezoneOption,
    VariantOption,
    cli_overrides,
)
from models import ModelConfig, RSAForecaster

__all__ = [
    "OWN_DATA_CONFIG",
    "TrainConfig",
    "TrainingError",
    "data_meta",
    "load_config",
    "param_groups",
    "read_options",
    "resolve_auto",
    "train",
    "warmup_cosine",
]


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


def _fit_epochs(
    cfg: TrainConfig,
    model: RSAForecaster,
    ds: Dataset,
    ckpt_path: Path,
    meta: dict[str, Any],
    gen: torch.Generator,
    bars: bool,
    lines: bool,
) -> tuple[list[dict[str, float]], dict[str, Any], dict[str, Any] | None]:
    """The gradient epochs (AdamW, warm-up then cosine), early-stopped on validation MSE, the best epoch
    (or step 0, a candidate with `select_step0`) saved at `ckpt_path`; returns the per-epoch history, the
    best (`val_mse`, `epoch`; epoch -1: none finite) and step 0's scores (None without it)."""
    opt = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr)
    n_train = ds.train.num_windows
    per_epoch = min(n_train, cfg.max_train_windows) if cfg.max_train_windows else n_train
    steps_per_epoch = math.ceil(per_epoch / cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(cfg.epochs * steps_per_epoch))
    history: list[dict[str, float]] = []
    best: dict[str, Any] = {"val_mse": math.inf, "epoch": -1}
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

    return history, best, step0


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

    meta = {"train_config": dataclasses.asdict(cfg), "data": data_meta(ds, data_path, cfg)}
    windows = {"train": ds.train.num_windows, "val": ds.val.num_windows, "test": ds.test.num_windows}
    _, calibration = calibration_plan(windows["val"], DEFAULT_LEVELS)
    if lines:
        _say(
            f"{cfg.run_name}: windows of L = {cfg.input_length} in, H = {cfg.horizon} out: train "
            f"{windows['train']}, validation {windows['val']}, test {windows['test']}; {calibration}"
        )
    history, best, step0 = _fit_epochs(cfg, model, ds, ckpt_path, meta, gen, bars, lines)

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
    config: ConfigArgument = None,
    horizon: HorizonOption = None,
    input_length: InputLengthOption = None,
    variant: VariantOption = None,
    seed: SeedOption = None,
    epochs: EpochsOption = None,
    data: DataOption = None,
    target: TargetOption = None,
    mode: ModeOption = None,
    timestamp_column: TimestampColumnOption = None,
    date_format: DateFormatOption = None,
    dayfirst: DayfirstOption = None,
    drop: DropOption = None,
    keep: KeepOption = None,
    fill: FillOption = None,
    timezone: TimezoneOption = None,
    nonnegative: NonnegativeOption = None,
    out: OutOption = None,
    name: NameOption = None,
    set_: SetOption = None,
    quiet: QuietOption = False,
) -> None:
    """Train an RSA forecaster (or the baseline) and write checkpoint, report.json and forecast.png."""
    overrides = cli_overrides(dict(locals()))
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
