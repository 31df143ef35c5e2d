"""bench/batch.py's contenders, each measured on the same synthetic parts: the raw session (in a process
of its own), the batch command on a local Ray, its scorer without Ray, the client through a local
service, and the distributed fit of the global read-out against the single-process one."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.harness import REPO
from bench.harness.servers import local_server
from bench.process_memory import PeakRss

__all__ = [
    "MODEL",
    "REPOSITORY",
    "BatchResult",
    "StoppedError",
    "batch_rate",
    "client_rate",
    "fit_compare",
    "raw_measured",
    "raw_session_rate",
    "scorer_rate",
    "stop_on_sigterm",
]

MODEL = "etth1-rsa"
REPOSITORY = REPO / "model_repository"


def raw_session_rate(
    threads: int, length: int, channels: int, batches: tuple[int, ...] = (64, 256, 512), windows: int = 1024
) -> tuple[dict[int, float], dict[int, float]]:
    """Windows/s of the bare session per batch size, about `windows` windows back to back after a warm-up
    call, and the CPU milliseconds per window its process used meanwhile (on a shared machine, the
    measure the load does not change much)."""
    from app.artifacts.contract import MODEL_FILE
    from app.engine.providers import RuntimeOptions
    from app.engine.session import create_session
    from batch.score import published

    folder, _ = published(str(REPOSITORY), MODEL, None)
    session = create_session(folder / MODEL_FILE, RuntimeOptions(device="cpu", intra_op_threads=threads))
    rng = np.random.default_rng(1)
    rates, cpu_ms = {}, {}
    for b in batches:
        feed = {
            "window": rng.normal(size=(b, length, channels)).astype(np.float32),
            "phase": np.arange(b) % 24,
        }
        session.run(None, feed)
        calls = max(1, -(-windows // b))  # sustained: about `windows` windows, not one lucky call
        cpu = time.process_time()
        rates[b] = (
            calls * b / _timed(lambda feed=feed, calls=calls: [session.run(None, feed) for _ in range(calls)])
        )
        cpu_ms[b] = (time.process_time() - cpu) * 1e3 / (calls * b)
    return rates, cpu_ms


def _timed(call: Callable[..., object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


class StoppedError(Exception):
    """SIGTERM (`timeout`) arrived: the run stops and reports how far it got."""


def stop_on_sigterm() -> None:
    def stop(signum: int, frame: object) -> None:
        raise StoppedError()

    signal.signal(signal.SIGTERM, stop)


@dataclass
class BatchResult:
    series: int = 0
    parts: int = 0
    skipped_parts: int = 0  # already in the output (`--output` from an earlier sitting): not scored here
    scoring_seconds: float = 0.0
    seconds_with_startup: float = 0.0
    peak_pss_mib: float = 0.0
    finished: bool = False
    cpu_seconds_by_process: dict[str, float] = field(default_factory=dict)
    cpu_ms_per_window: float = 0.0
    actor_cpu_ms_per_window: float = 0.0

    @property
    def rate(self) -> float:
        return self.series / self.scoring_seconds if self.scoring_seconds else 0.0


def batch_rate(
    input_dir: Path,
    output_dir: Path,
    threads: int,
    every_s: float,
    niceness: int = 0,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
) -> BatchResult:
    """The batch command on a local Ray over every part of `input_dir`: series/s while scoring, seconds
    with Ray's start-up, the peak PSS of the process tree. `checkpoint` gets the parts, series, seconds
    and peak so far after every part: a run that is killed keeps them (a SIGTERM while Ray runs in this
    process goes to Ray's own handler, which ends the process, so no handler of ours can save them)."""
    from batch.progress import Progress
    from batch.score import Job, run
    from batch.stderr import without_lines

    class Checkpointed(Progress):
        def update(self, series: int) -> None:
            super().update(series)
            if checkpoint is not None:
                checkpoint(
                    {
                        "parts": self.done_parts,
                        "series": self.series,
                        "scoring_seconds": time.monotonic() - self.t0,
                        "peak_pss_mib": rss.peak,
                        "at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                )

    job = Job(str(REPOSITORY), MODEL, threads=threads)
    progress = Checkpointed(sys.stdout, every_s=every_s, bar=False)
    result = BatchResult()
    start = time.perf_counter()
    with PeakRss(os.getpid(), print_every_s=every_s) as rss:
        try:
            with without_lines():  # what the batch command leaves out of its standard error (batch/stderr.py)
                summary = run(
                    job,
                    str(input_dir),
                    str(output_dir),
                    num_cpus=threads,
                    cpus_per_actor=threads,
                    worker_niceness=niceness,
                    progress=progress,
                )
            result.series, result.parts, result.scoring_seconds = (
                summary.series,
                summary.parts - summary.skipped,
                summary.seconds,
            )
            result.skipped_parts = summary.skipped
            result.finished = True
        except (StoppedError, SystemExit) as stop:
            # `ray.init` swaps the SIGTERM handler for one that exits with the signal's number
            if isinstance(stop, SystemExit) and stop.code != signal.SIGTERM:
                raise
            if getattr(progress, "t0", None) is not None:  # scoring had begun
                result.series, result.parts = progress.series, progress.done_parts
                result.scoring_seconds = time.monotonic() - progress.t0
    result.seconds_with_startup = time.perf_counter() - start
    stop_on_sigterm()  # ours again: Ray's shutdown left the default (SIGTERM ended the process unsaved)
    result.peak_pss_mib = rss.peak
    result.cpu_seconds_by_process = {k: round(v, 1) for k, v in rss.cpu.items() if v >= 0.05}
    if result.series:
        result.cpu_ms_per_window = sum(rss.cpu.values()) * 1e3 / result.series
        actor = sum(v for k, v in rss.cpu.items() if k.startswith("ray::MapWorker"))
        result.actor_cpu_ms_per_window = actor * 1e3 / result.series
        print(
            f"CPU ms a window: {result.cpu_ms_per_window:.1f} (whole tree), "
            f"{result.actor_cpu_ms_per_window:.1f} (the scoring actor)",
            flush=True,
        )
    top = ", ".join(f"{k} {v:.0f}" for k, v in list(result.cpu_seconds_by_process.items())[:8])
    print(f"CPU seconds of the batch job's processes (by name, the driver included): {top}", flush=True)
    return result


def scorer_rate(input_dir: Path, threads: int, parts: int = 2) -> float:
    """Windows/s of `Forecaster.score_table` on the first `parts` parts in this process, without Ray:
    what the batch command's own code costs beside the session."""
    from batch import io
    from batch.score import Forecaster, Job

    forecaster = Forecaster(Job(str(REPOSITORY), MODEL, threads=threads))
    done, seconds = 0, 0.0
    for path in sorted(input_dir.glob("part-*.parquet"))[:parts]:
        table = io.read_part(*io.open_fs(str(path)))
        start = time.perf_counter()
        done += forecaster.score_table(table).num_rows // forecaster.horizon
        seconds += time.perf_counter() - start
    return done / seconds


def client_rate(
    input_dir: Path, series: int, threads: int, done: dict[str, float], budget_s: float | None = None
) -> None:
    """Windows/s of `Client.forecast` on the first `series` series through a local service, one call per
    part; reading a part into pandas is not timed. `done` holds the series and seconds so far (a run
    stopped midway keeps them); past `budget_s` seconds no further part is started."""
    sys.path.insert(0, str(REPO / "client"))  # the client's own package, as `pip install ./client` puts it
    from rsa_client import Client

    env = {"RSA_MODEL_REPOSITORY": str(REPOSITORY), "RSA_MODELS": MODEL, "RSA_INTRA_OP_THREADS": str(threads)}
    done |= {"series": 0, "seconds": 0.0, "finished": False}
    with local_server(env) as server, Client(server.url, concurrency=2) as client:
        began = time.monotonic()
        for path in sorted(input_dir.glob("part-*.parquet")):
            if done["series"] >= series:
                break
            if budget_s is not None and time.monotonic() - began > budget_s:
                done["stopped_after_s"] = time.monotonic() - began
                return
            df = pd.read_parquet(path)
            if done["series"] == 0:  # warm: connections, the model's metadata, the session's first calls
                warm = df[df["unique_id"].isin(set(df["unique_id"].unique()[:8]))]
                client.forecast(warm, h=96, model=MODEL)
            ids = df["unique_id"].unique()
            if done["series"] + len(ids) > series:
                df = df[df["unique_id"].isin(set(ids[: int(series - done["series"])]))]
            start = time.perf_counter()
            out = client.forecast(df, h=96, model=MODEL)
            seconds = time.perf_counter() - start
            n = out["unique_id"].nunique()
            assert n == df["unique_id"].nunique() and len(out) == 96 * n
            done["series"] += n
            done["seconds"] += seconds
            del df, out
    done["finished"] = True


def fit_compare(limit: int | None, blocks: int, threads: int) -> dict[str, float]:
    """The global read-out on M3 monthly (every series, or the first `limit`), IRLS on: `fit_global` in
    this process against `batch.fit.fit_dataset` over `blocks` Ray Data blocks on a local Ray of `threads`
    CPUs. Returns the max |delta weight| relative to the largest weight, and both times."""
    import ray

    from batch.fit import fit_dataset, series_dataset
    from batch.score import init_local_ray
    from batch.stderr import without_lines
    from bench.competition_data import load_competition
    from export.global_models.config import PanelConfig
    from export.global_models.model import fit_global

    m3 = load_competition("M3", "monthly", limit=limit)
    cfg = PanelConfig(horizon=m3.horizon, period=12, input_periods=2, irls=2)
    start = time.perf_counter()
    single = fit_global(m3.train, cfg, 24)
    single_s = time.perf_counter() - start
    init_local_ray(num_cpus=threads, configure_logging=False)
    try:
        start = time.perf_counter()
        with without_lines():
            distributed = fit_dataset(series_dataset(m3.train, blocks=blocks), cfg, 24)
        distributed_s = time.perf_counter() - start
    finally:
        ray.shutdown()
        stop_on_sigterm()  # ours again, after Ray's
    delta = float(np.abs(distributed.weights - single.weights).max() / np.abs(single.weights).max())
    print(
        f"fit of M3 monthly ({len(m3.train):,} series, IRLS 2): single process {single_s:.1f} s, on Ray "
        f"({blocks} blocks) {distributed_s:.1f} s; max |delta weight| relative {delta:.2e} (target <= 1e-6)",
        flush=True,
    )
    return {
        "series": len(m3.train),
        "blocks": blocks,
        "single_seconds": single_s,
        "distributed_seconds": distributed_s,
        "max_abs_delta_weight_relative": delta,
    }


def raw_measured(
    threads: int,
    length: int,
    channels: int,
    cpu_log: list[dict[int, float]],
    batches: tuple[int, ...] = (64, 256, 512),
    windows: int = 1024,
) -> dict[int, float]:
    """`raw_session_rate` in a process of its own: the arena of its biggest batch must not count in the
    batch job's memory. Its CPU ms per window are appended to `cpu_log`."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        raw, cpu = pool.submit(raw_session_rate, threads, length, channels, batches, windows).result()
    cpu_log.append(cpu)
    rates = ", ".join(f"{b}: {r:,.0f} ({cpu[b]:.1f} CPU ms a window)" for b, r in raw.items())
    print(f"raw session windows/s by batch: {rates}", flush=True)
    return raw
