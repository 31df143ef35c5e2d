"""Front ends: the service with one process against N front ends and an engine process (RSA_WORKERS),
measured side by side in one run, every answer checked.

    .venv/bin/python -m bench.workers [--workers 1,2] [--rounds 2] [--concurrency 1,16,64]
                                      [--requests 2000] [--big-requests 16] [--flood 120] [--version 1]
    .venv/bin/python -m bench.workers --smoke        # tiny sizes: seconds, for the tests

Four parts, each reported as a table:
1. Throughput and latency: one-window /v1 requests at each concurrency, then 256-series /v1 JSON requests
   (concurrency 4), for each RSA_WORKERS value, `--rounds` rounds alternating which goes first (this VM
   switches between two speeds); ratios against one process are per round, their median reported. The
   server's CPU per request is its whole process tree's (supervisor, engine, front ends); the load
   generator's own CPU per request is beside it, so it shows when the client, not the server, is the
   limit. Load: bench.harness's raw asyncio client, bodies of real windows, answers checked against
   ONNX Runtime.
2. The transport: one round trip through the engine process (RemoteEngine -> ZeroMQ -> EngineServer ->
   LocalEngine) against the same call in process, for 1 and 256 rows; the difference is the per-message
   cost.
3. A flood of big bodies on the default model: `--flood` concurrent 256-series requests at once (each a
   few MB of JSON), each client sending one. Every refusal (503) should come within 1 s (median under
   100 ms), with no 504, and the goodput (windows/s answered) at least 80% of the best run without
   refusals (the same bodies at concurrency 4). Per RSA_WORKERS value.
The targets (issue 26) are printed with their verdicts; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from app.artifacts.publish import version_numbers
from bench.harness import REPO
from bench.harness.cli import bench_parser, ints, parse_with_smoke
from bench.harness.load import Connection, LoadResult
from bench.harness.measure import load_cell
from bench.harness.report import Target, at_least, at_most, format_table, median_target, verdict
from bench.harness.servers import LocalServer, local_server, served_repository
from bench.harness.workloads import prepare_forecast_workload

SMOKE_ARGS = (
    "--workers",
    "1,2",
    "--rounds",
    "1",
    "--concurrency",
    "1,4",
    "--requests",
    "40",
    "--warmup",
    "10",
    "--big-requests",
    "2",
    "--big-series",
    "8",
    "--flood",
    "6",
    "--flood-series",
    "32",
    "--transport-calls",
    "20",
)
BIG_CONCURRENCY = 4
REFUSAL_S, REFUSAL_MEDIAN_S, GOODPUT_SHARE = 1.0, 0.1, 0.8
SCALING_ONE, SCALING_BIG = 1.0, 1.3  # N front ends ÷ one process, req/s: one-window, big requests


@dataclass
class Cell:
    workers: int
    result: LoadResult  # its server_cpu_s: the whole process tree's

    @property
    def concurrency(self) -> int:
        return self.result.concurrency

    @property
    def series(self) -> int:
        return self.result.series_per_request

    @property
    def server_cpu_s(self) -> float | None:
        return self.result.server_cpu_s

    @property
    def shaky(self) -> bool:
        """Errors, or not every request sent: a target computed from it says so."""
        r = self.result
        return r.error_count > 0 or r.completed < r.requests or r.stopped_by_time_limit

    @property
    def rps(self) -> float:
        return self.result.throughput

    @property
    def windows_per_s(self) -> float:
        return self.result.throughput * self.series

    def ms_per_request(self, seconds: float | None) -> str:
        return "-" if seconds is None else f"{1e3 * seconds / max(self.result.completed, 1):.2f}"


@dataclass
class Flood:
    workers: int
    best_windows_s: float
    answers: list[tuple[int, float]]  # (status, ms) per client
    duration_s: float
    series: int
    errors: dict[str, int]

    def statuses(self, code: int) -> list[float]:
        return [ms for status, ms in self.answers if status == code]

    @property
    def goodput(self) -> float:
        return len(self.statuses(200)) * self.series / self.duration_s


# A flood client sends its body in chunks, reading the answer all the while: as many clients on as many
# hosts would, so that a refusal's time is when the server gave it, not when this one process finished
# pushing every client's megabytes into its sockets (a second and more on 2 cores).
FLOOD_CHUNK = 256 * 1024


async def _big_request(url: str, body: bytes, check: Any, b: int) -> tuple[int, float, str | None]:
    """One client: (status, ms to the answer, a failure or None)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    conn = Connection(parts.hostname, parts.port)
    conn.reader, conn.writer = await asyncio.open_connection(parts.hostname, parts.port, limit=2**20)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nContent-Type: application/json"
        f"\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    writer = conn.writer

    async def send() -> None:
        writer.write(head)
        for start in range(0, len(body), FLOOD_CHUNK):
            writer.write(body[start : start + FLOOD_CHUNK])
            await writer.drain()
            # drain() returns without yielding while the kernel takes the bytes (megabytes on loopback):
            # without this, each client pushed 1.6 MB before any other could read its answer
            await asyncio.sleep(0)

    t0 = time.perf_counter()
    sending = asyncio.ensure_future(send())
    try:
        status, payload = await conn.read_answer()
    except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
        return 0, 1e3 * (time.perf_counter() - t0), f"transport: {exc}"
    finally:
        ms = 1e3 * (time.perf_counter() - t0)
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        conn.close()
    failure = check(b, payload) if status == 200 else None
    return status, ms, None if failure is None else failure.kind


