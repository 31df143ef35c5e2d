"""Batch scoring: a long table in, each series' last window forecast by a published model version, a long
Parquet table out (docs/batch.md).

`Forecaster.score_table` is the whole computation of one part, with the service's own code: the window and
its checks with missing values filled (`app.inference.windows.last_window_filled`), the phase
(`window_phase_of`), the calendar anchor, the graph's inputs (`app.artifacts.feed.build_feed`), the
session as the service creates it (`app.engine.session.create_session`), the intervals and their clipping
(`app.inference.intervals`), and the finiteness check. For the same series run in the same batch its
numbers are the service's, bit for bit (tests/batch/test_score.py).

`run` spreads the parts over Ray Data: `map_batches` with one `PartScorer` actor (one ONNX Runtime
session) per slot, CUDA where the actor was given a GPU. One part is one block: read, scored and written
by one call, so memory is bounded by the largest part, not the table.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.artifacts.contract import FORECAST_OUTPUT, MANIFEST_FILE, MODEL_FILE
from app.artifacts.feed import build_feed
from app.artifacts.manifest import Manifest, load_manifest
from app.artifacts.repository import read_model
from app.core.config import Settings
from app.inference.intervals import check_levels, level_bounds
from app.inference.windows import (
    check_calendar_anchor,
    check_horizon,
    last_window_filled,
    require_finite,
    window_phase_of,
)
from batch import io
from batch.progress import Progress

logger = logging.getLogger("batch")
# The share of a window's values that may be missing and be filled: the service's default
# (RSA_MAX_MISSING_SHARE).
MAX_MISSING_SHARE: float = Settings.model_fields["max_missing_share"].default
T = TypeVar("T")


@dataclass(frozen=True)
class Job:
    """What to score with and how the input names its columns."""

    repository: str
    model: str
    version: int | None = None  # None: the latest published version
    horizon: int | None = None  # None: the model's horizon
    levels: tuple[float, ...] = ()
    id_col: str = "unique_id"
    time_col: str = "ds"
    # Windows per session call. The default model's CPU arena grows with it: the batch job's process tree
    # peaked at 11.0 GiB with calls of 500 windows (L = 512, 87 heads) and 6.2 GiB with 256, while the raw
    # session ran no faster past 64 on this machine (bench/batch.py, 2026-11-27).
    batch_rows: int = 64
    threads: int | None = None  # intra-op threads per session; None: the CPUs the actor may use
    retries: int = 2  # further tries of a part that failed, in the actor, before Ray's own retries


def published(repository: str, model: str, version: int | None) -> tuple[Path, Manifest]:
    """The version folder (the latest when `version` is None) and its manifest."""
    ref = read_model(Path(repository), model)
    if ref.error is not None:
        raise FileNotFoundError(ref.error)
    chosen = (
        ref.versions[-1] if version is None else next((v for v in ref.versions if v.version == version), None)
    )
    if chosen is None:
        known = ", ".join(str(v.version) for v in ref.versions)
        raise FileNotFoundError(f"model {model!r} has no version {version}; versions: {known}")
    return chosen.path, load_manifest(chosen.path / MANIFEST_FILE)


def channel_columns(names: Sequence[str], manifest: Manifest) -> list[str]:
    """The input's columns for the model's channels, in its order: their names, or `y` for one channel."""
    channels = list(manifest.channels)
    if all(c in names for c in channels):
        return channels
    if len(channels) == 1 and "y" in names:
        return ["y"]
    raise ValueError(f"model {manifest.name} reads channels {channels}; the table has columns {list(names)}")


def _utc_micros(column: pa.ChunkedArray) -> np.ndarray:
    """int64 microseconds since the epoch, UTC (a naive timestamp is UTC: the service's rule)."""
    if not pa.types.is_timestamp(column.type):
        column = pc.cast(column, pa.timestamp("us"))
    return pc.cast(column, pa.timestamp("us", column.type.tz)).to_numpy().view("int64")


def _changes(column: pa.ChunkedArray) -> np.ndarray:
    """Whether each row's value differs from the one before it, from the second row on (no nulls)."""
    n = len(column)
    return pc.not_equal(column.slice(1), column.slice(0, n - 1)).to_numpy(zero_copy_only=False)


def _sorted(table: pa.Table, id_col: str, time_col: str) -> bool:
    """Whether `table` is sorted by id, then time (ascending, as `sort_by` would put it)."""
    n = table.num_rows
    if n < 2:
        return True
    ids, stamps = table[id_col], table[time_col]
    later_id = pc.greater(ids.slice(1), ids.slice(0, n - 1))
    same_id = pc.equal(ids.slice(1), ids.slice(0, n - 1))
    later_time = pc.fill_null(pc.greater_equal(stamps.slice(1), stamps.slice(0, n - 1)), False)
    return bool(pc.all(pc.or_(later_id, pc.and_(same_id, later_time))).as_py())


class Forecaster:
    """One ONNX Runtime session of a published version, and the service's rules around it."""

    def __init__(self, job: Job, device: str = "cpu") -> None:
        from app.engine.providers import RuntimeOptions
        from app.engine.session import create_session

        self.job = job
        folder, self.manifest = published(job.repository, job.model, job.version)
        self.horizon = check_horizon(job.horizon, self.manifest)
        if job.levels:
            check_levels(self.manifest.intervals, job.levels)
        options = RuntimeOptions(device=device, intra_op_threads=job.threads)
        self.session = create_session(folder / MODEL_FILE, options)
        self.provider = self.session.get_providers()[0]

    def score_table(self, table: pa.Table) -> pa.Table:
        """Every series of `table` (long: id, time and channel columns) -> its forecast, long."""
        job, manifest, h = self.job, self.manifest, self.horizon
        L, columns = manifest.input_length, channel_columns(table.column_names, manifest)
        # Only the columns read, and sorted only when not sorted already: a part's table is the biggest
        # thing an actor holds, and a sorted copy doubled it.
        table = table.select([job.id_col, job.time_col, *columns])
        if pa.types.is_dictionary(table[job.id_col].type):  # compared and sorted by value
            plain = pc.cast(table[job.id_col], table[job.id_col].type.value_type)
            table = table.set_column(0, job.id_col, plain)
        if table[job.id_col].null_count:
            raise ValueError(f"column {job.id_col!r} has {table[job.id_col].null_count} null ids")
        if not _sorted(table, job.id_col, job.time_col):
            table = table.sort_by([(job.id_col, "ascending"), (job.time_col, "ascending")])
        n = table.num_rows
        stamps = _utc_micros(table[job.time_col])
        values = np.column_stack(
            [table[c].to_numpy(zero_copy_only=False).astype(np.float64, copy=False) for c in columns]
        )
        # Series boundaries compared in Arrow: a column of Python strings, one per row, cost more memory
        # than the values.
        cuts = np.flatnonzero(_changes(table[job.id_col])) + 1 if n else np.empty(0, np.int64)
        begins = np.concatenate([[0], cuts]).astype(np.int64) if n else cuts
        ends = np.concatenate([cuts, [n]]).astype(np.int64) if n else cuts
        ids = table[job.id_col].take(pa.array(begins)).to_numpy(zero_copy_only=False)  # one per series
        S = len(begins)
        windows = np.empty((S, L, len(columns)), np.float32)
        phases = np.empty(S, np.int64) if manifest.cycle is not None else None
        for i in range(S):
            b, e, sid = int(begins[i]), int(ends[i]), ids[i]
            where = f"series {sid!r}"

            def path_of(row: int, c: int, sid: Any = sid, b: int = b) -> str:
                return f"series {sid!r} row {row} ({columns[c]})"

            # Missing values (null, NaN) filled by the model's training rule up to the service's default
            # share, as a /v1 request's are (one definition: app.inference.windows).
            windows[i], _ = last_window_filled(
                values[b:e], manifest, e - b, MAX_MISSING_SHARE, where, path_of, str(sid)
            )
            if manifest.cycle is not None or manifest.calendar is not None:
                first = datetime.fromtimestamp(int(stamps[e - L]) / 1e6, UTC)  # the window's first row
                if manifest.calendar is not None:
                    check_calendar_anchor(manifest, first, f"{where} timestamp")
                if phases is not None:
                    phase = window_phase_of(manifest, first, L, f"{where} timestamp")
                    assert phase is not None
                    phases[i] = phase
        forecast = np.empty((S, h, len(columns)), np.float32)
        for lo in range(0, S, job.batch_rows):
            part = slice(lo, lo + job.batch_rows)
            feed = build_feed(manifest, windows[part], None if phases is None else phases[part])
            forecast[part] = self.session.run([FORECAST_OUTPUT], feed)[0][:, :h]
        bounds = level_bounds(manifest.intervals, forecast, job.levels, window=windows) if job.levels else {}
        arrays = [forecast, *(b for pair in bounds.values() for b in pair)]
        require_finite(arrays, lambda i: f"series {ids[i]!r}")
        return self._long(table, ids, stamps[ends - 1], forecast, bounds, columns)

    def _long(
        self,
        table: pa.Table,
        series: np.ndarray,
        last_us: np.ndarray,
        forecast: np.ndarray,
        bounds: dict[float, tuple[np.ndarray, np.ndarray]],
        columns: list[str],
    ) -> pa.Table:
        """One row per series and step: id, timestamp, a forecast column per channel (named as in the
        input), `{column}-lo-{level}` and `{column}-hi-{level}` per level."""
        job, manifest, h = self.job, self.manifest, self.horizon
        S = len(series)
        months = manifest.calendar
        if months is None:  # start + (n + k)·step, as the service's forecast_timestamps, in microseconds
            step = round(manifest.frequency_seconds * 1e6)
            future = (last_us[:, None] + step * np.arange(1, h + 1)).reshape(-1)
        else:
            future = np.array(
                [
                    int(months.advance(datetime.fromtimestamp(t / 1e6, UTC), k).timestamp() * 1e6)
                    for t in last_us
                    for k in range(1, h + 1)
                ],
                np.int64,
            )
        tz = table[job.time_col].type.tz if pa.types.is_timestamp(table[job.time_col].type) else None
        data: dict[str, Any] = {
            job.id_col: pa.array(np.repeat(series, h), type=table[job.id_col].type),
            job.time_col: pa.array(future, pa.int64()).cast(pa.timestamp("us", tz)),
        }
        for c, name in enumerate(columns):
            data[name] = forecast[:, :, c].reshape(-1)
            for level, (lo, hi) in bounds.items():
                data[f"{name}-lo-{level:g}"] = lo[:, :, c].reshape(-1)
                data[f"{name}-hi-{level:g}"] = hi[:, :, c].reshape(-1)
        out = pa.table(data)
        assert out.num_rows == S * h
        return out


def local_ray_auth() -> None:
    """A token of this process's own, in the environment, for a local Ray of ours (its raylet and workers
    inherit it), unless the caller chose a mode or a token: left to itself a local `ray.init()` turns token
    authentication on and writes the token to ~/.ray/auth_token, and leaves it there. Only the token is
    set: `ray.init` still turns the mode on itself, and refreshes its configuration, which a process that
    imported Ray earlier has read already. Set once per process: Ray's token loader keeps the first token
    it read."""
    if not any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def retrying(call: Callable[[], T], retries: int, what: str) -> T:
    """`call`, tried again up to `retries` times when it raises (each failure logged)."""
    for attempt in range(retries + 1):
        try:
            return call()
        except Exception as exc:
            if attempt == retries:
                raise
            logger.warning("%s failed (try %d of %d): %s", what, attempt + 1, retries + 1, exc)
    raise AssertionError("unreachable")


class PartScorer:
    """A Ray Data actor: one session, then one input part per call, read, scored and written."""

    def __init__(self, job: Job, input_uri: str, output_uri: str) -> None:
        import ray

        self.job = job
        self.parts = io.list_parts(input_uri)
        self.out_fs, self.out_root = io.open_fs(output_uri)
        self.forecaster = Forecaster(job, device="cuda" if ray.get_gpu_ids() else "cpu")

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import ray

        node = ray.get_runtime_context().get_node_id()
        done: dict[str, list[Any]] = {"part": [], "series": [], "seconds": [], "provider": [], "node": []}
        for rel in batch["part"]:
            start = time.perf_counter()
            series = retrying(lambda rel=str(rel): self._one(rel), self.job.retries, f"part {rel!r}")
            done["part"].append(str(rel))
            done["series"].append(series)
            done["seconds"].append(time.perf_counter() - start)
            done["provider"].append(self.forecaster.provider)
            done["node"].append(node)
        return {k: np.asarray(v) for k, v in done.items()}

    def _one(self, rel: str) -> int:
        table = io.read_part(self.parts.fs, self.parts.path(rel))
        out = self.forecaster.score_table(table)
        io.write_part(self.out_fs, f"{self.out_root}/{io.output_name(self.parts, rel)}", out)
        return out.num_rows // self.forecaster.horizon


@dataclass
class Summary:
    parts: int = 0
    skipped: int = 0
    series: int = 0
    seconds: float = 0.0
    providers: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)  # the Ray nodes whose actors scored parts


