"""The global RSA-Transformer with covariates (issue 36 item 2) on bench/covariates.py's synthetic promo
panel: 40 shops x 365 days whose promotions raise sales by a known 30%.

Same split, same run for every model: each shop's last H = 14 days are the test, everything before
trains (the transformer's validation holds out the last 14 training days,
export/global_models/transformer.py). Models at L = 28 (4 weeks, the read-out bench's setting):

- the RSA-Transformer without covariates, with `promo` (a future-known covariate: 14 horizon tokens), and
  with `promo` + the day-of-week calendar; each trained under one budget and seed (`--epochs`,
  `--windows-per-epoch`, `--d-model`), stopped on validation MASE, refitted on the whole training part;
  and its least-squares start with `promo` untrained (epochs 0: the linear model over [window, promo]
  the attention starts from);
- the REM read-out (export/global_models/model.py) with the same covariates, effect "relative" as the
  transformer reads them, and the read-out's own default ("auto": relative or both, picked on validation).

Scored on the test: MSE in units of each shop's test mean squared (bench/covariates.py's), MASE, and the
promo effect each covariate model recovers: the mean ratio of its test forecasts with the promotion on
every horizon day to those with it off, minus 1 (the truth: 0.30). The per-covariate validation report
(with and without each group, `covariate_report`, at the report budget: at most 5 epochs, no refit) is
run for the promo + calendar transformer.

    python -m bench.covariates_transformer --json results/covariates/transformer_promo.json
"""

from __future__ import annotations

import dataclasses
import json
import platform
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import typer

from app.inference.metrics import mase
from bench.covariates import EFFECT, promo_panel
from export.covariates import CovariatePlan, CovariateSeries, covariate_lines, series_covariate_rows
from export.global_models.config import PanelConfig
from export.global_models.search import train_global
from export.global_models.transformer import Budget, train_panel_transformer

H, PERIOD, INPUT_PERIODS = 14, 7, 4


def _rows(panel: list[CovariateSeries], layout: Any, promo: float | None) -> np.ndarray:
    """Each shop's raw covariate row of its test window; `promo` overrides the horizon's promotion."""
    ends = np.array([len(panel[0]) - H])
    rows = []
    for s in panel:
        f = dict(s.future)
        if promo is not None:
            f["promo"] = np.concatenate([f["promo"][:-H], np.full(H, promo)])
        one = CovariateSeries(s.id, s.values, s.timestamps, future=f)
        rows.append(series_covariate_rows(one, layout, ends))
    return np.concatenate(rows)