SHIPPED = REPO / "model_repository" / "etth1-rsa"
LATEST = version_numbers(SHIPPED)[-1]


def _env(workers: int, repository: Path, device: str = "cpu") -> dict[str, str]:
    return {
        "RSA_WORKERS": str(workers),
        "RSA_MODEL_REPOSITORY": str(repository),
        "RSA_DEVICE": device,
    }


def throughput_round(
    args: argparse.Namespace, order: Sequence[int], floods: list[Flood] | None
) -> list[Cell]:
    """Each RSA_WORKERS value in `order`, one service started for it: the one-window cells, the big cell,
    and, when `floods` is given, the flood (appended there)."""
    small = prepare_forecast_workload(version=args.version, windows=64)
    big = prepare_forecast_workload(version=args.version, windows=64, series_per_request=args.big_series)
    repository = served_repository(SHIPPED, [args.version, LATEST])  # the flood's is the default version
    cells = []
    for workers in order:
        with local_server(_env(workers, repository, args.device)) as live:
            for c in args.concurrency:
                small_load = {"requests": args.requests, "warmup": args.warmup, "concurrency": c}
                result = load_cell(live.url, small, **small_load, seconds=args.seconds, pid=live.process.pid)
                cells.append(Cell(workers, result))
            big_load = {"requests": args.big_requests, "warmup": 1, "concurrency": BIG_CONCURRENCY}
            result = load_cell(live.url, big, **big_load, seconds=args.seconds, pid=live.process.pid)
            cells.append(Cell(workers, result))
            if floods is not None:
                floods.append(flood(args, workers, live))
    return cells


