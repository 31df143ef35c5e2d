"""Scaling: latency, throughput and server memory as the input length L and the series per request grow.

    .venv/bin/python -m bench.scaling [--lengths 96,192,336,720] [--batches 1,8] [--series 1,16,64,256]
                                      [--requests 20] [--threads 1] [--max-attention-mib 1024]
                                      [--device cpu|cuda]
    .venv/bin/python -m bench.scaling --smoke     # tiny sizes: under a minute, for the tests

For each L the architecture of a shipped version (`--architecture`, default 1: the full-attention model
the serving benchmark uses; 4, the default model, forms only the last query row) with `input_length`
L, untrained (speed and memory do not depend on the weights), is exported by the project's exporter
(`export.onnx.export_model`, self-verified) as model `rsa-l<L>` into one temporary model repository.

1. Session: `model.onnx` of every L in a session made as the service makes it
   (`app.engine.session.create_session`, CPU, `--threads` intra-op threads), timed on real ETTh1
   test windows at each `--batches` size. Every round runs every L once, in rotating order, so the
   machine's drift hits all alike; at most `--repeats` rounds, none started after `--budget` s; medians.
2. Server: per L, the real service (`python -m app` via `bench.harness.servers.local_server`, with
   `RSA_MODEL_REPOSITORY` on the temporary repository and `RSA_MODELS=rsa-l<L>`), then for each
   `--series` count, in ascending order: one warm-up request and `--requests` more over loopback
   (`bench.harness.load.run_load`, `--concurrency` connections, every answer checked against onnxruntime),
   then the server's VmRSS and VmHWM from /proc/<pid>/status.

How to read it:
- Session table: `ms/win` is latency per window; `xL0` is latency(L) / latency(first L) at that batch,
  to set against `L/L0` (what a cost linear in L would give) and `(L/L0)^2` (a cost quadratic in L).
  `slope` is d log(latency) / d log(L) from the previous L at the largest batch: near 1 the linear parts
  (embedding, feed-forward, the L·d → H head) dominate; as it climbs towards 2 the T×T attention
  (scores, softmax, the REM mix, ·V: O(L²) per head and window) has taken over.
- Server table: latency includes JSON parsing and encoding, which grow as L × series (linear). `peak`
  is VmHWM, the process's high-water mark: it never goes down, which is why the series counts run in
  ascending order, so each row's peak is that row's working set (or an earlier, smaller one's if
  higher). `ready` is VmRSS once the model is loaded and warmed up. `attn MiB` is one attention matrix
  of the call (series × channels × heads × L² float32): the graph holds a few at once, the quadratic
  memory term. `per call` is the series the service puts in one session call (its version's
  `max_series_per_call`: RSA_MAX_BATCH_ROWS, capped by RSA_CALL_ATTENTION_MIB), so a request of more is
  split and `attn MiB` is that of one such call. Rows whose call would form more than
  `--max-attention-mib` are skipped, not run.
Compare rows within one run only: the machine's speed drifts between runs.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.artifacts.contract import FORECAST_OUTPUT, MODEL_FILE
from bench.harness import models as hm
from bench.harness.cli import bench_parser, ints, parse_with_smoke
from bench.harness.load import load_workload
from bench.harness.measure import interleaved, median_ms, proc_status_mib
from bench.harness.report import format_table
from bench.harness.servers import local_server
from bench.harness.workloads import prepare_forecast_workload
from export.checkpoint import load_checkpoint
from export.data import ETT_DIR
from export.onnx import export_model
from models import ModelConfig


def model_name(length: int) -> str:
    return f"rsa-l{length}"


@dataclass(frozen=True)
class Exported:
    cfg: ModelConfig
    info: dict[str, Any]  # the checkpoint's metadata: data set, scaler


def export_lengths(lengths: Sequence[int], repo: Path, tmp: Path, version: int) -> dict[int, Exported]:
    """Shipped `version`'s architecture at each L, exported into `repo` as model `rsa-l<L>`, version 1."""
    exported = {}
    for length in lengths:
        cfg = ModelConfig.from_dict({**hm.shipped_architecture(version=version), "input_length": length})
        checkpoint = hm.untrained_checkpoint(cfg, tmp / f"l{length}.safetensors")
        export_model(
            checkpoint,
            repo,
            model_name(length),
            version=1,
            verify_batch_sizes=hm.LONG_INPUT_VERIFY_BATCHES,
            levels=hm.NO_INTERVALS,
        )
        model, info = load_checkpoint(checkpoint)
        exported[length] = Exported(model.cfg, info)
    return exported


