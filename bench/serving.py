"""The service measured side by side with raw ONNX Runtime and peer servers, in one run, on loopback.

    .venv/bin/python -m bench.serving                                   # the full run (a few minutes)
    .venv/bin/python -m bench.serving --requests 3000 --json serving.json
    .venv/bin/python -m bench.serving --smoke                           # tiny counts: the test suite's
    .venv/bin/python -m bench.serving --servers minimal,service --concurrency 1

What runs, one after another on this machine, all with version 1 of the shipped model
(model_repository/etth1-rsa/1, no seasonal cycle) and the same request bodies (bench.loadgen's
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

How: bench.loadgen's `run_load`, the raw asyncio HTTP/1.1 keep-alive client, one connection per
concurrent worker, in this process (the servers get the rest of the machine: nothing else of the
benchmark runs while a cell is measured). Every answer is checked against onnxruntime's forecast of
the same window by bench.loadgen's `ForecastChecker` (OIP v2 binary answers by `OipBinaryChecker`: the
JSON header's output and binary_data_size, then the raw float32 forecast, same tolerances), except the
floor's: its fixed answer is only checked to be the same JSON answer every time. Server CPU is the
whole process tree's (LitServe runs several processes) over the measured phase, per request; client
CPU is this process's.

LitServe lives apart from .venv, in .venv/litserve, put on PYTHONPATH for its process only: litserve
requires uvicorn[standard], whose uvloop would otherwise become uvicorn's loop for `python -m app`
and every peer (the serving image runs asyncio). The first run installs it, pinned, without deps:

    .venv/bin/python -m pip install --no-deps --target .venv/litserve -r bench/peers/requirements-litserve.txt

LitServe makes no network calls; `generate_client_file=False` keeps it from writing client.py.

Reading it: stdout is Markdown, to paste into BENCHMARKS.md. Table 1 is req/s with p50/p99 latency
per concurrency (raw ORT: windows/s and latency of the session call alone); table 2 is windows/s for
256-series requests against raw ORT at batch 256 (the service twice: /v1 JSON, OIP v2 binary); then
server (client) CPU ms per request, which says whose CPU was the limit on a 2-core machine, and the
issue's targets, met or missed (not asserted). A cell with errors or cut by `--seconds` says so; the
exit code is 1 if any server failed to start, an answer was wrong, or a server did not stop cleanly.
The load average before and after is printed: the machine may be shared, and a busy neighbour lowers
every number of the run it overlaps.

On a GPU host: `--device cuda` runs raw ORT and the peers with the CUDA provider first (a peer refuses
to start if CUDA is not what runs its session) and the service with RSA_DEVICE=cuda.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.loadgen import (
    REPO,
    Failure,
    ForecastChecker,
    LoadResult,
    LocalServer,
    Workload,
    _ready,
    forecast_answer,
    free_port,
    local_server,
    prepare_forecast_workload,
    run_load,
)
from bench.peers.common import create_session, load_manifest

MODEL_DIR = REPO / "model_repository" / "etth1-rsa" / "1"
LITSERVE_DIR = REPO / ".venv" / "litserve"
LITSERVE_REQUIREMENTS = REPO / "bench" / "peers" / "requirements-litserve.txt"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 40.0
PIP_TIMEOUT_S = 300.0
RAW_WARMUP_CALLS = 5

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
    litserve: bool = False  # needs .venv/litserve on its PYTHONPATH
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
        litserve=True,
    ),
    Server("service", "this service (`python -m app`)", None, takes_big=True, takes_v2_binary=True),
)

# Cell.protocol: how a cell's bodies were sent.
V1 = "v1"  # /v1 forecast, JSON
V2_BINARY = "v2-binary"  # OIP v2 REST infer, binary tensors
V2_BINARY_LABEL = "this service, OIP v2 binary tensors (`/v2/.../infer`)"
FP32 = np.dtype("<f4")  # the wire's FP32: little-endian whatever this machine is


def ensure_litserve() -> None:
    """Install the pinned LitServe packages into .venv/litserve unless every one is there already."""
    pins = [
        line.split("==")
        for line in LITSERVE_REQUIREMENTS.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    if all((LITSERVE_DIR / f"{name}-{version}.dist-info").is_dir() for name, version in pins):
        return
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-deps", "--upgrade", "--target", str(LITSERVE_DIR), "-r", str(LITSERVE_REQUIREMENTS)]
    print(f"[serving] installing LitServe: {' '.join(command)}", file=sys.stderr)
    subprocess.run(command, check=True, timeout=PIP_TIMEOUT_S)


@contextlib.contextmanager
def peer_server(server: Server, device: str) -> Iterator[LocalServer]:
    """A bench.peers module on a free loopback port until /readyz is 200; its stop signal on exit.

    The peer leads a new process group, so whatever it leaves behind after a bounded stop (LitServe's
    workers, had it died) is killed with it. `exit_code` is set once it has stopped.
    """
    assert server.module is not None
    port = free_port()
    env = os.environ.copy()
    if server.litserve:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LITSERVE_DIR), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", server.module, "--port", str(port), "--model-dir", str(MODEL_DIR)]
    log = Path(tempfile.mkdtemp(prefix="serving-")) / f"{server.key}.log"
    with log.open("wb") as sink:  # a file, not a pipe: nobody reads it while the load runs
        process = subprocess.Popen(
            [*command, "--device", device],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    live = LocalServer(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_ready(live, port)
        yield live
    finally:
        _stop(process, server.stop_signal)
        live.exit_code = process.returncode


def _wait_ready(live: LocalServer, port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _ready(port):
        if live.process.poll() is not None:
            raise RuntimeError(f"exited with {live.process.returncode} before ready:\n{live.output()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready after {READY_TIMEOUT_S:.0f} s:\n{live.output()}")
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):  # nothing was left: the usual case
        os.killpg(process.pid, signal.SIGKILL)  # the group is ours alone (start_new_session)


def start(server: Server, device: str) -> contextlib.AbstractContextManager[LocalServer]:
    if server.module is not None:
        return peer_server(server, device)
    env = {"RSA_MODELS": "etth1-rsa", "RSA_DEVICE": device, "RSA_DRAIN_DELAY_S": "0"}
    return local_server(env, ready_timeout_s=READY_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S)


def stopped_cleanly(server: Server, exit_code: int | None) -> bool:
    """0, or death by the stop signal itself: uvicorn re-raises the signal it stopped for."""
    return exit_code in (0, -server.stop_signal)


# --------------------------------------------------------------------------------------------------
# Measuring.


@dataclass
class FixedAnswer:
    """The floor's check: its first answer is a `/v1` answer, and every later one is that same answer."""

    answer: bytes | None = None
    parsed: int = 0

    def __call__(self, b: int, payload: bytes) -> Failure | None:
        if self.answer is None:
            self.parsed += 1
            problem = forecast_answer(payload)
            if isinstance(problem, Failure):
                return problem
            self.answer = payload
        elif payload != self.answer:
            return Failure("bad_body", f"not the fixed answer: {payload[:120]!r}")
        return None

    def sizes(self) -> list[int]:
        return [len(self.answer)] if self.answer is not None else []


