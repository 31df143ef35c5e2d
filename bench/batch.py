"""Forecasting a whole table (issue 37): the batch command and the Python client against the raw session.

    .venv/bin/python -m bench.batch [--series 100000] [--client-series 100000] [--parts 20] [--threads 2]
                                    [--smoke] [--json results/batch.json]

Synthetic series built from ETTh1 (random stretches of L + 8..L + 64 rows, each scaled and shifted, so no
two series are alike) are written as long Parquet parts (`unique_id, ds` and the 7 channels). On the same
cores, in the same run, one after the other:

1. **raw session**: the default model's session (the service's options, `--threads` intra-op threads),
   its best windows/s over batch sizes 64, 256 and 512, about 1,024 windows back to back each, on
   windows already in memory, in a process of its own: the ceiling; and the batch command's scorer on
   two parts in this process, without Ray (`Forecaster.score_table`: reading aside, its own cost);
2. **batch command** (`batch.score.run`: a local Ray of `--threads` CPUs, one actor with `--threads`
   threads): series/s from the first part scored to the last written (Ray's start-up apart, printed), and
   the peak resident memory (PSS) of the whole process tree (driver, Ray's processes, the actor),
   sampled every 0.2 s;
3. **client through the service**: `rsa_client.Client.forecast` of `--client-series` series, the service
   on `--threads` intra-op threads, on this machine's loopback.

Targets (issue 37): batch ≥ 0.7× and client ≥ 0.5× the raw session's windows/s. The peak RSS is printed
with the bound it is judged against (`--rss-bound-mib`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import REPO
from bench.harness.cli import bench_parser, parse_with_smoke
from bench.harness.report import format_table, write_json
from bench.harness.servers import local_server

MODEL = "etth1-rsa"
REPOSITORY = REPO / "model_repository"
CHANNELS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]


def synthetic_parts(folder: Path, series: int, parts: int, length: int, seed: int = 0) -> None:
    """`series` synthetic long series in `parts` Parquet files, each holding whole series."""
    wide = pd.read_csv(REPO / "data" / "ETT" / "ETTh1.csv", parse_dates=["date"])
    values = wide[CHANNELS].to_numpy(np.float64)
    stamps = wide["date"].to_numpy("datetime64[us]")
    rng = np.random.default_rng(seed)
    per_part = -(-series // parts)
    for p in range(parts):
        n = min(per_part, series - p * per_part)
        if n <= 0:
            break
        lengths = rng.integers(length + 8, length + 65, n)
        ends = rng.integers(lengths, len(values))
        scale = rng.uniform(0.5, 2.0, (n, 1, len(CHANNELS)))
        shift = rng.normal(0.0, 2.0, (n, 1, len(CHANNELS)))
        rows = np.concatenate([np.arange(e - k, e) for e, k in zip(ends, lengths, strict=True)])
        owner = np.repeat(np.arange(n), lengths)
        x = values[rows] * scale[owner, 0] + shift[owner, 0]
        table = {"unique_id": pa.array([f"p{p:03d}-{i:06d}" for i in owner]), "ds": stamps[rows]}
        table |= {c: x[:, j] for j, c in enumerate(CHANNELS)}
        pq.write_table(pa.table(table), folder / f"part-{p:04d}.parquet")


def raw_session_rate(
    threads: int, length: int, channels: int, batches: tuple[int, ...] = (64, 256, 512), windows: int = 1024
) -> dict[int, float]:
    """Windows/s of the bare session per batch size: about `windows` windows back to back, after a
    warm-up call."""
    from app.artifacts.contract import MODEL_FILE
    from app.engine.providers import RuntimeOptions
    from app.engine.session import create_session
    from batch.score import published

    folder, _ = published(str(REPOSITORY), MODEL, None)
    session = create_session(folder / MODEL_FILE, RuntimeOptions(device="cpu", intra_op_threads=threads))
    rng = np.random.default_rng(1)
    rates = {}
    for b in batches:
        feed = {
            "window": rng.normal(size=(b, length, channels)).astype(np.float32),
            "phase": np.arange(b) % 24,
        }
        session.run(None, feed)
        calls = max(1, -(-windows // b))  # sustained: about `windows` windows, not one lucky call
        rates[b] = (
            calls * b / _timed(lambda feed=feed, calls=calls: [session.run(None, feed) for _ in range(calls)])
        )
    return rates


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _pss_mib(pid: int) -> float:
    """A process's proportional set size (shared pages split among their sharers: Ray's processes share
    the object store and libraries, which a sum of RSS would count once per process)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _tree_rss_mib(root: int) -> float:
    """The PSS of `root` and every descendant, summed (Linux /proc): the tree's resident memory."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        parent = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(stat.parent.name))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError, ValueError):  # gone meanwhile
            total += _pss_mib(pid)
        todo.extend(children.get(pid, []))
    return total


class PeakRss:
    """The process tree's summed RSS, sampled every `every_s` in a thread; `peak` its maximum."""

    def __init__(self, root: int, every_s: float = 0.2) -> None:
        self.root, self.every_s, self.peak = root, every_s, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss_mib(self.root))
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def batch_rate(input_dir: Path, output_dir: Path, threads: int) -> tuple[float, float, float, int]:
    """(series/s while scoring, seconds with Ray's start-up, peak tree RSS MiB, series)."""
    import os

    from batch.score import Job, run

    job = Job(str(REPOSITORY), MODEL, threads=threads)
    start = time.perf_counter()
    with PeakRss(os.getpid()) as rss:
        summary = run(job, str(input_dir), str(output_dir), num_cpus=threads, cpus_per_actor=threads)
    total = time.perf_counter() - start
    return summary.series / summary.seconds, total, rss.peak, summary.series


