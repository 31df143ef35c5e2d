"""The service measured side by side with raw ONNX Runtime and peer servers, in one run, on loopback.

    .venv/bin/python -m bench.serving                                   # the full run (a few minutes)
    .venv/bin/python -m bench.serving --requests 3000 --json serving.json
    .venv/bin/python -m bench.serving --smoke                           # tiny counts: the test suite's
    .venv/bin/python -m bench.serving --servers minimal,service --concurrency 1
    .venv/bin/python -m bench.serving --covariates    # a future covariate's cost: bench/serving_covariates.py

What runs, one after another on this machine, all with version 1 of the shipped model
(model_repository/etth1-rsa/1, no seasonal cycle) and the same request bodies (bench.harness.workloads'
`prepare_forecast_workload`: real ETTh1 windows of 96x7, built and serialised once):

1. raw ONNX Runtime in this process, batch 1 and batch `--big-series` (256), on the bodies' windows;
2. each server in turn, started on a free 127.0.0.1 port, polled on GET /readyz, measured, stopped:
   - `minimal`  bench/peers/minimal.py: Starlette + orjson + one session call per request;
   - `floor`    bench/peers/floor.py: the JSON parsed and a fixed answer, no model (HTTP + JSON floor);
   - `naive`    bench/peers/naive_fastapi.py: a tutorial's FastAPI server (`dict`, `tolist()`);
   - `litserve` bench/peers/litserve_server.py: LitServe, batching 64 requests / 2 ms;
   - `service`  `python -m app` with RSA_MODELS=etth1-rsa (both versions load; requests go to
     /v1/models/etth1-rsa/versions/1/forecast), RSA_DEVICE from --device, RSA_DRAIN_DELAY_S=0 (it
     only shortens the stop), every other setting its default.
   Each server gets one-series requests at every `--concurrency` (default 1,16,64), `--requests` per
   cell after `--warmup` untimed ones, then (minimal, LitServe, the service) `--big-requests` requests
   of `--big-series` series at `--big-concurrency` after one warm-up request per connection. The
   service then gets the same big requests again, same counts and warm-up, in the same process: the
   same windows through OIP v2 REST infer (POST /v2/models/etth1-rsa/versions/1/infer) with Triton's
   binary tensor data extension (`window` FP32 [series, 96, 7] as raw bytes after a JSON header whose
   length the Inference-Header-Content-Length header gives; `forecast` asked in binary), bodies built
   once like the JSON ones: the server neither parses the request's 3 MB of JSON numbers nor writes
   the answer's.

3. with `--rounds N` (default 3), N − 1 more rounds of the minimal server and the service alone,
   one-window cells only, each started afresh, which of the two goes first alternating. This machine
   runs a process at one of two speeds and switches between them, even within a run (BENCHMARKS.md
   §1): one round's ratio may compare a slowed server with a fast one. The targets against the minimal
   server are the median over the rounds of each round's ratio, every round's value shown beside it.

How: bench.harness.load's `run_load`, the raw asyncio HTTP/1.1 keep-alive client, one connection per
concurrent worker, in this process (the servers get the rest of the machine: nothing else of the
benchmark runs while a cell is measured). Every answer is checked against onnxruntime's forecast of
the same window by bench.harness.checks' `ForecastChecker` (OIP v2 binary answers by `OipBinaryChecker`: the
JSON header's output and binary_data_size, then the raw float32 forecast, same tolerances), except the
floor's: its fixed answer is only checked to be the same JSON answer every time. Server CPU is the
whole process tree's (LitServe runs several processes) over the measured phase, per request; client
CPU is this process's.

LitServe lives apart from .venv, in .venv/litserve, put on PYTHONPATH for its process only: litserve
requires uvicorn[standard], whose uvloop would otherwise become uvicorn's loop for `python -m app`
and every peer (the serving image runs asyncio). Nothing is installed at bench time: without it, the
LitServe row says "skipped" with the command that installs it, pinned, without deps:

    .venv/bin/python -m pip install --no-deps --target .venv/litserve -r bench/peers/requirements-litserve.txt

LitServe makes no network calls; `generate_client_file=False` keeps it from writing client.py.

Reading it: stdout is Markdown, to paste into BENCHMARKS.md. Table 1 is req/s with p50/p99 latency
per concurrency (raw ORT: windows/s and latency of the session call alone); table 2 is windows/s for
256-series requests against raw ORT at batch 256 (the service twice: /v1 JSON, OIP v2 binary); then
server (client) CPU ms per request, which says whose CPU was the limit on a 2-core machine, and the
issue's targets, met or missed (not asserted). A cell with errors or cut by `--seconds` says so; the
exit code is 1 if any server failed to start, an answer was wrong, or a server did not stop cleanly
(a skipped server is none of these).
The load average before and after is printed: the machine may be shared, and a busy neighbour lowers
every number of the run it overlaps.

On a GPU host: `--device cuda` runs raw ORT and the peers with the CUDA provider first (a peer refuses
to start if CUDA is not what runs its session) and the service with RSA_DEVICE=cuda.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import REPO
from bench.harness.checks import FixedAnswer, ForecastChecker
from bench.harness.measure import Calls, Cell, Load, back_to_back, measure_cell
from bench.harness.report import (
    Target,
    above,
    at_least,
    at_most,
    format_table,
    median_target,
    target,
    write_json,
)
from bench.harness.servers import LocalServer, PeerPackages, local_server, peer_server
from bench.harness.workloads import Workload, oip_binary_workload, prepare_forecast_workload, windows_of
from bench.peers.common import create_session, load_manifest

MODEL_DIR = REPO / "model_repository" / "etth1-rsa" / "1"
LITSERVE = PeerPackages(REPO / ".venv" / "litserve", REPO / "bench" / "peers" / "requirements-litserve.txt")
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 40.0

# The targets. The p99 one is "no worse than the minimal server" (the issue states no number).
MIN_THROUGHPUT_VS_MINIMAL = 0.9
MAX_P99_VS_MINIMAL = 1.0
MAX_P50_OVER_MINIMAL_MS = 0.5
MIN_BIG_VS_RAW = 0.9


# --------------------------------------------------------------------------------------------------
# The servers.


@dataclass(frozen=True)
class Server:
    key: str
    label: str
    module: str | None  # a bench.peers module; None: the service, `python -m app`
    numeric_check: bool = True  # False: the floor, whose fixed answer is no forecast
    takes_big: bool = False  # measured with `--big-series` requests too
    stop_signal: signal.Signals = signal.SIGTERM
    packages: PeerPackages | None = None  # installed apart from .venv, on its PYTHONPATH
    takes_v2_binary: bool = False  # with takes_big: the big requests again, OIP v2 with binary tensors


SERVERS = (
    Server(
        "minimal", "minimal: Starlette + orjson + ORT, no batching", "bench.peers.minimal", takes_big=True
    ),
    Server(
        "floor",
        "floor: JSON parsed, fixed answer, no model (not checked)",
        "bench.peers.floor",
        numeric_check=False,
    ),
    Server("naive", "naive FastAPI + ORT (`dict`, `tolist()`)", "bench.peers.naive_fastapi"),
    Server(
        "litserve",
        "LitServe, batching on (64 requests, 2 ms)",
        "bench.peers.litserve_server",
        takes_big=True,
        stop_signal=signal.SIGINT,  # LitServe stops its worker processes on KeyboardInterrupt only
        packages=LITSERVE,
    ),
    Server("service", "this service (`python -m app`)", None, takes_big=True, takes_v2_binary=True),
)

# Cell.protocol: how a cell's bodies were sent.
V1 = "v1"  # /v1 forecast, JSON
V2_BINARY = "v2-binary"  # OIP v2 REST infer, binary tensors
V2_BINARY_LABEL = "this service, OIP v2 binary tensors (`/v2/.../infer`)"


def start(server: Server, device: str) -> AbstractContextManager[LocalServer]:
    times = {"ready_timeout_s": READY_TIMEOUT_S, "stop_timeout_s": STOP_TIMEOUT_S}
    if server.module is not None:
        return peer_server(
            server.module,
            MODEL_DIR,
            device,
            packages=server.packages,
            stop_signal=server.stop_signal,
            **times,
        )
    return local_server({"RSA_MODELS": "etth1-rsa", "RSA_DEVICE": device, "RSA_DRAIN_DELAY_S": "0"}, **times)


def skipped(server: Server) -> str | None:
    """Why `server` cannot run here (packages missing, with the command that installs them), or None."""
    missing = server.packages.missing() if server.packages is not None else []
    if not missing:
        return None
    assert server.packages is not None
    return f"skipped: {', '.join(missing)} not installed; {server.packages.install_command}"


def stopped_cleanly(server: Server, exit_code: int | None) -> bool:
    """0, or death by the stop signal itself: uvicorn re-raises the signal it stopped for."""
    return exit_code in (0, -server.stop_signal)


# --------------------------------------------------------------------------------------------------
# Measuring.


def fresh_checker(server: Server, work: Workload) -> ForecastChecker | FixedAnswer:
    """A checker of this server's own: its memo of verified answers is per server (and per protocol)."""
    return work.checker.fresh() if server.numeric_check else FixedAnswer()