@dataclass
class OipBinaryChecker(ForecastChecker):
    """Checks an OIP v2 infer answer whose `forecast` is binary (Triton's binary tensor data extension):
    the JSON header, then the tensor's raw little-endian float32 bytes, which `expected[b]` says the size
    of. Same references, tolerances and memo as ForecastChecker; a tensor has no series ids (its rows are
    the request's, in order): `ids` only name a row in a failure.
    """

    def _check(self, b: int, payload: bytes) -> Failure | None:
        expected = self.expected[b]
        size = FP32.itemsize * expected.size
        cut = len(payload) - size
        if cut <= 0:
            return Failure("bad_body", f"{len(payload)} bytes: no room for a header and {size} binary bytes")
        try:
            header = json.loads(payload[:cut])
        except ValueError as e:  # also a binary part of another size, which moves the cut
            return Failure("bad_body", f"no JSON header before the last {size} bytes: {e}")
        if not isinstance(header, dict):
            return Failure("bad_body", f"the header is not a JSON object: {payload[:120]!r}")
        if (header.get("model_name"), header.get("model_version")) != (self.model, str(self.version)):
            got = f"{header.get('model_name')!r} v{header.get('model_version')!r}"
            return Failure("bad_body", f"answered by {got}")
        outputs = header.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != 1 or not isinstance(outputs[0], dict):
            return Failure("bad_body", f"outputs {outputs!r}: expected `forecast` alone")
        out = outputs[0]
        described = (out.get("name"), out.get("datatype"), out.get("shape"))
        if described != ("forecast", "FP32", list(expected.shape)):
            return Failure("bad_body", f"output {described}, expected forecast FP32 {list(expected.shape)}")
        said = (out.get("parameters") or {}).get("binary_data_size")
        if said != size:
            return Failure("bad_body", f"binary_data_size {said!r}, expected {size}")
        values = np.frombuffer(payload, FP32, offset=cut).reshape(expected.shape)
        if not np.isfinite(values).all():
            return Failure("bad_body", "the forecast has non-finite values")
        close = np.isclose(values, expected, rtol=self.rtol, atol=self.atol).all(axis=(1, 2))
        if not close.all():
            k = int(np.argmin(close))
            worst = float(np.abs(values[k] - expected[k]).max())
            return Failure(
                "mismatch", f"forecast[{k}] ({self.ids[b][k]}) off the reference by up to {worst:.3g}"
            )
        return None