def scorer_rate(input_dir: Path, threads: int, parts: int = 2) -> float:
    """Windows/s of `Forecaster.score_table` on the first `parts` parts in this process, without Ray:
    what the batch command's own code costs beside the session."""
    from batch import io
    from batch.score import Forecaster, Job

    forecaster = Forecaster(Job(str(REPOSITORY), MODEL, threads=threads))
    done, seconds = 0, 0.0
    for path in sorted(input_dir.glob("*.parquet"))[:parts]:
        table = io.read_part(*io.open_fs(str(path)))
        start = time.perf_counter()
        done += forecaster.score_table(table).num_rows // forecaster.horizon
        seconds += time.perf_counter() - start
    return done / seconds


def client_rate(input_dir: Path, series: int, threads: int) -> float:
    """Windows/s of `Client.forecast` of the first `series` series through a local service."""
    sys.path.insert(0, str(REPO / "client"))  # the client's own package, as `pip install ./client` puts it
    from rsa_client import Client

    frames, have = [], 0
    for path in sorted(input_dir.glob("*.parquet")):
        frame = pd.read_parquet(path)
        frames.append(frame)
        have += frame["unique_id"].nunique()
        if have >= series:
            break
    df = pd.concat(frames, ignore_index=True)
    keep = df["unique_id"].drop_duplicates().iloc[:series]
    df = df[df["unique_id"].isin(set(keep))]
    env = {"RSA_MODEL_REPOSITORY": str(REPOSITORY), "RSA_MODELS": MODEL, "RSA_INTRA_OP_THREADS": str(threads)}
    with local_server(env) as server, Client(server.url, concurrency=2) as client:
        client.forecast(df[df["unique_id"].isin(set(keep.iloc[:8]))], h=96)  # warm: connections, model
        start = time.perf_counter()
        out = client.forecast(df, h=96)
        seconds = time.perf_counter() - start
    assert out["unique_id"].nunique() == len(keep)
    return len(keep) / seconds


def main(argv: list[str] | None = None) -> int:
    smoke = ["--series", "400", "--client-series", "200", "--parts", "4"]
    ap = bench_parser("bench.batch", __doc__, smoke=smoke)
    ap.add_argument("--series", type=int, default=100_000)
    ap.add_argument("--client-series", type=int, default=100_000)
    ap.add_argument("--parts", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2, help="the cores every contender gets")
    ap.add_argument("--rss-bound-mib", type=float, default=4096.0)
    ap.add_argument("--json", type=Path, default=None)
    args = parse_with_smoke(ap, argv, smoke)
    from batch.score import published

    _, manifest = published(str(REPOSITORY), MODEL, None)
    L, C = manifest.input_length, manifest.n_channels
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    try:
        t0 = time.perf_counter()
        (work / "in").mkdir()
        synthetic_parts(work / "in", args.series, args.parts, L)
        print(
            f"{args.series:,} synthetic series in {args.parts} Parquet parts: "
            f"{time.perf_counter() - t0:.1f} s"
        )
        # in a process of its own: the arena of its biggest batch must not count in the batch job's memory
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            raw = pool.submit(raw_session_rate, args.threads, L, C).result()
        best = max(raw.values())
        print("raw session windows/s by batch: " + ", ".join(f"{b}: {r:,.0f}" for b, r in raw.items()))
        rate, total, peak, done = batch_rate(work / "in", work / "out", args.threads)
        print(f"batch: {done:,} series, {rate:,.0f} series/s scoring, {total:.1f} s with Ray's start-up")
        srate = scorer_rate(work / "in", args.threads)
        crate = client_rate(work / "in", args.client_series, args.threads)
        rows = [
            ["raw session (best batch)", f"{best:,.0f}", "1.00", ""],
            ["scorer without Ray", f"{srate:,.0f}", f"{srate / best:.2f}", ""],
            ["batch command", f"{rate:,.0f}", f"{rate / best:.2f}", ">= 0.70"],
            ["client through the service", f"{crate:,.0f}", f"{crate / best:.2f}", ">= 0.50"],
        ]
        print(format_table(["contender", "windows/s", "x raw", "target"], rows))
        print(
            f"peak resident memory (PSS) of the batch job's process tree: {peak:,.0f} MiB "
            f"(bound {args.rss_bound_mib:,.0f} MiB)"
        )
        if args.json is not None:
            write_json(
                args.json,
                {
                    "series": args.series,
                    "client_series": args.client_series,
                    "threads": args.threads,
                    "raw_windows_per_s": raw,
                    "batch_series_per_s": rate,
                    "scorer_without_ray_series_per_s": srate,
                    "batch_seconds_with_startup": total,
                    "batch_peak_rss_mib": peak,
                    "client_windows_per_s": crate,
                },
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