def transport(args: argparse.Namespace) -> list[list[object]]:
    """Round trips through the engine process against the same call in process, per feed size."""
    from app.core.config import Settings
    from app.engine.client import RemoteEngine
    from app.engine.local import LocalEngine

    repository = served_repository(SHIPPED, [args.version])
    manifest_dir = SHIPPED / str(args.version)
    manifest = json.loads((manifest_dir / "manifest.json").read_text())
    L, C = manifest["input_length"], len(manifest["channels"])
    cycle = manifest.get("cycle")
    settings = Settings(
        model_repository=repository, device=args.device, intra_op_threads=1, inline_max_rows=0
    )

    def feed(rows: int) -> dict[str, np.ndarray]:
        x = {"window": np.random.default_rng(rows).normal(10, 3, (rows, L, C)).astype(np.float32)}
        if cycle:
            x["phase"] = np.zeros(rows, np.int64)
        return x

    async def timed(engine: Any, rows: int) -> float:
        data = feed(rows)
        for _ in range(3):
            await engine.submit("etth1-rsa", args.version, data, 30.0)
        times = []
        for _ in range(args.transport_calls if rows == 1 else max(3, args.transport_calls // 20)):
            t0 = time.perf_counter()
            await engine.submit("etth1-rsa", args.version, data, 30.0)
            times.append(time.perf_counter() - t0)
        return 1e3 * statistics.median(times)

    async def ready(engine: Any) -> None:
        for _ in range(600):
            if engine.catalog.find_ready("etth1-rsa", args.version) is not None:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("the engine did not load the model")

    async def local() -> dict[int, float]:
        engine = LocalEngine(settings)
        await engine.start()
        await ready(engine)
        try:
            return {rows: await timed(engine, rows) for rows in (1, 256)}
        finally:
            await engine.stop()

    async def remote(address: str) -> dict[int, float]:
        engine = RemoteEngine(address, settings)
        await engine.start()
        await ready(engine)
        try:
            return {rows: await timed(engine, rows) for rows in (1, 256)}
        finally:
            await engine.stop(0)

    folder = tempfile.mkdtemp(prefix="bench-workers-")
    address = f"ipc://{folder}/engine.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    env.update(
        {
            "RSA_MODEL_REPOSITORY": str(repository),
            "RSA_DEVICE": args.device,
            "RSA_INTRA_OP_THREADS": "1",
            "RSA_INLINE_MAX_ROWS": "0",
            "RSA_LOG_LEVEL": "WARNING",
        }
    )
    engine_process = subprocess.Popen([sys.executable, "-m", "app.engine", address], cwd=REPO, env=env)
    try:
        while not Path(folder, "engine.sock").exists():
            time.sleep(0.05)
        there = asyncio.run(remote(address))
        here = asyncio.run(local())
    finally:
        engine_process.terminate()
        engine_process.wait(30)
    return [
        [rows, f"{here[rows]:.3f}", f"{there[rows]:.3f}", f"{1e3 * (there[rows] - here[rows]):.0f}"]
        for rows in (1, 256)
    ]


def flood(args: argparse.Namespace, workers: int, live: LocalServer) -> Flood:
    """The default (latest) version, `--flood` clients each sending one big body at once, after the same
    bodies at concurrency 4 (the best goodput without refusals)."""
    work = prepare_forecast_workload(version=LATEST, windows=16, series_per_request=args.flood_series)
    url = live.url + work.path
    best_load = {"requests": BIG_CONCURRENCY * 2, "warmup": 1, "concurrency": BIG_CONCURRENCY}
    best = load_cell(live.url, work, **best_load, seconds=args.seconds, pid=live.process.pid)

    async def at_once() -> tuple[list[tuple[int, float, str | None]], float]:
        t0 = time.perf_counter()
        calls = [
            _big_request(url, work.bodies[i % len(work.bodies)], work.checker, i % len(work.bodies))
            for i in range(args.flood)
        ]
        done = await asyncio.wait_for(asyncio.gather(*calls), args.seconds)
        return done, time.perf_counter() - t0

    done, duration = asyncio.run(at_once())
    errors: dict[str, int] = {}
    for status, _, failure in done:
        if failure is not None or status not in (200, 503, 504):
            kind = failure or f"status_{status}"
            errors[kind] = errors.get(kind, 0) + 1
    answers = [(status, ms) for status, ms, _ in done]
    return Flood(workers, best.throughput * args.flood_series, answers, duration, args.flood_series, errors)


def _rps_ratio(a: Cell, b: Cell) -> float:
    return a.rps / b.rps


def _p99_ratio(a: Cell, b: Cell) -> float:
    return a.result.percentile_ms(99) / b.result.percentile_ms(99)


def _value(t: Target) -> str:
    return "-" if t.value is None else f"{t.value:.2f}"


def _verdict(t: Target) -> str:
    return "no data" if t.met is None else verdict(t.met) + (" (errors or cut)" if t.shaky else "")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _cell_table(cells: list[list[Cell]]) -> str:
    """Every cell of every round: throughput, latency, CPU per request and errors."""
    rows = []
    for r, cell_round in enumerate(cells):
        for c in cell_round:
            rows.append(
                [
                    r + 1,
                    c.workers,
                    c.concurrency,
                    c.series,
                    f"{c.rps:.0f}",
                    f"{c.windows_per_s:.0f}",
                    f"{c.result.percentile_ms(50):.2f}",
                    f"{c.result.percentile_ms(99):.2f}",
                    c.ms_per_request(c.server_cpu_s),
                    c.ms_per_request(c.result.client_cpu_s),
                    c.result.error_count,
                ]
            )
    return format_table(
        [
            "round",
            "workers",
            "c",
            "series",
            "req/s",
            "windows/s",
            "p50 ms",
            "p99 ms",
            "server CPU ms/req",
            "client CPU ms/req",
            "errors",
        ],
        rows,
    )


def _scaling_lines(cells: list[list[Cell]], args: argparse.Namespace) -> list[str]:
    """Each worker count against the fewest, per kind of cell: the median over the rounds of the
    throughput and p99 ratios, against their goals."""
    lines = []
    base = min(args.workers)
    kinds = [(c, 1) for c in args.concurrency] + [(BIG_CONCURRENCY, args.big_series)]
    for workers in [w for w in args.workers if w != base]:
        for c, series in kinds:
            pairs = []
            for cell_round in cells:
                pair = {
                    x.workers: x
                    for x in cell_round
                    if x.concurrency == c and x.series == series and x.workers in (workers, base)
                }
                pairs.append((pair.get(workers), pair.get(base)))
            what = f"{series}-series c={c}" if series > 1 else f"one-window c={c}"
            floor = SCALING_BIG if series > 1 else SCALING_ONE
            rps = median_target(what, f"≥ {floor}", pairs, _rps_ratio, at_least(floor))
            p99 = median_target(what, "≤ 1.0", pairs, _p99_ratio, at_most(1.0))
            each = ", ".join(f"{x:.2f}" for x in rps.rounds)
            lines.append(
                f"{workers} front ends / {base}, {what}: throughput x{_value(rps)} (goal {rps.goal}; "
                f"rounds {each}) {_verdict(rps)}, p99 x{_value(p99)} (goal {p99.goal}) {_verdict(p99)}"
            )
    return lines


def _flood_table(floods: list[Flood]) -> str:
    """Each flood's answers by status, its refusals' times, its goodput against the best, and the targets'
    verdict."""
    flood_rows = []
    for f in floods:
        refused = f.statuses(503)
        flood_rows.append(
            [
                f.workers,
                len(f.statuses(200)),
                len(refused),
                len(f.statuses(504)),
                f"{max(refused, default=float('nan')):.0f}",
                f"{_median(refused):.0f}",
                f"{f.goodput:.0f}",
                f"{f.best_windows_s:.0f}",
                f"{f.goodput / f.best_windows_s:.2f}",
                sum(f.errors.values()),
            ]
        )
        verdicts = [
            max(refused, default=0) <= REFUSAL_S * 1e3,
            _median(refused) <= REFUSAL_MEDIAN_S * 1e3 if refused else True,
            not f.statuses(504),
            f.goodput >= GOODPUT_SHARE * f.best_windows_s,
        ]
        flood_rows[-1].append(verdict(all(verdicts)))
    return format_table(
        [
            "workers",
            "200",
            "503",
            "504",
            "503 max ms",
            "503 median ms",
            "goodput win/s",
            "best win/s",
            "share",
            "errors",
            "targets",
        ],
        flood_rows,
    )


def report(
    cells: list[list[Cell]], transport_rows: list[list[object]], floods: list[Flood], args: argparse.Namespace
) -> str:
    lines = [
        f"bench.workers: model etth1-rsa v{args.version} (one-window and {args.big_series}-series /v1 JSON), "
        f"{os.cpu_count()} CPUs, RSA_DEVICE={args.device}, {len(cells)} round(s); server CPU = the whole "
        "process tree's",
        _cell_table(cells),
        *_scaling_lines(cells, args),
        "",
        "Transport: one submit through the engine process against the same call in process (median ms)",
        format_table(["rows", "in process ms", "through the engine ms", "per message us"], transport_rows),
        "",
        f"Flood: {args.flood} clients at once, one {args.flood_series}-series body each, the default "
        "version; best = the same bodies at concurrency 4",
        _flood_table(floods),
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = bench_parser("bench.workers", __doc__, SMOKE_ARGS)
    ap.add_argument("--workers", type=ints, default=(1, 2), help="RSA_WORKERS values to compare")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=ints, default=(1, 16, 64))
    ap.add_argument("--requests", type=int, default=2000, help="one-window requests per cell")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--big-requests", type=int, default=16)
    ap.add_argument("--big-series", type=int, default=256)
    ap.add_argument("--flood", type=int, default=120, help="clients sending one big body each, at once")
    ap.add_argument("--flood-series", type=int, default=256)
    ap.add_argument("--transport-calls", type=int, default=400)
    ap.add_argument("--seconds", type=float, default=120.0, help="time limit per cell")
    ap.add_argument("--version", type=int, default=1, help="the version of parts 1 and 2")
    ap.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="RSA_DEVICE of every service and engine measured (cuda: the GPU lane)",
    )
    return parse_with_smoke(ap, argv, SMOKE_ARGS)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    cells: list[list[Cell]] = []
    floods: list[Flood] = []
    for r in range(args.rounds):
        order = list(args.workers) if r % 2 == 0 else list(reversed(args.workers))
        cells.append(throughput_round(args, order, floods if r == args.rounds - 1 else None))
    floods.sort(key=lambda f: f.workers)
    print(report(cells, transport(args), floods, args))


if __name__ == "__main__":
    main()