def oip_binary_workload(work: Workload) -> Workload:
    """`work`'s windows as OIP v2 infer requests with binary tensors: one JSON header for every body
    (each has the same number of series), then the body's windows as raw float32; `forecast` asked in
    binary. The checker holds `work`'s references. Built once, before anything is measured."""
    windows = windows_of(work)
    if any(x.shape != windows[0].shape for x in windows):
        raise ValueError("one JSON header for every body needs the same number of series in each")
    size = FP32.itemsize * windows[0].size
    window = {"name": "window", "datatype": "FP32", "shape": list(windows[0].shape)}
    header = json.dumps(
        {
            "inputs": [window | {"parameters": {"binary_data_size": size}}],
            "outputs": [{"name": "forecast", "parameters": {"binary_data": True}}],
        },
        separators=(",", ":"),
    ).encode()
    c = work.checker
    return Workload(
        path=f"/v2/models/{c.model}/versions/{c.version}/infer",
        bodies=[header + x.astype(FP32, copy=False).tobytes() for x in windows],
        checker=OipBinaryChecker(c.model, c.version, c.ids, c.expected),
        windows=work.windows,
        input_length=work.input_length,
        horizon=work.horizon,
        channels=work.channels,
        content_type="application/octet-stream",
        headers={"Inference-Header-Content-Length": str(len(header))},
    )


def fresh_checker(server: Server, work: Workload) -> ForecastChecker | FixedAnswer:
    """A checker of this server's own: its memo of verified answers is per server (and per protocol)."""
    if not server.numeric_check:
        return FixedAnswer()
    c = work.checker
    return type(c)(c.model, c.version, c.ids, c.expected)


def answer_sizes(check: ForecastChecker | FixedAnswer) -> list[int]:
    if isinstance(check, FixedAnswer):
        return check.sizes()
    return [len(p) for answers in check.verified.values() for p in answers]


def tree_cpu_s(root: int) -> float:
    """utime + stime of a process and all its descendants, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)
        cpu[pid] = int(fields[11]) + int(fields[12])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


@dataclass
class Cell:
    """One server at one concurrency and request size."""

    server: str
    concurrency: int
    series_per_request: int
    result: LoadResult
    parsed: int  # answers parsed and compared in this cell (the rest byte-identical to a verified one)
    answer_bytes: float | None  # mean size of the distinct answers verified so far
    protocol: str = V1

    @property
    def ok(self) -> bool:
        return self.result.error_count == 0 and self.result.completed == self.result.requests

    @property
    def windows_per_s(self) -> float:
        return self.result.throughput * self.series_per_request

    def cpu_ms(self, seconds: float | None) -> float | None:
        return None if seconds is None else 1e3 * seconds / max(self.result.completed, 1)

    def summary(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "protocol": self.protocol,
            "parsed_answers": self.parsed,
            "answer_bytes": self.answer_bytes,
            "server_cpu_ms_per_request": self.cpu_ms(self.result.server_cpu_s),
            "client_cpu_ms_per_request": self.cpu_ms(self.result.client_cpu_s),
        } | self.result.summary()


@dataclass(frozen=True)
class Load:
    concurrency: int
    requests: int
    warmup: int
    seconds: float


def measure(
    server: Server,
    live: LocalServer,
    work: Workload,
    check: ForecastChecker | FixedAnswer,
    load: Load,
    series: int,
    protocol: str = V1,
) -> Cell:
    """Warm-up, then the measured phase with the server's process-tree CPU around it."""
    url = live.url + work.path
    pid = live.process.pid

    async def both() -> tuple[LoadResult, LoadResult, float, float]:
        common = {
            "concurrency": load.concurrency,
            "time_limit_s": load.seconds,
            "series_per_request": series,
            "content_type": work.content_type,
            "headers": work.headers,
        }
        warm = await run_load(url, work.bodies, check, requests=load.warmup, **common)
        cpu0 = tree_cpu_s(pid)
        result = await run_load(url, work.bodies, check, requests=load.requests, **common)
        return warm, result, cpu0, tree_cpu_s(pid)

    parsed0 = check.parsed
    warm, result, cpu0, cpu1 = asyncio.run(both())
    result.server_cpu_s = cpu1 - cpu0
    # Warm-up answers are checked too: their errors count, and the cell says how many there were.
    result.warmup = warm.completed
    result.checked += warm.checked
    for kind, n in warm.errors.items():
        result.errors[kind] = result.errors.get(kind, 0) + n
    result.error_samples[:0] = warm.error_samples
    sizes = answer_sizes(check)
    return Cell(
        server=server.key,
        concurrency=load.concurrency,
        series_per_request=series,
        result=result,
        parsed=check.parsed - parsed0,
        answer_bytes=statistics.mean(sizes) if sizes else None,
        protocol=protocol,
    )