# -- 1. the raw session -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionRow:
    length: int
    ms: dict[int, float | None]  # batch -> median ms; None: skipped (memory)
    rounds: dict[int, int]


def measure_sessions(repo: Path, models: dict[int, Exported], args: argparse.Namespace) -> list[SessionRow]:
    sessions = {
        L: hm.ort_session(repo / model_name(L) / "1" / MODEL_FILE, args.threads, args.device) for L in models
    }
    feeds = {L: hm.raw_test_feeds(m.info, m.cfg, args.batches) for L, m in models.items()}
    ms: dict[int, dict[int, float | None]] = {L: {} for L in models}
    rounds: dict[int, dict[int, int]] = {L: {} for L in models}

    def call(feed: hm.Feed, session: Any) -> Callable[[], object]:
        return lambda: session.run([FORECAST_OUTPUT], feed)

    for b in args.batches:
        cases = {
            L: call(feeds[L][b], sessions[L])
            for L, m in models.items()
            if hm.attention_mib(m.cfg, b) <= args.max_attention_mib
        }
        times = interleaved(cases, repeats=args.repeats, budget_s=args.budget) if cases else {}
        for L in models:
            ms[L][b] = median_ms(times[L]) if L in times else None
            rounds[L][b] = len(times.get(L, []))
    return [SessionRow(L, ms[L], rounds[L]) for L in models]


def session_table(rows: Sequence[SessionRow], batches: Sequence[int]) -> str:
    L0 = rows[0].length
    top = max(batches)
    header = ["L"]
    for b in batches:
        header += [f"ms@{b}", f"ms/win@{b}", f"xL0@{b}"]
    header += ["L/L0", "(L/L0)^2", f"slope@{top}", "rounds"]
    body = []
    for i, r in enumerate(rows):
        line: list[object] = [r.length]
        for b in batches:
            ms, base = r.ms[b], rows[0].ms[b]
            if ms is None:
                line += ["skipped", "", ""]
                continue
            line += [f"{ms:.3f}", f"{ms / b:.3f}", f"{ms / base:.2f}" if base else "-"]
        prev = rows[i - 1] if i else None
        slope = "-"
        if prev is not None and r.ms[top] and prev.ms[top]:
            slope = f"{math.log(r.ms[top] / prev.ms[top]) / math.log(r.length / prev.length):.2f}"
        line += [f"{r.length / L0:.2f}", f"{(r.length / L0) ** 2:.2f}", slope, min(r.rounds.values())]
        body.append(line)
    return format_table(header, body)


# -- 2. the server --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerRow:
    length: int
    series: int
    attention_mib: float  # of one session call
    ready_mib: float
    per_call: int  # series per session call
    requests: int = 0  # measured requests answered; 0 with `skipped`
    p50_ms: float = math.nan
    rps: float = math.nan
    peak_mib: float = math.nan
    errors: int = 0
    skipped: bool = False


def measure_server(repo: Path, length: int, cfg: ModelConfig, args: argparse.Namespace) -> list[ServerRow]:
    """One service process for this L; the series counts in ascending order (VmHWM only grows)."""
    env = {
        "RSA_MODEL_REPOSITORY": str(repo),
        "RSA_MODELS": model_name(length),
        "RSA_DEVICE": args.device,
        "RSA_INTRA_OP_THREADS": str(args.threads),
    }
    rows: list[ServerRow] = []
    with local_server(env) as server:
        pid = server.process.pid
        ready = proc_status_mib(pid, "VmRSS")
        cap = max_series_per_call(server.url, model_name(length))
        for series in sorted(args.series):
            per_call = min(series, cap)
            mib = hm.attention_mib(cfg, per_call)
            if mib > args.max_attention_mib:
                rows.append(ServerRow(length, series, mib, ready, per_call, skipped=True))
                continue
            work = prepare_forecast_workload(
                model_name(length),
                1,
                repository=repo,
                data_dir=ETT_DIR,
                windows=args.windows,
                series_per_request=series,
            )
            result = load_workload(
                server.url,
                work,
                requests=args.requests,
                concurrency=args.concurrency,
                time_limit_s=args.time_limit,
                warmup=1,  # the first call at a size plans the session's memory for it
                request_timeout_s=args.time_limit,
                server_pid=pid,
            )
            rows.append(
                ServerRow(
                    length,
                    series,
                    mib,
                    ready,
                    per_call,
                    requests=result.completed,
                    p50_ms=result.percentile_ms(50),
                    rps=result.throughput,
                    peak_mib=proc_status_mib(pid, "VmHWM"),
                    errors=result.error_count,
                )
            )
    if server.exit_code != 0:
        raise SystemExit(f"the service for L={length} exited with {server.exit_code}:\n{server.output()}")
    return rows


