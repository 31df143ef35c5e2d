"""Forecasting a whole table (issue 37): the batch command and the Python client against the raw session.

    .venv/bin/python -m bench.batch [--series 100000] [--client-series 100000] [--parts 20] [--threads 2]
                                    [--contenders raw,batch,scorer,client] [--input DIR] [--output DIR]
                                    [--float32]
                                    [--smoke] [--json results/batch/run.json]

Synthetic series built from ETTh1 (random stretches of L + 8..L + 64 rows, each scaled and shifted, so no
two series are alike) are written as long Parquet parts (`unique_id, ds` and the 7 channels; `--float32`
stores the channels as float32, half the disk for the million-series run). `--input DIR` keeps them there
(parts already there are reused), else they go to a temporary folder. On the same cores, in the same
run, one after the other:

1. **raw session**: the default model's session (the service's options, `--threads` intra-op threads),
   its best windows/s over batch sizes 64, 256 and 512, about 1,024 windows back to back each, on
   windows already in memory, in a process of its own: the ceiling. It is measured before the batch
   command, again after it and again after the client (the machine's load drifts within a run), and every
   ratio is taken against the best of all of them; also the batch command's scorer on two parts in this
   process, without Ray (`Forecaster.score_table`: reading aside, its own cost);
2. **batch command** (`batch.score.run`: a local Ray of `--threads` CPUs, one actor with `--threads`
   threads): series/s from the first part scored to the last written (Ray's start-up apart, printed), and
   the peak resident memory (PSS) of the whole process tree (driver, Ray's processes, the actor),
   sampled every second (the peak so far and the job's progress are printed as it runs, and `--json` is
   rewritten after every part, so a run killed by `timeout` keeps how far it got: with Ray in this
   process, SIGTERM ends it in Ray's own handler);
3. **client through the service**: `rsa_client.Client.forecast` of `--client-series` series, the service
   on `--threads` intra-op threads, on this machine's loopback, one call per part (a DataFrame of a few
   thousand series, as a caller with a big table would hand it over; reading the part is not timed).

`--contenders` picks some of them (`batch` alone: the million-series run), and `fit` adds the distributed
fit of the global read-out on M3 monthly (`batch.fit.fit_dataset` over 8 Ray Data blocks) against the
single-process `export.panel.fit_global`, IRLS on, their max |delta weight| relative. Targets (issue
37): batch ≥ 0.7× and client ≥ 0.5× the raw session's windows/s. The peak RSS is printed with the bound
it is judged against (`--rss-bound-mib`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import REPO
from bench.harness.cli import bench_parser, ints, parse_with_smoke
from bench.harness.report import format_table, write_json
from bench.harness.servers import local_server

MODEL = "etth1-rsa"
REPOSITORY = REPO / "model_repository"
CHANNELS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]


def synthetic_parts(
    folder: Path, series: int, parts: int, length: int, seed: int = 0, dtype: type = np.float64
) -> int:
    """`series` synthetic long series in `parts` Parquet files, each holding whole series; a part already
    in `folder` is kept (its series are drawn from a seed of its own, so a rerun draws the same ones).
    Returns the number of parts written."""
    wide = pd.read_csv(REPO / "data" / "ETT" / "ETTh1.csv", parse_dates=["date"])
    values = wide[CHANNELS].to_numpy(np.float64)
    stamps = pa.array(wide["date"].to_numpy("datetime64[us]"))
    per_part = -(-series // parts)
    written = 0
    for p in range(parts):
        n = min(per_part, series - p * per_part)
        path = folder / f"part-{p:04d}.parquet"
        if n <= 0:
            break
        if path.exists():
            continue
        rng = np.random.default_rng([seed, p])
        lengths = rng.integers(length + 8, length + 65, n)
        ends = rng.integers(lengths, len(values))
        scale = rng.uniform(0.5, 2.0, (n, len(CHANNELS)))
        shift = rng.normal(0.0, 2.0, (n, len(CHANNELS)))
        owner = np.repeat(np.arange(n), lengths)
        rows = np.arange(len(owner)) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # 0..k-1 per series
        rows += np.repeat(ends - lengths, lengths)
        x = (values[rows] * scale[owner] + shift[owner]).astype(dtype, copy=False)
        names = pa.array([f"p{p:04d}-{i:06d}" for i in range(n)])
        table = {"unique_id": names.take(pa.array(owner)), "ds": stamps.take(pa.array(rows))}
        table |= {c: x[:, j] for j, c in enumerate(CHANNELS)}
        pq.write_table(pa.table(table), folder / f".{path.name}")
        (folder / f".{path.name}").rename(path)  # a part that exists is whole
        written += 1
    return written


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


def _named(pid: int, name: str) -> str:
    """A Python process by what it runs (this bench, Ray's agents), other processes by their name."""
    if pid == os.getpid():
        return "driver (this bench)"
    if not name.startswith("python"):
        return name
    with contextlib.suppress(OSError):
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        for i, arg in enumerate(args[1:], 1):
            if arg == b"-m" and i + 1 < len(args):
                return f"python -m {args[i + 1].decode()}"
            if arg.endswith(b".py"):
                return f"python {Path(arg.decode()).name}"
    return name


def _tree(root: int) -> dict[int, tuple[str, float]]:
    """`root` and every descendant (Linux /proc): pid -> (its name, the CPU seconds it has used)."""
    stats: dict[int, list[str]] = {}
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        pid, (name, rest) = int(stat.parent.name), text.split(" (", 1)[1].rsplit(") ", 1)
        fields = rest.split()
        stats[pid] = [name, *fields]
        children.setdefault(int(fields[1]), []).append(pid)
    tick = os.sysconf("SC_CLK_TCK")
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:  # fields after the name: state ppid ... utime (12th) stime (13th)
            found[pid] = (_named(pid, stats[pid][0]), (int(stats[pid][12]) + int(stats[pid][13])) / tick)
        todo.extend(children.get(pid, []))
    return found


def _tree_rss_mib(root: int) -> float:
    """The PSS of `root` and every descendant, summed: the tree's resident memory."""
    total = 0.0
    for pid in _tree(root):
        with contextlib.suppress(OSError, ValueError):  # gone meanwhile
            total += _pss_mib(pid)
    return total


class PeakRss:
    """The process tree's summed PSS, sampled every `every_s` in a thread; `peak` its maximum, printed
    every `print_every_s` when that is set; `cpu` the CPU seconds each process used (by name, summed, as
    last seen): where the cores went. The whole /proc is walked for new processes every `walk_every_s`
    only: at every 0.5 s, the walk and the samples took a share of the cores the job was measured on (the
    driver's tree used 196 CPU seconds beside the actor's 516 in the 100,000-series run, 2026-11-27)."""

    def __init__(
        self, root: int, every_s: float = 1.0, print_every_s: float | None = None, walk_every_s: float = 10.0
    ) -> None:
        self.root, self.every_s, self.print_every_s, self.peak = root, every_s, print_every_s, 0.0
        self.walk_every_s = walk_every_s
        self._seen: dict[int, tuple[str, float]] = {}
        self._start: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = walked = time.monotonic()
        tree = _tree(self.root)
        while not self._stop.is_set():
            if time.monotonic() - walked >= self.walk_every_s:
                walked, tree = time.monotonic(), _tree(self.root)
                self._seen.update(tree)
            total = 0.0
            for pid in tree:
                with contextlib.suppress(OSError, ValueError):  # gone meanwhile
                    total += _pss_mib(pid)
            self.peak = max(self.peak, total)
            if self.print_every_s is not None and time.monotonic() - last >= self.print_every_s:
                last = time.monotonic()
                print(f"  peak PSS so far {self.peak:,.0f} MiB (now {total:,.0f})", flush=True)
            self._stop.wait(self.every_s)
        self._seen.update(_tree(self.root))

    @property
    def cpu(self) -> dict[str, float]:
        by_name: dict[str, float] = {}
        for pid, (name, seconds) in self._seen.items():
            by_name[name] = by_name.get(name, 0.0) + seconds - self._start.get(pid, 0.0)
        return dict(sorted(by_name.items(), key=lambda kv: -kv[1]))

    def __enter__(self) -> PeakRss:
        self._start = {pid: cpu for pid, (_, cpu) in _tree(self.root).items()}  # this process's past
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class StoppedError(Exception):
    """SIGTERM (`timeout`) arrived: the run stops and reports how far it got."""


def _stop_on_sigterm() -> None:
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
    _stop_on_sigterm()  # ours again: Ray's shutdown left the default (SIGTERM ended the process unsaved)
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
    from bench.competitions import load_competition
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
        distributed = fit_dataset(series_dataset(m3.train, blocks=blocks), cfg, 24)
        distributed_s = time.perf_counter() - start
    finally:
        ray.shutdown()
        _stop_on_sigterm()  # ours again, after Ray's
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
    threads: int, length: int, channels: int, cpu_log: list[dict[int, float]]
) -> dict[int, float]:
    """`raw_session_rate` in a process of its own: the arena of its biggest batch must not count in the
    batch job's memory. Its CPU ms per window are appended to `cpu_log`."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        raw, cpu = pool.submit(raw_session_rate, threads, length, channels).result()
    cpu_log.append(cpu)
    rates = ", ".join(f"{b}: {r:,.0f} ({cpu[b]:.1f} CPU ms a window)" for b, r in raw.items())
    print(f"raw session windows/s by batch: {rates}", flush=True)
    return raw


def report(saved: dict[str, Any]) -> None:
    """The table of every contender measured, against the best raw rate of the run."""
    best = max((r for raw in saved["raw_windows_per_s"] for r in raw.values()), default=float("nan"))
    saved["raw_best_windows_per_s"] = best
    rows = [["raw session (best batch)", f"{best:,.0f}", "1.00", ""]]
    measured = [
        ("scorer without Ray", saved.get("scorer_without_ray_series_per_s"), ""),
        *(
            (f"batch command (workers at nice {n})", b["series_per_s"], ">= 0.70")
            for n, b in saved.get("batch_by_niceness", {}).items()
        ),
        ("client through the service", saved.get("client_windows_per_s"), ">= 0.50"),
    ]
    rows += [[name, f"{r:,.0f}", f"{r / best:.2f}", goal] for name, r, goal in measured if r is not None]
    print(format_table(["contender", "windows/s", "x raw", "target"], rows))
    if "batch" in saved:
        print(
            "peak resident memory (PSS) of the batch job's process tree: "
            f"{saved['batch']['peak_pss_mib']:,.0f} MiB (bound {saved['rss_bound_mib']:,.0f} MiB)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    smoke = ["--series", "400", "--client-series", "200", "--parts", "4"]
    ap = bench_parser("bench.batch", __doc__, smoke=smoke)
    ap.add_argument("--series", type=int, default=100_000)
    ap.add_argument("--client-series", type=int, default=100_000)
    ap.add_argument("--parts", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2, help="the cores every contender gets")
    ap.add_argument(
        "--contenders",
        default="raw,batch,scorer,client",
        help="comma-separated: some of raw,batch,scorer,client, and fit",
    )
    ap.add_argument(
        "--client-budget-s", type=float, default=None, help="start no client part after this many seconds"
    )
    ap.add_argument(
        "--ray-niceness",
        type=ints,
        default=(0,),
        help="the local Ray's worker niceness; several: one run each",
    )
    ap.add_argument("--fit-series", type=int, default=None, help="the fit's first M3 monthly series (all)")
    ap.add_argument(
        "--input", type=Path, default=None, help="keep the synthetic parts here (reused if there)"
    )
    ap.add_argument(
        "--output",
        type=Path,
        default=None,
        help="keep the batch command's output parts here (OUTPUT/out-NICENESS); a rerun skips the parts "
        "already there and scores the rest (a long run in several sittings: each prints its own rate)",
    )
    ap.add_argument("--float32", action="store_true", help="store the synthetic channels as float32")
    ap.add_argument("--every-s", type=float, default=60.0, help="progress and peak memory printed this often")
    ap.add_argument("--rss-bound-mib", type=float, default=4096.0)
    ap.add_argument("--json", type=Path, default=None)
    args = parse_with_smoke(ap, argv, smoke)
    contenders = set(args.contenders.split(","))
    unknown = contenders - {"raw", "batch", "scorer", "client", "fit"}
    if unknown:
        ap.error(f"--contenders: unknown {sorted(unknown)}")
    from batch.score import published

    _, manifest = published(str(REPOSITORY), MODEL, None)
    L, C = manifest.input_length, manifest.n_channels
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    inputs = args.input if args.input is not None else work / "in"
    saved: dict[str, Any] = {
        "series": args.series,
        "client_series": args.client_series,
        "parts": args.parts,
        "threads": args.threads,
        "contenders": sorted(contenders),
        "float32": args.float32,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_before": list(os.getloadavg()),
        "rss_bound_mib": args.rss_bound_mib,
    }
    _stop_on_sigterm()
    try:
        t0 = time.perf_counter()
        inputs.mkdir(parents=True, exist_ok=True)
        dtype = np.float32 if args.float32 else np.float64
        written = synthetic_parts(inputs, args.series, args.parts, L, dtype=dtype)
        print(
            f"{args.series:,} synthetic series in {args.parts} Parquet parts ({written} written now): "
            f"{time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        if "fit" in contenders:
            saved["fit"] = fit_compare(args.fit_series, 8, args.threads)
        raws: list[dict[int, float]] = []
        saved["raw_windows_per_s"] = raws
        raw_cpu: list[dict[int, float]] = []
        saved["raw_cpu_ms_per_window"] = raw_cpu
        if "raw" in contenders:
            raws.append(raw_measured(args.threads, L, C, raw_cpu))
        if "batch" in contenders:

            def checkpoint(partial: dict[str, Any]) -> None:
                saved["batch_so_far"] = partial
                if args.json is not None:
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    write_json(args.json, saved)

            saved["batch_by_niceness"] = {}
            for niceness in args.ray_niceness:
                result = batch_rate(
                    inputs,
                    (args.output or work) / f"out-{niceness}",
                    args.threads,
                    args.every_s,
                    niceness,
                    checkpoint,
                )
                saved["batch"] = asdict(result) | {"series_per_s": result.rate, "worker_niceness": niceness}
                saved["batch_by_niceness"][str(niceness)] = saved["batch"]
                state = "" if result.finished else " (STOPPED before the end: the parts done so far)"
                if result.skipped_parts:
                    state += (
                        f" ({result.skipped_parts} parts already in --output, not scored in this sitting)"
                    )
                print(
                    f"batch (Ray's workers at niceness {niceness}): {result.series:,} series in "
                    f"{result.parts} parts, {result.rate:,.0f} series/s scoring, "
                    f"{result.scoring_seconds:.1f} s scoring, {result.seconds_with_startup:.1f} s with Ray's "
                    f"start-up{state}; peak PSS of its process tree {result.peak_pss_mib:,.0f} MiB",
                    flush=True,
                )
                if not result.finished:
                    raise StoppedError()
            if "raw" in contenders:
                raws.append(raw_measured(args.threads, L, C, raw_cpu))
        if "scorer" in contenders:
            saved["scorer_without_ray_series_per_s"] = scorer_rate(inputs, args.threads)
        if "client" in contenders:
            client: dict[str, float] = {}
            saved["client"] = client
            client_rate(inputs, args.client_series, args.threads, client, args.client_budget_s)
            saved["client_windows_per_s"] = client["series"] / client["seconds"]
            saved["client_series_done"] = client["series"]
            state = "" if client["finished"] else " (its time budget spent: the parts done)"
            print(
                f"client: {client['series']:,.0f} of {args.client_series:,} series, "
                f"{saved['client_windows_per_s']:,.0f} windows/s, {client['seconds']:.1f} s{state}",
                flush=True,
            )
            if "raw" in contenders:
                raws.append(raw_measured(args.threads, L, C, raw_cpu))
    except StoppedError:
        saved["stopped"] = "SIGTERM"
        if saved.get("client", {}).get("seconds"):  # the parts the client finished
            saved["client_windows_per_s"] = saved["client"]["series"] / saved["client"]["seconds"]
            saved["client_series_done"] = saved["client"]["series"]
        print("stopped by SIGTERM: what was measured so far (every rate below on the parts done)", flush=True)
    finally:
        report(saved)
        saved["load_average_after"] = list(os.getloadavg())
        saved["ended_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_json(args.json, saved)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
