"""One served version's host: its sessions (`OnnxModel`), its manifest and its batcher, from the files
opened in a load thread (`open_version`) to the sessions freed (`VersionHost.close`).

The repository manager (app/engine/local.py's LocalEngine) decides which versions are served and when;
a host serves one of them: counters, backlog and the state the metrics read at scrape time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, fields

from app.artifacts.feed import zeros_feed
from app.artifacts.manifest import Manifest
from app.artifacts.repository import VersionRef, read_version
from app.core.config import Settings
from app.core.errors import DeviceOutOfMemory
from app.engine.api import VersionStats
from app.engine.batching import BatcherConfig, DynamicBatcher
from app.engine.model import OnnxModel
from app.engine.providers import CUDA, RuntimeOptions
from app.engine.types import Feed, ServingSnapshot, VersionObserver

logger = logging.getLogger(__name__)

# Rows of the bigger call timed at load to seed a version's drain rate, at most its rows per call; on CUDA
# a full call (it costs about what one row does there: DrainRate).
COST_PROBE_ROWS = 8


def rows_per_call(manifest: Manifest, settings: Settings) -> int:
    """Series per session call for this version: `max_batch_rows`, fewer where that many would form more
    attention than `call_attention_mib` (at least one: a request of more series is split over calls)."""
    per_row = manifest.attention_bytes_per_row
    if per_row is None:
        return settings.max_batch_rows
    budget = int(settings.call_attention_mib * 2**20)
    return max(1, min(settings.max_batch_rows, budget // per_row))


def runtime_options(settings: Settings) -> RuntimeOptions:
    """Every runtime option is the setting of its name (one list of them: RuntimeOptions' fields)."""
    values = {f.name: getattr(settings, f.name) for f in fields(RuntimeOptions)}
    return RuntimeOptions(**{**values, "batch_buckets": tuple(settings.batch_buckets)})


@dataclass(frozen=True)
class Opened:
    """A version read, checked, loaded and warmed up (in a load thread), not serving yet."""

    manifest: Manifest
    model: OnnxModel
    seconds_per_row: float  # per row of a full call, timed at load: the seed of the drain rate
    call_rows: float  # a call's fixed cost in rows' worth, timed at load (DrainRate)

    def close(self) -> None:
        self.model.close()


def open_version(ref: VersionRef, settings: Settings, options: RuntimeOptions) -> Opened:
    """Read, check, load and warm up a version; time a one-row call and a bigger one (the best of three
    each, as a busy batcher would measure them) to seed its drain rate: a call's fixed cost and its cost
    per row. Blocking: run it in a load thread."""
    manifest = read_version(ref)
    model = OnnxModel(ref.path, manifest, options, rows_per_call(manifest, settings))
    model.load()
    model.warmup()
    full = model.max_rows
    one_s = _best_of_three(model, zeros_feed(manifest, 1))
    big, big_s = full, None
    if model.provider == CUDA:  # a full call costs there a few one-row calls (DrainRate): time one
        # unless the GPU is too small for a full call, even in halves: then a small one, as on the CPU
        with contextlib.suppress(DeviceOutOfMemory):
            big_s = _best_of_three(model, zeros_feed(manifest, full))
    if big_s is None:  # the CPU: a small call says enough (its cost is near linear in the rows)
        big = min(COST_PROBE_ROWS, full)
        big_s = _best_of_three(model, zeros_feed(manifest, big))
    call_s, row_s = call_cost(one_s, big_s, big)
    model.release_memory()
    return Opened(manifest, model, (call_s + full * row_s) / full, call_s / row_s)


def _best_of_three(model: OnnxModel, feed: Feed) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        model.run_forecast(feed)
        best = min(best, time.perf_counter() - t0)
    return best


def call_cost(one_s: float, big_s: float, big: int) -> tuple[float, float]:
    """(a call's fixed seconds, seconds per row) from a one-row call and a `big`-row one. The per-row cost
    is floored at a thousandth of the big call's average: timing noise can make the two calls equal."""
    row_s = max((big_s - one_s) / max(big - 1, 1), 1e-3 * big_s / big, 1e-9)
    return max(one_s - row_s, 0.0), row_s


class VersionHost:
    """A ready version: its manifest, its sessions and its batcher (started on the running loop)."""

    def __init__(
        self,
        name: str,
        opened: Opened,
        settings: Settings,
        observer: VersionObserver | None,
        executor: Executor,
        alone: Callable[[], bool],
    ) -> None:
        model = self.model = opened.model
        self.manifest = opened.manifest
        self.settings = settings
        model.runner.on_retry = observer.on_retry if observer is not None else None
        policy = model.policy
        config = BatcherConfig(
            name=name,
            max_batch_rows=model.max_rows,
            max_wait_s=settings.max_batch_wait_ms / 1000.0,
            max_queue_rows=settings.max_queue_rows,
            retry_after_s=settings.retry_after_s,
            release_after_s=settings.memory_release_idle_s,
            inline_max_rows=settings.inline_max_rows if policy.inline else 0,
            max_calls=policy.max_calls,
            concurrent_max_rows=policy.concurrent_max_rows,
            row_seconds=opened.seconds_per_row,
            call_rows=opened.call_rows,
            max_evaluations=settings.max_evaluations_in_flight,
            evaluation_call_rows=settings.evaluation_call_rows,
        )
        # The runner takes the feed the data plane built: window, and phase for a cycle.
        self.batcher = DynamicBatcher(model.runner, config, observer, executor=executor, alone=alone)
        self.batcher.start()

    def stats(self) -> VersionStats:
        s = self.batcher.stats
        return VersionStats(
            max_series_per_call=self.batcher.max_batch_rows,
            session_calls=s.session_calls,
            rows=s.rows,
            failed_calls=s.failed_calls,
            rejected_requests=s.rejected_items,
            expired_requests=s.expired_items,
            dropped_requests=s.dropped_items,
        )

    def backlog(self) -> tuple[int, float | None]:
        """(rows admitted and not yet answered, seconds per row)."""
        return self.batcher.ahead_rows, self.batcher.row_seconds

    def serving(self) -> ServingSnapshot:
        provider = self.model.provider
        return ServingSnapshot(
            provider=provider,
            input_length=self.manifest.input_length,
            horizon=self.manifest.horizon,
            queued_rows=self.batcher.queued_rows,
            backlog_s=self.batcher.backlog_s,
            cuda_device_id=self.model.options.cuda_device_id if provider == CUDA else None,
        )

    async def close(self, quiet_s: float) -> None:
        """Let what reached the version finish (nothing arriving for `quiet_s`, or the request timeout at
        the latest), stop the batcher, free the sessions."""
        deadline = time.monotonic() + self.settings.request_timeout_s
        while time.monotonic() < deadline and not self.batcher.quiet_for(quiet_s):
            await asyncio.sleep(0.05)
        await self.batcher.stop(self.settings.graceful_shutdown_s)
        self.model.close()