@dataclass
class Raw:
    """Session calls in this process, back to back, each on `batch` windows."""

    batch: int
    duration_s: float
    latencies_ms: list[float] = field(repr=False)

    @property
    def windows_per_s(self) -> float:
        return self.batch * len(self.latencies_ms) / self.duration_s if self.duration_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))

    def summary(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "calls": len(self.latencies_ms),
            "duration_s": self.duration_s,
            "windows_per_s": self.windows_per_s,
            "latency_ms": {f"p{q}": self.percentile_ms(q) for q in (50, 90, 99)},
        }


def windows_of(work: Workload) -> list[np.ndarray]:
    """Each body's windows as the [series, L, C] float32 array a session takes."""
    return [np.array([s["values"] for s in json.loads(b)["series"]], dtype=np.float32) for b in work.bodies]


def raw_ort(batches: list[np.ndarray], calls: int, seconds: float, device: str) -> Raw:
    """`calls` session calls (at most `seconds`), cycling through `batches`, after a few untimed ones."""
    session = create_session(load_manifest(MODEL_DIR), device)
    for x in batches[:RAW_WARMUP_CALLS]:
        session.run(["forecast"], {"window": x})
    latencies: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds
    for i in range(calls):
        if time.perf_counter() >= deadline:
            break
        t0 = time.perf_counter()
        session.run(["forecast"], {"window": batches[i % len(batches)]})
        latencies.append((time.perf_counter() - t0) * 1e3)
    return Raw(len(batches[0]), time.perf_counter() - start, latencies)


# --------------------------------------------------------------------------------------------------
# The run.


@dataclass
class ServerRun:
    server: Server
    cells: list[Cell] = field(default_factory=list)
    exit_code: int | None = None
    error: str | None = None  # why it did not start, or did not stop cleanly

    @property
    def ok(self) -> bool:
        return self.error is None and all(c.ok for c in self.cells)

    def summary(self) -> dict[str, Any]:
        return {
            "server": self.server.key,
            "label": self.server.label,
            "exit_code": self.exit_code,
            "error": self.error,
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
    print(f"[serving] {server.key}: starting", file=sys.stderr)
    run = ServerRun(server)
    small_check, big_check = fresh_checker(server, small), fresh_checker(server, big)
    live: LocalServer | None = None
    try:
        with start(server, args.device) as live:
            for c in args.concurrency:
                load = Load(c, args.requests, args.warmup, args.seconds)
                run.cells.append(measure(server, live, small, small_check, load, 1))
                _progress(run.cells[-1])
            if server.takes_big and not small_only:
                c = args.big_concurrency
                load = Load(c, args.big_requests, c, args.seconds)
                run.cells.append(measure(server, live, big, big_check, load, args.big_series))
                _progress(run.cells[-1])
                if server.takes_v2_binary:  # the same windows, right after, in the same process
                    v2_check = fresh_checker(server, big_v2)
                    run.cells.append(
                        measure(server, live, big_v2, v2_check, load, args.big_series, V2_BINARY)
                    )
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
    raw_small: Raw
    raw_big: Raw
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
    if any(s.litserve for s in servers):
        ensure_litserve()
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


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)]


def _label(run: ServerRun) -> str:
    return run.server.label + (" — **failed**" if run.error else "")


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
            label = V2_BINARY_LABEL + (" — **failed**" if run.error else "")
            rows.append(_big_row(label, report.cell(run.server.key, c, n, V2_BINARY), raw))
    return _table([f"{n} series per request, c={c}", "windows/s", "p50 ms", "p99 ms", "÷ raw ORT"], rows)


def _big_row(label: str, cell: Cell | None, raw: Raw) -> list[str]:
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


