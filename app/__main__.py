"""`python -m app`: the service under uvicorn, listening on RSA_HOST:RSA_PORT.

One process by default (RSA_WORKERS=1; one process per container, scaled by replicas). With RSA_WORKERS=N
> 1 this process is the supervisor of one engine process and N front-end processes (app/supervisor.py);
a front end is this same command with RSA_ENGINE_ADDRESS set (by the supervisor), listening on its own
SO_REUSEPORT socket and on a private Unix socket for the supervisor's pings. (uvicorn's own `--workers`
would split the batches and the counters; the supervisor keeps one engine for all.)

Stopping (SIGTERM, or SIGINT): a drain (app/lifecycle.py). For RSA_DRAIN_DELAY_S the service keeps
serving while /readyz says 503 and every response says `Connection: close`; then uvicorn and the gRPC
server stop accepting, requests and calls in flight finish within RSA_GRACEFUL_SHUTDOWN_S, the
batchers empty their queues, and the process exits 0. A second signal skips the rest of the delay.
uvicorn's own handling would stop at once and re-raise the signal afterwards, which makes every stop
look like a crash (exit 143).

Slow or idle clients are bounded by uvicorn's protocol with our guards (app/core/connections.py), in
every front end: headers within RSA_HEADER_TIMEOUT_S, bodies at least RSA_BODY_MIN_BYTES_S on average,
at most RSA_MAX_CONNECTIONS requests in flight (503 above) and connections open (the longest idle one
closed for a new one), idle keep-alive connections closed after RSA_KEEP_ALIVE_S.
"""

from __future__ import annotations

import resource
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from time import monotonic
from types import FrameType

import uvicorn

from app.core.config import Settings, get_settings
from app.core.connections import ConnectionLimits, guarded_protocol
from app.core.process import die_with_parent, freeze_startup_objects
from app.lifecycle import Lifecycle
from app.main import app

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Server(uvicorn.Server):
    """uvicorn's server, stopping by a drain and never re-raising the signal."""

    def __init__(self, config: uvicorn.Config, lifecycle: Lifecycle, drain_delay_s: float) -> None:
        super().__init__(config)
        self.lifecycle = lifecycle
        self.drain_delay_s = drain_delay_s
        self.stop_at: float | None = None

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.lifecycle.begin_drain()
        if self.stop_at is None and self.drain_delay_s > 0 and self.started:
            self.stop_at = monotonic() + self.drain_delay_s  # on_tick stops the server then
        else:  # a second signal, no delay, or still starting: stop now (in-flight requests still finish)
            self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # the gRPC server stops accepting with HTTP, and its calls finish during HTTP's own wait
        self.lifecycle.begin_stop()
        await super().shutdown(sockets)

    async def on_tick(self, counter: int) -> bool:
        should_exit = await super().on_tick(counter)
        return should_exit or (self.stop_at is not None and monotonic() >= self.stop_at)


def front_end_sockets(settings: Settings) -> list[socket.socket]:
    """A front end's sockets: RSA_HOST:RSA_PORT with SO_REUSEPORT (every front end binds its own, and the
    kernel spreads new connections over them), and its private Unix socket for the supervisor's pings."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    # IPPROTO_TCP named, as getaddrinfo would: asyncio sets TCP_NODELAY only on sockets that say so, and
    # without it every small answer waited ~40 ms for a delayed ACK (Nagle).
    shared = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    shared.bind((settings.host, settings.port))
    sockets = [shared]
    if settings.control_socket is not None:
        private = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        private.bind(str(settings.control_socket))
        sockets.append(private)
    return sockets


def raise_open_files_limit() -> None:
    """The soft limit on open files up to the hard one: each connection is a file, and a soft limit of
    1,024 (many hosts' default) would refuse connections before RSA_MAX_CONNECTIONS could apply."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    settings = get_settings()
    if settings.workers > 1 and settings.engine_address is None:
        from app.supervisor import Supervisor

        sys.exit(Supervisor(settings).run())
    raise_open_files_limit()
    sockets = None
    if settings.engine_address is not None:  # a front end of the supervisor's
        die_with_parent()
        sockets = front_end_sockets(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        # uvicorn annotates these two as int but hands them to asyncio.wait_for and loop.call_later,
        # which take seconds as float: a fractional setting works as written.
        timeout_graceful_shutdown=settings.graceful_shutdown_s,  # type: ignore[arg-type]
        timeout_keep_alive=settings.keep_alive_s,  # type: ignore[arg-type]
        http=guarded_protocol(
            ConnectionLimits(
                header_timeout_s=settings.header_timeout_s,
                body_min_bytes_s=settings.body_min_bytes_s,
                body_grace_s=settings.body_grace_s,
                max_connections=settings.max_connections,
                max_requests=settings.max_connections,
            )
        ),
        log_level=settings.log_level.lower(),
        # One line per request, written on the event loop: off unless asked for (RSA_ACCESS_LOG); the
        # metrics count every request by endpoint, model, version and status.
        access_log=settings.access_log,
    )
    freeze_startup_objects()
    Server(config, app.state.lifecycle, settings.drain_delay_s).run(sockets=sockets)


if __name__ == "__main__":
    main()