def raw_ort(batches: list[np.ndarray], calls: int, seconds: float, device: str) -> Calls:
    """`calls` session calls (at most `seconds`), cycling through `batches`, after a few untimed ones."""
    session = create_session(load_manifest(MODEL_DIR), device)
    return back_to_back(
        lambda x: session.run(["forecast"], {"window": x}), batches, calls=calls, seconds=seconds
    )


# --------------------------------------------------------------------------------------------------
# The run.


@dataclass
class ServerRun:
    server: Server
    cells: list[Cell] = field(default_factory=list)
    exit_code: int | None = None
    error: str | None = None  # why it did not start, or did not stop cleanly
    skipped: str | None = None  # why it was not run here (its packages are missing), and the fix

    @property
    def ok(self) -> bool:
        return self.error is None and all(c.ok for c in self.cells)

    def summary(self) -> dict[str, Any]:
        return {
            "server": self.server.key,
            "label": self.server.label,
            "exit_code": self.exit_code,
            "error": self.error,
            "skipped": self.skipped,
            "cells": [c.summary() for c in self.cells],
        }


def run_server(
    server: Server,
    small: Workload,
    big: Workload,
    big_v2: Workload,
    args: argparse.Namespace,
    small_only: bool = False,
) -> ServerRun:
    """`server` started, measured at every concurrency (then on big requests, unless `small_only`),
    stopped."""
    run = ServerRun(server, skipped=skipped(server))
    if run.skipped is not None:
        print(f"[serving] {server.key}: {run.skipped}", file=sys.stderr)
        return run
    print(f"[serving] {server.key}: starting", file=sys.stderr)
    small_check, big_check = fresh_checker(server, small), fresh_checker(server, big)
    live: LocalServer | None = None
    try:
        with start(server, args.device) as live:
            for c in args.concurrency:
                load = Load(c, args.requests, args.warmup, args.seconds)
                run.cells.append(measure_cell(server.key, live, small, small_check, load))
                _progress(run.cells[-1])
            if server.takes_big and not small_only:
                c = args.big_concurrency
                load = Load(c, args.big_requests, c, args.seconds)
                run.cells.append(measure_cell(server.key, live, big, big_check, load))
                _progress(run.cells[-1])
                if server.takes_v2_binary:  # the same windows, right after, in the same process
                    v2_check = fresh_checker(server, big_v2)
                    run.cells.append(measure_cell(server.key, live, big_v2, v2_check, load, V2_BINARY))
                    _progress(run.cells[-1])
    except RuntimeError as e:  # it did not become ready
        run.error = f"did not start: {e}"
    if live is not None:
        run.exit_code = live.exit_code
        if run.error is None and not stopped_cleanly(server, live.exit_code):
            run.error = f"exit code {live.exit_code} after its stop signal:\n{live.output()}"
    return run


