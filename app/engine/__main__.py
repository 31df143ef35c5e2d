"""`python -m app.engine ADDRESS`: the engine process of a service with several front ends (RSA_WORKERS > 1).

It owns every version's sessions, queues, batching and admission (app/engine/local.py) behind a socket the
front ends share (app/engine/server.py, ADDRESS e.g. ipc:///tmp/rsa-service-x/engine.sock). The socket is
bound before any model loads, so front ends connect at once and see the versions load. Started and stopped
by the supervisor (app/supervisor.py): on SIGTERM what is queued finishes and the process exits 0. It also
stops when its parent dies, so an engine never outlives its service.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from app.core.config import get_settings
from app.core.logging import configure_logging
from app.core.process import die_with_parent, freeze_startup_objects
from app.engine.server import EngineServer
from app.wiring import local_engine

logger = logging.getLogger("app.engine")


async def serve(address: str) -> None:
    settings = get_settings()
    configure_logging(settings.log_level)
    engine = local_engine(settings)  # inline calls only when no other submit is being handled
    server = EngineServer(engine, address)
    await server.start()
    await engine.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    logger.info("engine stopping: finishing what is queued")
    await engine.stop(settings.graceful_shutdown_s)
    await server.stop()
    logger.info("engine stopped")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m app.engine ADDRESS")
    die_with_parent()
    freeze_startup_objects()
    asyncio.run(serve(sys.argv[1]))


if __name__ == "__main__":
    main()