def run(budget: Budget, d_model: int, report: bool) -> dict[str, Any]:
    panel = promo_panel()
    train = [s.head(len(s) - H) for s in panel]
    hist = [s.values[:-H] for s in panel]
    actual = np.stack([s.values[-H:] for s in panel])
    cfg = PanelConfig(horizon=H, period=PERIOD, input_periods=INPUT_PERIODS)
    L = INPUT_PERIODS * PERIOD
    plans = {
        "promo": CovariatePlan.fit(train, (), ("promo",), (), ()),
        "promo+calendar": CovariatePlan.fit(train, (), ("promo",), ("dayofweek",), ()),
    }

    def scored(forecast: Any, layout: Any) -> dict[str, Any]:
        real = forecast(None if layout is None else _rows(panel, layout, None))
        out: dict[str, Any] = {
            "test_mse_scaled": float(np.mean(((real - actual) / actual.mean(1, keepdims=True)) ** 2)),
            "test_mase": float(np.mean(mase(hist, actual, real, PERIOD))),
        }
        if layout is not None:
            on, off = forecast(_rows(panel, layout, 1.0)), forecast(_rows(panel, layout, 0.0))
            out["recovered_effect"] = float(np.mean(on / off) - 1)
            out["effect_relative_error"] = abs(out["recovered_effect"] - EFFECT) / EFFECT
        return out

    rows: dict[str, dict[str, Any]] = {}
    start = dataclasses.replace(budget, epochs=0)  # the least-squares start alone: the linear model
    variants = [
        ("none", None, budget),
        ("promo, least-squares start only", plans["promo"], start),
        ("promo", plans["promo"], budget),
        ("promo+calendar", plans["promo+calendar"], budget),
    ]
    for name, plan, spent in variants:
        t0 = time.perf_counter()
        tf = train_panel_transformer(
            train if plan is not None else [s.values for s in train],
            cfg,
            L,
            budget=spent,
            d_model=d_model,
            plan=plan,
            report=report and name == "promo+calendar",
        )
        seconds = time.perf_counter() - t0

        def forecast(c: Any, tf: Any = tf) -> np.ndarray:
            return np.asarray(tf.forecast(hist, covariates=c))

        rows[f"RSA-Transformer, {name}"] = {
            **scored(forecast, tf.covariates),
            "val_mase": tf.val_mase,
            "best_epoch": tf.best_epoch,
            "stopped": tf.stopped,
            "parameters": tf.parameters,
            "seconds": seconds,
            "covariate_report": tf.covariate_report,
        }
        for line in covariate_lines(tf.covariate_report):
            typer.echo(f"RSA-Transformer, {name}: {line}")
    for name, plan in [("none", None), *plans.items()]:
        for effect in ("relative", "auto") if plan is not None else ("",):
            t0 = time.perf_counter()
            p = None if plan is None else dataclasses.replace(plan, effect=effect)
            data = train if p is not None else [s.values for s in train]
            ro = train_global(data, cfg, plan=p, report=False)
            seconds = time.perf_counter() - t0

            def forecast_ro(c: Any, ro: Any = ro) -> np.ndarray:
                return np.asarray(ro.forecast(hist, covariates=c))

            said = f" (effect {ro.covariates.effect}, asked {effect})" if ro.covariates else ""
            label = f"REM read-out, {name}{said}"
            rows[label] = {**scored(forecast_ro, ro.covariates), "seconds": seconds}
    return {
        "dataset": "promo (bench/covariates.py promo_panel: 40 shops x 365 days, promotions +30%)",
        "split": f"each shop's last {H} days tested; the transformer validates on the {H} before",
        "input_length": L,
        "true_effect": EFFECT,
        "budget": budget.__dict__,
        "d_model": d_model,
        "machine": f"{platform.machine()}, torch {torch.__version__}, {budget.threads} thread(s), CPU",
        "models": rows,
    }


def table(result: dict[str, Any]) -> str:
    head = f"{'model':62} {'test MSE':>9} {'MASE':>7} {'effect':>7} {'val MASE':>9} {'s':>6}"
    lines = [head, "-" * len(head)]
    for name, r in result["models"].items():
        effect = f"{r['recovered_effect']:.3f}" if "recovered_effect" in r else "-"
        val = f"{r['val_mase']:.4f}" if "val_mase" in r else "-"
        lines.append(
            f"{name:62} {r['test_mse_scaled']:9.5f} {r['test_mase']:7.4f} {effect:>7} {val:>9} "
            f"{r['seconds']:6.1f}"
        )
    return "\n".join(lines)


cli = typer.Typer(add_completion=False)


@cli.command()
def main(
    json_path: Annotated[Path | None, typer.Option("--json", help="write the results here")] = None,
    epochs: Annotated[int, typer.Option()] = 10,
    windows_per_epoch: Annotated[int, typer.Option()] = 2048,
    d_model: Annotated[int, typer.Option()] = 16,
    patience: Annotated[int, typer.Option()] = 3,
    seed: Annotated[int, typer.Option()] = 0,
    report: Annotated[bool, typer.Option(help="the per-covariate report (promo + calendar model)")] = True,
) -> None:
    budget = Budget(epochs=epochs, windows_per_epoch=windows_per_epoch, patience=patience, seed=seed)
    result = run(budget, d_model, report)
    typer.echo(table(result))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2, default=float) + "\n")


if __name__ == "__main__":
    cli()