def run(
    job: Job,
    input_uri: str,
    output_uri: str,
    *,
    address: str | None = None,
    actors: int = 1,
    cpus_per_actor: float = 1.0,
    gpus_per_actor: float = 0.0,
    num_cpus: int | None = None,
    object_store_bytes: int | None = None,
    worker_niceness: int = 0,
    progress: Progress | None = None,
) -> Summary:
    """Score every input part whose output part is not there yet, on Ray Data: a local Ray by default
    (`num_cpus`, `object_store_bytes` bound it; its workers, the scoring actors among them, run at
    `worker_niceness`), the cluster at `address` otherwise (its own settings)."""
    import ray

    _, manifest = published(job.repository, job.model, job.version)
    if manifest.panel is not None and manifest.panel.covariates is not None:
        # A covariate model's graph also reads each series' covariate row (its future values for the
        # horizon among them), which a long table of targets does not hold.
        names = [c["name"] for c in manifest.panel.layout.describe()] if manifest.panel.layout else []
        raise ValueError(
            f"model {job.model!r} version {manifest.version} reads covariates {names}: the batch command "
            "scores models without covariates; forecast this one through the service (/v1 or OIP v2, "
            "each series with its `future`, `past` and `static` values), or a file from its model.json with "
            "`python -m export.panel forecast --future-file` (docs/panels.md)"
        )
    parts = io.list_parts(input_uri)
    out_fs, out_root = io.open_fs(output_uri)
    todo = [r for r in parts.relative if not io.finished(out_fs, f"{out_root}/{io.output_name(parts, r)}")]
    summary = Summary(parts=len(parts.relative), skipped=len(parts.relative) - len(todo))
    if not todo:
        return summary
    started_here = not ray.is_initialized()
    if started_here:
        if address is None:
            local_ray_auth()
            # Ray starts its workers at niceness 15 unless told otherwise: on a machine with other work the
            # scoring actor then waits for every other process (the 100,000-series run scored at 0.48x the
            # raw session's windows/s, which ran at 0, on cores shared with other jobs; docs/batch.md).
            ray.init(
                # "local": a Ray of its own, never one already running on this machine (ray.init()
                # alone joins the newest `ray start` cluster it finds, whatever its token).
                address="local",
                _system_config={"worker_niceness": worker_niceness},
                num_cpus=num_cpus,
                object_store_memory=object_store_bytes,
                include_dashboard=False,
                configure_logging=False,
                log_to_driver=False,
            )
        else:
            # A cluster on a loopback address (127.0.0.2: Ray swaps 127.0.0.1 for the machine's outward
            # address) is reached from this machine only, and the driver joins it on that address.
            host = address.rsplit(":", 1)[0]
            loopback = {"_node_ip_address": host} if host.startswith("127.") else {}
            ray.init(address=address, log_to_driver=False, **loopback)
    start = time.perf_counter()
    try:
        context = ray.data.DataContext.get_current()
        context.actor_task_retry_on_errors = True  # a part that failed in the actor is tried again
        # Parts are handed out once the whole pool is up (at most 10 minutes: a cluster without room for
        # the actors asked fails then), one at a time per actor, so every actor scores its share.
        context.wait_for_min_actors_s = 600
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        dataset = ray.data.from_items([{"part": r} for r in todo], override_num_blocks=len(todo))
        scored = dataset.map_batches(
            PartScorer,
            fn_constructor_kwargs={"job": job, "input_uri": input_uri, "output_uri": output_uri},
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=max(1, actors), max_tasks_in_flight_per_actor=1),
            num_cpus=cpus_per_actor,
            num_gpus=gpus_per_actor,
            max_restarts=2,  # an actor that died (a crash, a lost node) is restarted ...
            max_task_retries=2,  # ... and its part tried again
        )
        if progress is not None:
            progress.start(len(todo))
        # Each part's row as soon as it is written: `iter_rows` prefetches a block ahead, so it handed over
        # a part only once the next one was done too (a whole part late in the 100,000-series run).
        for batch in scored.iter_batches(batch_size=None, prefetch_batches=0, batch_format="numpy"):
            for series, provider, node in zip(batch["series"], batch["provider"], batch["node"], strict=True):
                summary.series += int(series)
                summary.providers.add(str(provider))
                summary.nodes.add(str(node))
                if progress is not None:
                    progress.update(int(series))
    finally:
        if started_here:
            ray.shutdown()
        if progress is not None:
            progress.close()
    summary.seconds = time.perf_counter() - start
    return summary
