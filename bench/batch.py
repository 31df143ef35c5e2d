"""Forecasting a whole table (issue 37): the batch command and the Python client against the raw session.

    .venv/bin/python -m bench.batch [--series 100000] [--client-series 100000] [--parts 20] [--threads 2]
                                    [--contenders raw,batch,scorer,client] [--input DIR] [--output DIR]
                                    [--float32] [--raw-batches 64,256,512] [--raw-windows 1024]
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
single-process `export.global_models.model.fit_global`, IRLS on, their max |delta weight| relative.
Targets (issue 37): batch ≥ 0.7× and client ≥ 0.5× the raw session's windows/s. The peak RSS is
printed with the bound it is judged against (`--rss-bound-mib`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.batch_contenders import (
    MODEL,
    REPOSITORY,
    StoppedError,
    batch_rate,
    client_rate,
    fit_compare,
    raw_measured,
    scorer_rate,
    stop_on_sigterm,
)
from bench.batch_parts import synthetic_parts
from bench.harness.cli import bench_parser, ints, parse_with_smoke
from bench.harness.report import format_table, write_json


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # The raw session's three measures at its default sizes took 40 s each on 2 cores (2 of the smoke's
    # 2.3 minutes, 2026-12-04): the smoke form measures one batch size, briefly.
    smoke = ["--series", "400", "--client-series", "200", "--parts", "4", "--raw-batches", "64"]
    smoke += ["--raw-windows", "64"]
    ap = bench_parser("bench.batch", __doc__, smoke=smoke)
    ap.add_argument("--series", type=int, default=100_000)
    ap.add_argument("--client-series", type=int, default=100_000)
    ap.add_argument("--parts", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2, help="the cores every contender gets")
    ap.add_argument("--raw-batches", type=ints, default=(64, 256, 512), help="the raw session's batch sizes")
    ap.add_argument(
        "--raw-windows",
        type=int,
        default=1024,
        help="windows the raw session runs back to back per batch size",
    )
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
    unknown = _contenders(args) - {"raw", "batch", "scorer", "client", "fit"}
    if unknown:
        ap.error(f"--contenders: unknown {sorted(unknown)}")
    return args


def _contenders(args: argparse.Namespace) -> set[str]:
    return set(args.contenders.split(","))


def _measure_batch(args: argparse.Namespace, inputs: Path, work: Path, saved: dict[str, Any]) -> None:
    """The batch command at each `--ray-niceness`, into `saved` (`--json` rewritten after every part);
    StoppedError when a run did not finish."""

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
            state += f" ({result.skipped_parts} parts already in --output, not scored in this sitting)"
        print(
            f"batch (Ray's workers at niceness {niceness}): {result.series:,} series in "
            f"{result.parts} parts, {result.rate:,.0f} series/s scoring, "
            f"{result.scoring_seconds:.1f} s scoring, {result.seconds_with_startup:.1f} s with Ray's "
            f"start-up{state}; peak PSS of its process tree {result.peak_pss_mib:,.0f} MiB",
            flush=True,
        )
        if not result.finished:
            raise StoppedError()


def _measure_client(args: argparse.Namespace, inputs: Path, saved: dict[str, Any]) -> None:
    """The client through a local service, into `saved`."""
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


def _measure(
    args: argparse.Namespace, inputs: Path, work: Path, saved: dict[str, Any], shape: tuple[int, int]
) -> None:
    """The synthetic parts, then every contender asked for, in turn, into `saved`; the raw session again
    after the batch command and after the client (the load drifts within a run). `shape`: the model's
    input length and channels."""
    contenders = _contenders(args)
    L, C = shape
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

    def measure_raw() -> None:
        if "raw" in contenders:
            raws.append(raw_measured(args.threads, L, C, raw_cpu, args.raw_batches, args.raw_windows))

    measure_raw()
    if "batch" in contenders:
        _measure_batch(args, inputs, work, saved)
        measure_raw()
    if "scorer" in contenders:
        saved["scorer_without_ray_series_per_s"] = scorer_rate(inputs, args.threads)
    if "client" in contenders:
        _measure_client(args, inputs, saved)
        measure_raw()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
        "contenders": sorted(_contenders(args)),
        "float32": args.float32,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_before": list(os.getloadavg()),
        "rss_bound_mib": args.rss_bound_mib,
    }
    stop_on_sigterm()
    try:
        _measure(args, inputs, work, saved, (L, C))
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
