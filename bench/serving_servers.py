"""The servers bench/serving.py measures: each peer and the service, how one is started on loopback and
stopped, raw ONNX Runtime in this process, and one server's run (every concurrency, then the big
requests)."""

from __future__ import annotations

import argparse
import signal
import sys
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.harness import REPO
from bench.harness.checks import FixedAnswer, ForecastChecker
from bench.harness.measure import Calls, Cell, Load, back_to_back, measure_cell
from bench.harness.servers import LocalServer, PeerPackages, local_server, peer_server
from bench.harness.workloads import Workload
from bench.peers.common import create_session, load_manifest

MODEL_DIR = REPO / "model_repository" / "etth1-rsa" / "1"
LITSERVE = PeerPackages(REPO / ".venv" / "litserve", REPO / "bench" / "peers" / "requirements-litserve.txt")
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 40.0


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
    return local_server({"RSA_MODELS": "etth1-rsa", "RSA_DEVICE": device}, **times)


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
        elif any(cell.result.error_count for cell in run.cells):  # what the server logged of them
            print(f"[serving] {server.key}: errors; its log ends:\n{live.output(3000)}", file=sys.stderr)
    return run


def _progress(cell: Cell) -> None:
    r = cell.result
    print(
        f"[serving] {cell.server} {cell.protocol} c={cell.concurrency} x{cell.series_per_request}: "
        f"{r.completed}/{r.requests} in {r.duration_s:.1f} s, {r.throughput:.0f} req/s, "
        f"p50 {r.percentile_ms(50):.2f} ms, {r.error_count} errors",
        file=sys.stderr,
    )