def max_series_per_call(url: str, model: str) -> int:
    """What the service says its version 1 puts in one session call."""
    with urllib.request.urlopen(f"{url}/v1/models/{model}", timeout=10) as answer:
        versions = json.load(answer)["versions"]
    return int(next(v for v in versions if v["version"] == 1)["batching"]["max_series_per_call"])


def server_table(rows: Sequence[ServerRow]) -> str:
    header = ["L", "series", "per call", "requests", "p50 ms", "req/s", "series/s", "ms/series"]
    header += ["ready MiB", "peak MiB", "attn MiB", "errors"]
    body: list[list[object]] = []
    for r in rows:
        line: list[object] = [r.length, r.series, r.per_call]
        if r.skipped:
            line += ["skipped", "", "", "", "", f"{r.ready_mib:.0f}", "", f"{r.attention_mib:.1f}", ""]
        else:
            line += [
                r.requests,
                f"{r.p50_ms:.1f}",
                f"{r.rps:.1f}",
                f"{r.rps * r.series:.0f}",
                f"{r.p50_ms / r.series:.3f}",
                f"{r.ready_mib:.0f}",
                f"{r.peak_mib:.0f}",
                f"{r.attention_mib:.1f}",
                r.errors,
            ]
        body.append(line)
    return format_table(header, body)


# -- the command line ---------------------------------------------------------------------------------------
SMOKE_ARGS = (
    *("--lengths", "16,32", "--batches", "1,4", "--series", "1,4", "--requests", "3", "--windows", "2"),
    *("--repeats", "3", "--budget", "1", "--time-limit", "30"),
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = bench_parser("bench.scaling", __doc__, SMOKE_ARGS)
    ap.add_argument("--lengths", type=ints, default=(96, 192, 336, 720), help="input lengths L, ascending")
    ap.add_argument("--batches", type=ints, default=(1, 8), help="windows per session call")
    ap.add_argument("--repeats", type=int, default=50, help="session rounds per batch size, at most")
    ap.add_argument("--budget", type=float, default=10.0, help="session seconds per batch size, at most")
    ap.add_argument("--series", type=ints, default=(1, 16, 64, 256), help="series per request")
    ap.add_argument("--requests", type=int, default=20, help="measured requests per (L, series)")
    ap.add_argument("--concurrency", type=int, default=1, help="connections sending at once")
    ap.add_argument("--windows", type=int, default=8, help="distinct request bodies per (L, series)")
    ap.add_argument("--time-limit", type=float, default=160.0, help="seconds per (L, series), at most")
    hm.add_export_arguments(ap, threads="ORT intra-op threads (session and server)", skip="skip bigger calls")
    ap.add_argument("--no-server", action="store_true", help="the session table only")
    args = parse_with_smoke(ap, argv, SMOKE_ARGS)
    if list(args.lengths) != sorted(set(args.lengths)) or not args.batches or not args.series:
        ap.error("--lengths must be ascending and distinct; --batches and --series not empty")
    if min(args.threads, args.repeats, args.requests, args.concurrency, args.windows) < 1:
        ap.error("--threads, --repeats, --requests, --concurrency and --windows must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    hm.quiet_exporter()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        models = export_lengths(args.lengths, repo, tmp, args.architecture)
        exported = time.perf_counter() - t0
        sessions = measure_sessions(repo, models, args)
        servers = (
            []
            if args.no_server
            else [r for L, m in models.items() for r in measure_server(repo, L, m.cfg, args)]
        )
    measured = time.perf_counter() - t0 - exported
    print(
        f"architecture of etth1-rsa version {args.architecture}; exported {len(models)} models in "
        f"{exported:.0f} s; measured in {measured:.0f} s"
    )
    print(
        f"1. ONNX Runtime session (service options, {args.device}, {args.threads} intra-op thread(s)), "
        f"medians of interleaved calls; L0 = {args.lengths[0]}; slope = d log(ms) / d log(L) at batch "
        f"{max(args.batches)}."
    )
    print(session_table(sessions, args.batches))
    if servers:
        print(
            f"2. `python -m app` over loopback, {args.requests} requests per row after 1 warm-up, "
            f"concurrency {args.concurrency}; ready = VmRSS after start-up, peak = VmHWM after the row."
        )
        print(server_table(servers))
    worst = [r for r in servers if r.errors or (not r.skipped and r.requests < args.requests)]
    if worst:
        raise SystemExit(f"{len(worst)} server row(s) with errors or unsent requests")


if __name__ == "__main__":
    main()