def _progress(cell: Cell) -> None:
    r = cell.result
    print(
        f"[serving] {cell.server} {cell.protocol} c={cell.concurrency} x{cell.series_per_request}: "
        f"{r.completed}/{r.requests} in {r.duration_s:.1f} s, {r.throughput:.0f} req/s, "
        f"p50 {r.percentile_ms(50):.2f} ms, {r.error_count} errors",
        file=sys.stderr,
    )


@dataclass
class Report:
    config: dict[str, Any]
    raw_small: Calls
    raw_big: Calls
    runs: list[ServerRun]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    duration_s: float
    # Rounds after the first, each the minimal server and the service started afresh one after the
    # other (one-window cells only): the targets against the minimal server are the median of the
    # rounds, each ratio from two servers measured moments apart.
    rounds: list[tuple[ServerRun, ServerRun]] = field(default_factory=list)

    def cell(self, server: str, concurrency: int, series: int = 1, protocol: str = V1) -> Cell | None:
        for run in self.runs:
            for c in run.cells:
                key = (c.concurrency, c.series_per_request, c.protocol)
                if c.server == server and key == (concurrency, series, protocol):
                    return c
        return None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs) and all(a.ok and b.ok for a, b in self.rounds)

    def round_cells(self, concurrency: int) -> list[tuple[Cell | None, Cell | None]]:
        """(service, minimal) one-window cells at this concurrency, round by round, the first run's first."""
        pairs = [(self.cell("service", concurrency), self.cell("minimal", concurrency))]
        for minimal, service in self.rounds:
            pairs.append((_cell_of(service, concurrency), _cell_of(minimal, concurrency)))
        return pairs


