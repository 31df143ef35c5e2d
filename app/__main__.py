"""`python -m app`: the service under uvicorn, listening on RSA_HOST:RSA_PORT, one process.

One process per container (scale with replicas): the dynamic batcher and the metrics live in the
process, so uvicorn's `--workers` would split the batches and the counters. SIGTERM and SIGINT stop
the server gracefully (no new connections, in-flight requests finish within RSA_GRACEFUL_SHUTDOWN_S,
then the lifespan drains the batchers) and the process exits 0: uvicorn's own signal handling
re-raises the signal after shutting down, which makes every stop look like a crash (exit 143) to
Docker and Kubernetes.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from app.core.config import get_settings

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Server(uvicorn.Server):
    """uvicorn's server, with signal handling that stops gracefully and does not re-raise."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def main() -> None:
    settings = get_settings()
    config = uvicorn.Config(
        "app.main:app",
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=settings.graceful_shutdown_s,
        log_level=settings.log_level.lower(),
    )
    Server(config).run()


if __name__ == "__main__":
    main()
