"""Dynamic batching for one model version: `DynamicBatcher(runner, config, observer)` (batcher.py) and
its parts, its configuration (config.py), admission (admission.py), evaluation work's share, threads and
refusal (evaluation.py), the inline gate (inline.py), the memory release (release.py), the queued items
and counters (items.py)."""

from app.engine.batching.admission import ADMIT_FRACTION, Admission, DrainRate, late_refusal
from app.engine.batching.batcher import SHARED_CALL_ROWS, DynamicBatcher
from app.engine.batching.config import BatcherConfig, BatchRunner
from app.engine.batching.inline import InlineGate
from app.engine.batching.items import Batch, BatcherStats, Segment, WorkItem
from app.engine.batching.release import MemoryRelease
from app.engine.types import Feed, feed_rows

__all__ = [
    "ADMIT_FRACTION",
    "SHARED_CALL_ROWS",
    "Admission",
    "Batch",
    "BatchRunner",
    "BatcherConfig",
    "BatcherStats",
    "DrainRate",
    "DynamicBatcher",
    "Feed",
    "InlineGate",
    "MemoryRelease",
    "Segment",
    "WorkItem",
    "feed_rows",
    "late_refusal",
]