def _cell_of(run: ServerRun, concurrency: int) -> Cell | None:
    return next((c for c in run.cells if c.concurrency == concurrency and c.series_per_request == 1), None)


def execute(args: argparse.Namespace) -> Report:
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    servers = [s for s in SERVERS if s.key in args.servers]
    print("[serving] preparing the request bodies and reference forecasts", file=sys.stderr)
    small = prepare_forecast_workload(windows=args.windows)
    big = prepare_forecast_workload(windows=args.big_windows, series_per_request=args.big_series)
    big_v2 = oip_binary_workload(big)
    print("[serving] raw ONNX Runtime in this process", file=sys.stderr)
    raw_small = raw_ort(windows_of(small), args.requests, args.seconds, args.device)
    raw_big = raw_ort(windows_of(big), args.big_requests, args.seconds, args.device)
    runs = [run_server(s, small, big, big_v2, args) for s in servers]
    rounds: list[tuple[ServerRun, ServerRun]] = []
    pair = [s for s in servers if s.key in ("minimal", "service")]
    for k in range(1, args.rounds if len(pair) == 2 else 1):
        order = pair if k % 2 == 0 else pair[::-1]  # alternate which of the two goes first
        done = {s.key: run_server(s, small, big, big_v2, args, small_only=True) for s in order}
        rounds.append((done["minimal"], done["service"]))
    config = {k: v for k, v in vars(args).items() if k != "json"} | {"model_dir": str(MODEL_DIR)}
    elapsed = time.perf_counter() - t0
    return Report(config, raw_small, raw_big, runs, load_before, os.getloadavg(), elapsed, rounds)


# --------------------------------------------------------------------------------------------------
# The report: Markdown tables, the targets, and the raw results as JSON.


def _flags(cell: Cell) -> str:
    r = cell.result
    notes = []
    if r.error_count:
        notes.append(f"**{r.error_count} errors**")
    if r.stopped_by_time_limit:
        notes.append(f"cut at {r.time_limit_s:.0f} s")
    return f" ({', '.join(notes)})" if notes else ""


