"""Batch scoring: a long table in, each series' last window forecast by a published model version, a long
Parquet table out (docs/batch.md).

`Forecaster.score_table` (batch/forecaster.py) is the whole computation of one part, with the service's
own code; for the same series run in the same batch its numbers are the service's, bit for bit
(tests/batch/test_score.py, test_score_covariates.py). The job and its model: batch/job.py; reading the
input's times and the future table: batch/reading.py; tables in and out: batch/io.py; the local Ray:
batch/ray_local.py; the command line: batch/__main__.py.

`run` spreads the parts over Ray Data: `map_batches` with one `PartScorer` actor (one ONNX Runtime
session) per slot, CUDA where the actor was given a GPU. One part is one block: read, scored and written
by one call, so memory is bounded by the largest part, not the table.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batch import io
from batch.forecaster import Forecaster
from batch.job import Job, check_covariates, check_input_columns, covariate_layout, published
from batch.progress import Progress
from batch.ray_local import init_local_ray
from batch.reading import FutureRows

logger = logging.getLogger("batch")
T = TypeVar("T")


class InputRefused(ValueError):  # noqa: N818
    """A part the scorer refuses (a series too short, two rows at one time, a missing covariate ...): the
    same answer on every try, so it is never tried again; its actor hands the message back as data, and
    `run` raises it, naming the part (Ray would wrap it in its own exception and traceback)."""


def retrying(call: Callable[[], T], retries: int, what: str) -> T:
    """`call`, tried again up to `retries` times when it raises (each failure logged), but for
    InputRefused."""
    for attempt in range(retries + 1):
        try:
            return call()
        except InputRefused:
            raise
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
        layout = covariate_layout(self.forecaster.manifest)
        self.future = None
        if job.future is not None and layout is not None:
            zone = self.forecaster.manifest.timezone
            self.future = FutureRows(job.future, job.id_col, job.time_col, layout.future, zone)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import ray

        node = ray.get_runtime_context().get_node_id()
        done: dict[str, list[Any]] = {
            "part": [],
            "series": [],
            "seconds": [],
            "provider": [],
            "node": [],
            "refused": [],
        }
        for rel in batch["part"]:
            start = time.perf_counter()
            refused = ""
            try:
                series = retrying(partial(self._one, str(rel)), self.job.retries, f"part {rel!r}")
            except InputRefused as e:
                series, refused = 0, str(e)
            done["part"].append(str(rel))
            done["series"].append(series)
            done["refused"].append(refused)
            done["seconds"].append(time.perf_counter() - start)
            done["provider"].append(self.forecaster.provider)
            done["node"].append(node)
        return {k: np.asarray(v) for k, v in done.items()}

    def _one(self, rel: str) -> int:
        table = io.read_part(self.parts.fs, self.parts.path(rel))
        name = io.output_name(self.parts, rel)
        future = None
        try:
            if self.future is not None:  # only the rows of this part's series
                ids = table[self.job.id_col]
                if pa.types.is_dictionary(ids.type):
                    ids = pc.cast(ids, ids.type.value_type)
                future = self.future.read(name, pc.unique(pc.cast(ids, pa.string())))
            out = self.forecaster.score_table(table, future)
        except ValueError as e:  # the scorer's refusals: this input, whatever the try
            raise InputRefused(f"part {rel or self.parts.root!r}: {e}") from None
        io.write_part(self.out_fs, f"{self.out_root}/{name}", out)
        return out.num_rows // self.forecaster.horizon


class _QuietRayData(logging.Filter):
    """Ray Data during a batch job: its warnings and errors, not its executor's INFO lines (the execution
    plan, "execution finished in ...") nor its notice that progress bars are off (the job's own
    `Progress` reports), printed on every run (issue 45, item 12). A filter of the loggers that log them:
    Ray Data makes its handlers anew when a dataset runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING and not record.getMessage().startswith(
            "Progress bars disabled"
        )


_QUIETED = ("ray.data._internal.execution.streaming_executor", "ray.data._internal.progress")


@dataclass
class Summary:
    parts: int = 0
    skipped: int = 0
    series: int = 0
    seconds: float = 0.0
    providers: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)  # the Ray nodes whose actors scored parts
    unread: list[str] = field(default_factory=list)  # input columns not read (`check_input_columns`)


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
    check_covariates(job, manifest)  # a missing future table or column fails here, before Ray starts
    parts = io.list_parts(input_uri)
    out_fs, out_root = io.open_fs(output_uri)
    todo = [r for r in parts.relative if not io.finished(out_fs, f"{out_root}/{io.output_name(parts, r)}")]
    summary = Summary(parts=len(parts.relative), skipped=len(parts.relative) - len(todo))
    if not todo:
        return summary
    summary.unread = check_input_columns(job, manifest, parts, todo)  # before Ray starts, as the covariates
    started_here = not ray.is_initialized()
    if started_here:
        if address is None:
            # Ray starts its workers at niceness 15 unless told otherwise: on a machine with other work the
            # scoring actor then waits for every other process (the 100,000-series run scored at 0.48x the
            # raw session's windows/s, which ran at 0, on cores shared with other jobs; docs/batch.md).
            init_local_ray(
                _system_config={"worker_niceness": worker_niceness},
                num_cpus=num_cpus,
                object_store_memory=object_store_bytes,
                configure_logging=False,
            )
        else:
            # A cluster on a loopback address (127.0.0.2: Ray swaps 127.0.0.1 for the machine's outward
            # address) is reached from this machine only, and the driver joins it on that address.
            host = address.rsplit(":", 1)[0]
            loopback: dict[str, Any] = {"_node_ip_address": host} if host.startswith("127.") else {}
            ray.init(address=address, log_to_driver=False, **loopback)
    start = time.perf_counter()
    quiet = _QuietRayData()
    for name in _QUIETED:
        logging.getLogger(name).addFilter(quiet)
    try:
        context = ray.data.DataContext.get_current()
        context.actor_task_retry_on_errors = True  # a part that failed in the actor is tried again
        # Parts are handed out once the whole pool is up (at most 10 minutes: a cluster without room for
        # the actors asked fails then), one at a time per actor, so every actor scores its share.
        context.wait_for_min_actors_s = 600
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        dataset = ray.data.from_items([{"part": r} for r in todo], override_num_blocks=len(todo))
        with warnings.catch_warnings():
            # Ray 2.60 (pinned, requirements/constraints.txt) names no parameter for an actor's restarts
            # and retries but `ray_remote_args`, which it warns will go in Ray 2.64; without them an actor
            # is restarted and its part tried again forever (Ray Data's default, -1).
            warnings.filterwarnings("ignore", message=r"`ray_remote_args` is deprecated")
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
            for refused in batch["refused"]:
                if refused:  # nothing more is scored: the job stops, non-zero, naming the part
                    raise InputRefused(str(refused))
            for series, provider, node in zip(batch["series"], batch["provider"], batch["node"], strict=True):
                summary.series += int(series)
                summary.providers.add(str(provider))
                summary.nodes.add(str(node))
                if progress is not None:
                    progress.update(int(series))
    finally:
        for name in _QUIETED:
            logging.getLogger(name).removeFilter(quiet)
        if started_here:
            ray.shutdown()
        if progress is not None:
            progress.close()
    summary.seconds = time.perf_counter() - start
    return summary
