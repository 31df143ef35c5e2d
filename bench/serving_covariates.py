"""`python -m bench.serving --covariates`: the serving cost of a future covariate, on loopback (issue 36:
single-window req/s with a future covariate ≥ 0.9× without).

    .venv/bin/python -m bench.serving --covariates --rounds 7 --requests 6000 --warmup 300 \
        --json results/covariates/serving.json                 # ~3 min (docs/panels.md's numbers)
    .venv/bin/python -m bench.serving --covariates --smoke

The two global read-outs of the synthetic promo panel that `python -m bench.covariates --dataset serving`
measures in process (bench.covariates' `serving_pair`: L = 28 days, H = 14; `plain` without covariates,
`promo` with the future covariate `promo`) are exported into one temporary repository, and the service,
`python -m app` (bench.harness.servers' `local_server`), is started once on it. Each round measures
one-series /v1 forecast requests to each model at every `--concurrency` (default 1,16), which model goes
first alternating round by round, with bench.harness.load's raw asyncio keep-alive client. The bodies
are real windows of the panel (`--windows` of them: shop by shop, origins a week apart), the `promo`
bodies with the panel's own promotions over the horizon as `future: {promo: [14 values]}`. Every answer
is checked by bench.harness.checks' `ForecastChecker` against the numpy read-out's forecast of the same
window (export_global checked the graph against it). The target is the median over the rounds of each
round's promo ÷ plain req/s, every round's value beside it; the load average before and after is printed
and written: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.harness.checks import ForecastChecker
from bench.harness.measure import Cell, Load, measure_cell
from bench.harness.report import Target, at_least, format_table, median_target, write_json
from bench.harness.servers import LocalServer, local_server
from bench.harness.workloads import Workload

if TYPE_CHECKING:
    from bench.covariates import ServingPair

MODELS = ("plain", "promo")  # without covariates, with the future covariate `promo`
MIN_RATIO = 0.9  # issue 36: req/s with a future covariate ≥ 0.9× without
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 40.0


def covariate_workloads(pair: ServingPair, versions: dict[str, int], windows: int) -> dict[str, Workload]:
    """One-series /v1 bodies of `windows` windows of the panel for each model (the same windows; the
    promo ones with the panel's promotions over the horizon), each with its checker holding the numpy
    read-out's forecasts."""
    from export.covariates import series_covariate_rows

    H = pair.horizon
    L = pair.plain.input_length
    layout = pair.promo.covariates
    assert layout is not None
    n = len(pair.panel[0])
    picks = [(b % len(pair.panel), n - H - 7 * (b // len(pair.panel))) for b in range(windows)]
    if picks[-1][1] < L:
        raise ValueError(f"{windows} windows need more than the panel's {n} days")
    out = {}
    for name in MODELS:
        bodies, ids, expected = [], [], []
        for i, end in picks:
            s = pair.panel[i]
            history = s.values[end - L : end]
            one: dict[str, Any] = {"id": f"{s.id}@{end}", "values": history.tolist()}
            if name == "promo":
                one["future"] = {"promo": s.future["promo"][end : end + H].tolist()}
                rows = series_covariate_rows(s, layout, np.array([end]))
                reference = pair.promo.forecast([history], covariates=rows)
            else:
                reference = pair.plain.forecast([history])
            bodies.append(json.dumps({"series": [one]}, separators=(",", ":")).encode())
            ids.append([one["id"]])
            expected.append(reference.astype(np.float32)[:, :, None])  # [1, H, 1 channel]
        out[name] = Workload(
            path=f"/v1/models/{name}/versions/{versions[name]}/forecast",
            bodies=bodies,
            checker=ForecastChecker(name, versions[name], ids, expected),
            windows=windows,
            input_length=L,
            horizon=H,
            channels=1,
        )
    return out


@dataclass
class Round:
    order: tuple[str, ...]
    cells: dict[str, list[Cell]] = field(default_factory=dict)  # model -> one cell per concurrency

    def cell(self, model: str, concurrency: int) -> Cell | None:
        return next((c for c in self.cells.get(model, []) if c.concurrency == concurrency), None)


@dataclass
class Report:
    config: dict[str, Any]
    models: dict[str, Any]
    rounds: list[Round]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    duration_s: float
    exit_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        cells = [c for r in self.rounds for cs in r.cells.values() for c in cs]
        return self.error is None and bool(cells) and all(c.ok for c in cells)


def execute(args: argparse.Namespace) -> Report:
    from bench.covariates import serving_pair  # trains with export/: only this mode needs it
    from export.global_models.onnx import export_global

    t0 = time.perf_counter()
    load_before = os.getloadavg()
    print("[serving] training the promo panel's two global read-outs", file=sys.stderr)
    pair = serving_pair()
    rounds: list[Round] = []
    error = None
    live: LocalServer | None = None
    with tempfile.TemporaryDirectory(prefix="bench-covariates-") as folder:
        repo = Path(folder)
        versions = {
            "plain": int(export_global(pair.plain, repo, "plain").name),
            "promo": int(export_global(pair.promo, repo, "promo").name),
        }
        work = covariate_workloads(pair, versions, args.windows)
        checks = {name: w.checker.fresh() for name, w in work.items()}
        env = {
            "RSA_MODEL_REPOSITORY": str(repo),
            "RSA_MODELS": ",".join(MODELS),
            "RSA_DEVICE": args.device,
        }
        print("[serving] the service, both models", file=sys.stderr)
        try:
            with local_server(env, ready_timeout_s=READY_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S) as live:
                for k in range(args.rounds):
                    this = Round(MODELS if k % 2 == 0 else MODELS[::-1])  # alternate who goes first
                    for c in args.concurrency:
                        load = Load(c, args.requests, args.warmup, args.seconds)
                        for name in this.order:
                            cell = measure_cell(name, live, work[name], checks[name], load)
                            this.cells.setdefault(name, []).append(cell)
                            _progress(k, cell)
                    rounds.append(this)
        except RuntimeError as e:  # it did not become ready
            error = f"did not start: {e}"
    exit_code = live.exit_code if live is not None else None
    if error is None and exit_code not in (0, -15):  # uvicorn re-raises the SIGTERM it stopped for
        error = f"exit code {exit_code} after SIGTERM:\n{live.output() if live else ''}"
    models = {
        name: {
            "version": versions[name],
            "input_length": work[name].input_length,
            "horizon": work[name].horizon,
            "future_covariates": ["promo"] if name == "promo" else [],
            "path": work[name].path,
            "windows": work[name].windows,
        }
        for name in MODELS
    }
    config = {k: v for k, v in vars(args).items() if k != "json"}
    elapsed = time.perf_counter() - t0
    return Report(config, models, rounds, load_before, os.getloadavg(), elapsed, exit_code, error)


def _progress(k: int, cell: Cell) -> None:
    r = cell.result
    print(
        f"[serving] round {k + 1} {cell.server} c={cell.concurrency}: {r.completed}/{r.requests} in "
        f"{r.duration_s:.1f} s, {r.throughput:.0f} req/s, p50 {r.percentile_ms(50):.2f} ms, "
        f"{r.error_count} errors",
        file=sys.stderr,
    )


def _rps_ratio(promo: Cell, plain: Cell) -> float:
    return promo.result.throughput / plain.result.throughput


def targets(report: Report) -> list[Target]:
    out = []
    for c in report.config["concurrency"]:
        pairs = [(r.cell("promo", c), r.cell("plain", c)) for r in report.rounds]
        what = f"promo / plain req/s, c={c}"
        out.append(median_target(what, f"≥ {MIN_RATIO}", pairs, _rps_ratio, at_least(MIN_RATIO)))
    return out


def _latency(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    r = cell.result
    text = f"{r.throughput:,.0f} req/s · p50 {r.percentile_ms(50):.2f} · p99 {r.percentile_ms(99):.2f} ms"
    if r.error_count:
        text += f" (**{r.error_count} errors**)"
    if r.stopped_by_time_limit:
        text += f" (cut at {r.time_limit_s:.0f} s)"
    return text


def format_report(report: Report) -> str:
    cfg = report.config
    conc = cfg["concurrency"]
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    for k, r in enumerate(report.rounds):
        for name in r.order:
            rows.append([f"{k + 1}", name, *(_latency(r.cell(name, c)) for c in conc)])
    checked = sum(c.result.checked for r in report.rounds for cs in r.cells.values() for c in cs)
    lines = [
        f"### Serving cost of a future covariate ({when})",
        "",
        f"The promo panel's global read-outs (L = {report.models['plain']['input_length']}, "
        f"H = {report.models['plain']['horizon']}), one service, device {cfg['device']}, "
        f"{os.cpu_count()} CPUs; {cfg['requests']} one-series requests per cell after {cfg['warmup']} "
        f"warm-up, {checked} answers checked against the numpy read-out; load average before "
        f"{report.load_before[0]:.2f}, after {report.load_after[0]:.2f}; run took {report.duration_s:.0f} s.",
        "",
        *format_table(["round", "model", *(f"c={c}" for c in conc)], rows, markdown=True).split("\n"),
        "",
        *format_table(
            ["target", "measured", "goal", ""], [t.row() for t in targets(report)], markdown=True
        ).split("\n"),
    ]
    if report.error:
        lines += ["", f"service: {report.error}"]
    for r in report.rounds:
        for cs in r.cells.values():
            for cell in cs:
                lines += [f"{cell.server} c={cell.concurrency}: {s}" for s in cell.result.error_samples]
    return "\n".join(lines)


def report_json(report: Report) -> dict[str, Any]:
    return {
        "what": "python -m bench.serving --covariates: one-series /v1 requests on loopback to a global "
        "read-out without covariates (plain) and with the future covariate promo, one service",
        "config": report.config,
        "models": report.models,
        "load_average_before": report.load_before,
        "load_average_after": report.load_after,
        "duration_s": report.duration_s,
        "exit_code": report.exit_code,
        "error": report.error,
        "rounds": [
            {"order": list(r.order), "cells": {m: [c.summary() for c in cs] for m, cs in r.cells.items()}}
            for r in report.rounds
        ],
        "targets": [t.summary() for t in targets(report)],
        "passed": report.ok,
    }


def main(args: argparse.Namespace) -> int:
    """The covariate mode of `python -m bench.serving` (its parsed arguments)."""
    report = execute(args)
    print(format_report(report))
    if args.json:
        write_json(args.json, report_json(report))
    return 0 if report.ok else 1