@dataclass(frozen=True)
class Target:
    what: str
    value: float | None  # None: a cell is missing (a server failed, or was not run)
    goal: str
    met: bool | None
    shaky: bool = False  # a cell behind it had errors or was cut by the time limit
    rounds: tuple[float, ...] = ()  # each round's value, when `value` is their median

    def row(self) -> list[str]:
        if self.value is None or self.met is None:
            return [self.what, "—", self.goal, "no data"]
        verdict = "met" if self.met else "**missed**"
        measured = f"{self.value:.2f}"
        if len(self.rounds) > 1:
            measured += " (" + ", ".join(f"{v:.2f}" for v in self.rounds) + ")"
        return [self.what, measured, self.goal, verdict + (" (errors or cut)" if self.shaky else "")]


def _shaky(*cells: Cell) -> bool:
    return any(not c.ok or c.result.stopped_by_time_limit for c in cells)


def _target(
    what: str,
    goal: str,
    cells: Sequence[Cell | None],
    value: Callable[..., float],
    ok: Callable[[float], bool],
) -> Target:
    present = [c for c in cells if c is not None]
    if len(present) < len(cells):
        return Target(what, None, goal, None)
    v = value(*present)
    return Target(what, v, goal, ok(v), _shaky(*present))


def _median_target(
    what: str,
    goal: str,
    pairs: Sequence[tuple[Cell | None, Cell | None]],
    value: Callable[[Cell, Cell], float],
    ok: Callable[[float], bool],
) -> Target:
    """The median over rounds of `value` on each round's (service, minimal) cells."""
    if any(a is None or b is None for a, b in pairs):
        return Target(what, None, goal, None)
    complete = [(a, b) for a, b in pairs if a is not None and b is not None]
    each = tuple(value(a, b) for a, b in complete)
    v = statistics.median(each)
    return Target(what, v, goal, ok(v), _shaky(*(c for pair in complete for c in pair)), each)


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
        out.append(_median_target(what, goal, pairs, _rps_ratio, _at_least_minimal))
        goal = f"≤ {MAX_P99_VS_MINIMAL}"
        out.append(_median_target(f"service p99 / minimal p99, c={c}", goal, pairs, _p99_ratio, _p99_ok))
    if 1 in conc:
        goal = f"≤ {MAX_P50_OVER_MINIMAL_MS} ms"
        what = "service p50 − minimal p50, c=1 (ms)"
        out.append(_median_target(what, goal, report.round_cells(1), _p50_gap_ms, _p50_gap_ok))
    for peer in ("litserve", "naive"):
        for c in conc:
            pair = [svc[c], report.cell(peer, c)]
            out.append(_target(f"service / {peer} req/s, c={c}", "> 1", pair, _rps_ratio, _ahead))
    raw = report.raw_big.windows_per_s
    big = (report.config["big_concurrency"], report.config["big_series"])
    goal = f"≥ {MIN_BIG_VS_RAW}"
    for protocol, how in ((V1, ""), (V2_BINARY, " (OIP v2 binary)")):
        what = f"service{how} windows/s ÷ raw ORT batch {report.raw_big.batch}"
        cell = report.cell("service", *big, protocol)
        out.append(_target(what, goal, [cell], lambda c: c.windows_per_s / raw, _big_ok))
    return out


def _at_least_minimal(v: float) -> bool:
    return v >= MIN_THROUGHPUT_VS_MINIMAL


def _p99_ok(v: float) -> bool:
    return v <= MAX_P99_VS_MINIMAL


def _p50_gap_ok(v: float) -> bool:
    return v <= MAX_P50_OVER_MINIMAL_MS


def _ahead(v: float) -> bool:
    return v > 1


def _big_ok(v: float) -> bool:
    return v >= MIN_BIG_VS_RAW


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
        if run.error:
            lines += ["", f"{run.server.key}: {run.error}"]
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
        "targets": [
            {
                "what": t.what,
                "value": t.value,
                "goal": t.goal,
                "met": t.met,
                "shaky": t.shaky,
                "rounds": list(t.rounds),
            }
            for t in targets(report)
        ],
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
    ap.add_argument("--concurrency", type=_int_list, default=[1, 16, 64], help="e.g. 1,16,64")
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
    args = ap.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    counts = (args.requests, args.warmup, args.windows, args.big_series, args.big_windows, args.big_requests)
    if min(counts) < 1 or args.big_concurrency < 1 or args.rounds < 1 or args.seconds <= 0:
        ap.error("every count must be >= 1, and --seconds > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = execute(args)
    print(format_report(report))
    if args.json:
        args.json.write_text(json.dumps(report_json(report), indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