def _latency_cell(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    r = cell.result
    return (
        f"{r.throughput:,.0f} req/s · p50 {r.percentile_ms(50):.2f} · p99 {r.percentile_ms(99):.2f} ms"
        + _flags(cell)
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return format_table(header, rows, markdown=True).split("\n")


def _label(run: ServerRun, label: str | None = None) -> str:
    note = " — **failed**" if run.error else " — skipped (not installed)" if run.skipped else ""
    return (label or run.server.label) + note


def throughput_table(report: Report) -> list[str]:
    conc = report.config["concurrency"]
    raw = report.raw_small
    raw_cell = (
        f"{raw.windows_per_s:,.0f} windows/s · p50 {raw.percentile_ms(50):.2f} · "
        f"p99 {raw.percentile_ms(99):.2f} ms"
    )
    rows = [["raw ONNX Runtime in-process, batch 1", raw_cell] + ["—"] * (len(conc) - 1)]
    for run in report.runs:
        rows.append([_label(run), *(_latency_cell(report.cell(run.server.key, c)) for c in conc)])
    return _table(["server", *(f"c={c}" for c in conc)], rows)


def big_table(report: Report) -> list[str]:
    n, c = report.config["big_series"], report.config["big_concurrency"]
    raw = report.raw_big
    rows = [
        [
            f"raw ONNX Runtime in-process, batch {raw.batch}",
            f"{raw.windows_per_s:,.0f}",
            f"{raw.percentile_ms(50):.1f}",
            f"{raw.percentile_ms(99):.1f}",
            "1.00",
        ]
    ]
    for run in report.runs:
        if run.server.takes_big:
            rows.append(_big_row(_label(run), report.cell(run.server.key, c, n), raw))
        if run.server.takes_v2_binary:
            rows.append(
                _big_row(_label(run, V2_BINARY_LABEL), report.cell(run.server.key, c, n, V2_BINARY), raw)
            )
    return _table([f"{n} series per request, c={c}", "windows/s", "p50 ms", "p99 ms", "÷ raw ORT"], rows)


def _big_row(label: str, cell: Cell | None, raw: Calls) -> list[str]:
    if cell is None:
        return [label, "—", "—", "—", "—"]
    return [
        label,
        f"{cell.windows_per_s:,.0f}{_flags(cell)}",
        f"{cell.result.percentile_ms(50):.1f}",
        f"{cell.result.percentile_ms(99):.1f}",
        f"{cell.windows_per_s / raw.windows_per_s:.2f}",
    ]


def cpu_table(report: Report) -> list[str]:
    conc = report.config["concurrency"]
    big = (report.config["big_concurrency"], report.config["big_series"])
    v2 = any(run.server.takes_v2_binary for run in report.runs)  # a column only when a server has the cell
    rows = []
    for run in report.runs:
        cells = [report.cell(run.server.key, c) for c in conc] + [report.cell(run.server.key, *big)]
        if v2:
            cells.append(report.cell(run.server.key, *big, V2_BINARY))
        sizes = [c.answer_bytes for c in cells[:1] if c is not None and c.answer_bytes is not None]
        rows.append(
            [
                run.server.key,
                *(_cpu(c) for c in cells),
                f"{sizes[0]:,.0f}" if sizes else "—",
                str(run.exit_code),
            ]
        )
    header = ["server", *(f"c={c}" for c in conc), f"{big[1]} series, c={big[0]}"]
    if v2:
        header.append(f"{big[1]} series, c={big[0]}, OIP v2 binary")
    return _table([*header, "answer bytes (1 series)", "exit code"], rows)


def _cpu(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    server, client = cell.cpu_ms(cell.result.server_cpu_s), cell.cpu_ms(cell.result.client_cpu_s)
    return f"{server:.2f} ({client:.2f})" if server is not None and client is not None else "—"


def _rps_ratio(a: Cell, b: Cell) -> float:
    return a.result.throughput / b.result.throughput


def _p99_ratio(a: Cell, b: Cell) -> float:
    return a.result.percentile_ms(99) / b.result.percentile_ms(99)


def _p50_gap_ms(a: Cell, b: Cell) -> float:
    return a.result.percentile_ms(50) - b.result.percentile_ms(50)


def targets(report: Report) -> list[Target]:
    """The issue's targets, each from two cells of this run (or one and raw ORT)."""
    conc = report.config["concurrency"]
    svc = {c: report.cell("service", c) for c in conc}
    out = []
    for c in conc:
        pairs = report.round_cells(c)
        goal = f"≥ {MIN_THROUGHPUT_VS_MINIMAL}"
        what = f"service / minimal req/s, c={c}"
        out.append(median_target(what, goal, pairs, _rps_ratio, at_least(MIN_THROUGHPUT_VS_MINIMAL)))
        goal = f"≤ {MAX_P99_VS_MINIMAL}"
        what = f"service p99 / minimal p99, c={c}"
        out.append(median_target(what, goal, pairs, _p99_ratio, at_most(MAX_P99_VS_MINIMAL)))
    if 1 in conc:
        goal = f"≤ {MAX_P50_OVER_MINIMAL_MS} ms"
        what = "service p50 − minimal p50, c=1 (ms)"
        pairs = report.round_cells(1)
        out.append(median_target(what, goal, pairs, _p50_gap_ms, at_most(MAX_P50_OVER_MINIMAL_MS)))
    for peer in ("litserve", "naive"):
        for c in conc:
            pair = [svc[c], report.cell(peer, c)]
            out.append(target(f"service / {peer} req/s, c={c}", "> 1", pair, _rps_ratio, above(1)))
    raw = report.raw_big.windows_per_s
    big = (report.config["big_concurrency"], report.config["big_series"])
    goal = f"≥ {MIN_BIG_VS_RAW}"
    for protocol, how in ((V1, ""), (V2_BINARY, " (OIP v2 binary)")):
        what = f"service{how} windows/s ÷ raw ORT batch {report.raw_big.batch}"
        cell = report.cell("service", *big, protocol)
        out.append(target(what, goal, [cell], lambda c: c.windows_per_s / raw, at_least(MIN_BIG_VS_RAW)))
    return out


def format_report(report: Report) -> str:
    cfg = report.config
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Serving benchmark ({when})",
        "",
        f"Model {MODEL_DIR.relative_to(REPO)}, device {cfg['device']}, {os.cpu_count()} CPUs; "
        f"{cfg['requests']} requests per cell after {cfg['warmup']} warm-up, one 96×7 window each; "
        f"load average before {report.load_before[0]:.2f}, after {report.load_after[0]:.2f}; "
        f"run took {report.duration_s:.0f} s. The tables show the first round; the targets against the "
        f"minimal server are the median of {1 + len(report.rounds)} round(s), each round's value in "
        "parentheses.",
        "",
        *throughput_table(report),
        "",
        *big_table(report),
        "",
        "Server CPU ms per request, whole process tree (the load generator's in parentheses):",
        "",
        *cpu_table(report),
        "",
        *_table(["target", "measured", "goal", ""], [t.row() for t in targets(report)]),
    ]
    for run in report.runs:
        if run.error or run.skipped:
            lines += ["", f"{run.server.key}: {run.error or run.skipped}"]
        for cell in run.cells:
            how = "" if cell.protocol == V1 else f" {cell.protocol}"
            lines += [f"{cell.server}{how} c={cell.concurrency}: {s}" for s in cell.result.error_samples]
    return "\n".join(lines)


def report_json(report: Report) -> dict[str, Any]:
    return {
        "config": report.config,
        "load_average_before": report.load_before,
        "load_average_after": report.load_after,
        "duration_s": report.duration_s,
        "raw_ort": [report.raw_small.summary(), report.raw_big.summary()],
        "servers": [r.summary() for r in report.runs],
        "rounds": [{"minimal": a.summary(), "service": b.summary()} for a, b in report.rounds],
        "targets": [t.summary() for t in targets(report)],
        "passed": report.ok,
    }


# --------------------------------------------------------------------------------------------------
# The command line.

SMOKE = {
    "concurrency": [1, 4],
    "requests": 20,
    "warmup": 4,
    "seconds": 20.0,
    "windows": 8,
    "big_series": 256,
    "big_windows": 2,
    "big_requests": 2,
    "big_concurrency": 2,
    "rounds": 2,
}


def _int_list(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers, comma-separated")
    return values


def _server_list(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = sorted(set(keys) - {s.key for s in SERVERS})
    if unknown or not keys:
        raise argparse.ArgumentTypeError(f"unknown server(s) {unknown}; known: {[s.key for s in SERVERS]}")
    return keys


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=_int_list, help="e.g. 1,16,64 (default; with --covariates: 1,16)")
    ap.add_argument("--requests", type=int, default=2000, help="measured one-series requests per cell")
    ap.add_argument("--warmup", type=int, default=200, help="untimed, checked requests before each cell")
    ap.add_argument("--seconds", type=float, default=30.0, help="cap per cell (and its warm-up, apart)")
    ap.add_argument("--windows", type=int, default=64, help="distinct windows in the one-series bodies")
    ap.add_argument("--big-series", type=int, default=256, help="series per request in table 2")
    ap.add_argument("--big-windows", type=int, default=16, help="bodies of --big-series (each ~3 MB)")
    ap.add_argument("--big-requests", type=int, default=16, help="measured requests in table 2")
    ap.add_argument("--big-concurrency", type=int, default=4)
    ap.add_argument(
        "--servers", type=_server_list, default=[s.key for s in SERVERS], help="subset, e.g. service"
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of the minimal server and the service (one-window cells; the targets against the "
        "minimal server are their median)",
    )
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", type=Path, metavar="PATH", help="write the raw results there")
    ap.add_argument("--smoke", action="store_true", help="tiny counts (" + ", ".join(SMOKE) + ")")
    ap.add_argument(
        "--covariates",
        action="store_true",
        help="instead: the promo panel's global read-outs with and without a future covariate, one "
        "service, --rounds rounds (bench/serving_covariates.py)",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    if args.concurrency is None:
        args.concurrency = [1, 16] if args.covariates else [1, 16, 64]
    counts = (args.requests, args.warmup, args.windows, args.big_series, args.big_windows, args.big_requests)
    if min(counts) < 1 or args.big_concurrency < 1 or args.rounds < 1 or args.seconds <= 0:
        ap.error("every count must be >= 1, and --seconds > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.covariates:
        from bench import serving_covariates  # the issue 36 mode: trains its models with export/

        return serving_covariates.main(args)
    report = execute(args)
    print(format_report(report))
    if args.json:
        write_json(args.json, report_json(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
