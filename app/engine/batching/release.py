"""Memory release: once a version has been idle for a while after batches, its runner gives back what it
can (the session's arena: `Runner.release_memory`), off the event loop like the session calls. The arena is
kept while requests keep coming, and given back when they stop; never twice for nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor

logger = logging.getLogger(__name__)


class MemoryRelease:
    """`after_s` None: never release."""

    def __init__(self, name: str, release: Callable[[], object], after_s: float | None) -> None:
        self.name = name
        self._release = release
        self.after_s = after_s
        self.ran_since = False  # a batch ran since the last release
        self.running = False  # the release runs in the executor: no inline call meanwhile

    @property
    def due(self) -> bool:
        """Whether the idle worker should time `after_s` and then release."""
        return self.after_s is not None and self.ran_since

    async def run(self, executor: Executor | None) -> None:
        """Release now; a request that comes meanwhile waits for it (about a millisecond)."""
        self.ran_since = False
        self.running = True
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._release)
        except Exception:  # memory stays as it was: serving goes on
            logger.exception("batcher %s: releasing memory failed", self.name)
        finally:
            self.running = False
