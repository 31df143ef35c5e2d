"""The supervisor of a service with several front ends: `python -m app` with RSA_WORKERS = N > 1.

It starts one engine process (`python -m app.engine`: sessions, queues, batching, admission; one per
host, or per GPU) and N front-end processes (`python -m app` with RSA_ENGINE_ADDRESS: HTTP and gRPC,
parsing, validation, encoding), then watches them:
- each front end binds its own socket on RSA_HOST:RSA_PORT with SO_REUSEPORT, so the kernel spreads new
  connections over them (one socket inherited by all piles the load on a few), and gRPC alike;
- every `PING_EVERY_S` each front end is asked `GET /healthz` on a private Unix socket of its own; one that
  dies, or fails `PING_FAILURES` pings in a row (a stuck event loop), is killed and started again while
  the others serve;
- if the engine dies, every front end is stopped and the supervisor exits non-zero within seconds, so
  that the orchestrator restarts the whole service: a service without its engine must never hang;
  the front ends do not wait for that: each watches the engine itself (its socket's events and a
  heartbeat, app/engine/client.py) and answers 503 at once, as it does for a stopped or stuck engine,
  which the supervisor leaves running (it may come back);
- SIGTERM (or SIGINT) drains: every front end gets SIGTERM (readiness 503 and `Connection: close` for
  RSA_DRAIN_DELAY_S, then in-flight requests finish), then the engine (queued work finishes); exit 0 when
  every process stopped cleanly (a front end the signal caught still importing counts as clean: it had
  bound nothing).

Metrics: the front ends write their request metrics to one prometheus-client multiprocess directory
(PROMETHEUS_MULTIPROC_DIR, set here); a dead front end's files are folded into the archive before its
replacement starts (app/observability/metrics.py: `compact_dead_process`), so no count is lost and no file
piles up. The engine process exports its own families through the front ends' /metrics.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from app.core.config import Settings
from app.core.logging import configure_logging
from app.observability.metrics import MULTIPROC_ENV, compact_dead_process

logger = logging.getLogger("app.supervisor")

PING_EVERY_S = 2.0
PING_TIMEOUT_S = 2.0
PING_FAILURES = 3  # pings failed in a row before a front end is killed and started again
START_GRACE_S = 60.0  # a front end's first answer may take this long (imports, the engine's hello)
CRASH_LOOP = 5  # front ends that exit within START_GRACE_S of their start, in a row: give up
TICK_S = 0.2
HURRY_S = 3.0  # how long front ends may take to stop when the engine is gone, before they are killed


@dataclass
class FrontEnd:
    index: int
    control: Path  # its private Unix socket (pings)
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    answered: bool = False  # it answered a ping since it started
    failures: int = 0
    next_ping: float = 0.0
    restarts: int = field(default=0)
    signals: int = 0  # SIGTERMs sent: one drains, a second skips the drain delay


class Supervisor:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stopping = False
        self.hurry = False  # a second signal: stop without waiting for the drain
        self.engine: subprocess.Popen[bytes] | None = None
        self.front_ends: list[FrontEnd] = []
        self.crashes = 0

    # -- signals -----------------------------------------------------------------------------------
    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        """The drain starts now: every front end is told at once (readiness turns 503 everywhere), not at
        the next tick of the watch loop. A second signal hurries them past the drain delay."""
        self.hurry = self.stopping
        self.stopping = True
        self._signal_fronts()

    def _signal_fronts(self) -> None:
        for front in self.front_ends:
            process = front.process
            if process is not None and process.poll() is None and front.signals < 1 + self.hurry:
                process.send_signal(signal.SIGTERM)
                front.signals += 1

    # -- processes ---------------------------------------------------------------------------------
    def _spawn(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)

    def _engine_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop(MULTIPROC_ENV, None)  # the engine's metrics live in its own memory, not in files
        return env

    def _front_env(self, front: FrontEnd) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "RSA_ENGINE_ADDRESS": self.address,
                "RSA_CONTROL_SOCKET": str(front.control),
                "RSA_SUPERVISOR_PID": str(os.getpid()),
                MULTIPROC_ENV: str(self.metrics_dir),
            }
        )
        return env

    def _start_front(self, front: FrontEnd) -> None:
        front.control.unlink(missing_ok=True)
        front.process = self._spawn([sys.executable, "-m", "app"], self._front_env(front))
        front.started = time.monotonic()
        front.answered, front.failures, front.signals = False, 0, 0
        front.next_ping = front.started + PING_EVERY_S
        logger.info("front end %d started (pid %d)", front.index, front.process.pid)

    def _restart(self, front: FrontEnd, why: str) -> None:
        assert front.process is not None
        pid = front.process.pid
        if front.process.poll() is None:
            front.process.kill()
            front.process.wait()
        quick = time.monotonic() - front.started < START_GRACE_S and not front.answered
        self.crashes = self.crashes + 1 if quick else 0
        logger.error("front end %d (pid %d) %s; starting it again", front.index, pid, why)
        compact_dead_process(self.metrics_dir, pid)
        front.restarts += 1
        self._start_front(front)

    def _ping(self, front: FrontEnd) -> bool:
        """GET /healthz on the front end's private socket: its event loop answers, or it is stuck."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(PING_TIMEOUT_S)
                conn.connect(str(front.control))
                conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: supervisor\r\nConnection: close\r\n\r\n")
                return conn.recv(16).startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def _watch_front(self, front: FrontEnd, now: float) -> None:
        assert front.process is not None
        if self.stopping:  # a signal came during this tick: the front ends are stopping, not crashing
            return
        code = front.process.poll()
        if code is not None:
            self._restart(front, f"exited with status {code}")
            return
        if now < front.next_ping:
            return
        front.next_ping = now + PING_EVERY_S
        if self._ping(front):
            front.answered, front.failures = True, 0
            return
        if not front.answered and now - front.started < START_GRACE_S:
            return  # still starting
        front.failures += 1
        if front.failures >= PING_FAILURES:
            self._restart(front, f"failed {front.failures} pings in a row")

    # -- the run -----------------------------------------------------------------------------------
    def run(self) -> int:
        configure_logging(self.settings.log_level)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self.dir = Path(tempfile.mkdtemp(prefix="rsa-service-"))
        self.address = f"ipc://{self.dir / 'engine.sock'}"
        self.metrics_dir = self.dir / "metrics"
        self.metrics_dir.mkdir()
        try:
            return self._run()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _run(self) -> int:
        workers = self.settings.workers
        logger.info(
            "supervisor: one engine process and %d front ends on %s:%d",
            workers,
            self.settings.host,
            self.settings.port,
        )
        self.engine = self._spawn([sys.executable, "-m", "app.engine", self.address], self._engine_env())
        socket_file = self.dir / "engine.sock"
        while not socket_file.exists():  # bound before any model loads: a second or two
            if self.engine.poll() is not None:
                logger.error(
                    "the engine process exited with status %s before listening", self.engine.returncode
                )
                return self.engine.returncode or 1
            if self.stopping:
                return self._stop(0)
            time.sleep(0.05)
        self.front_ends = [FrontEnd(i, self.dir / f"front-{i}.sock") for i in range(workers)]
        for front in self.front_ends:
            self._start_front(front)
        while not self.stopping:
            time.sleep(TICK_S)
            code = self.engine.poll()
            if code is not None:
                logger.error("the engine process exited with status %s; stopping the service", code)
                self._stop_fronts(hurry=True)
                return code if code > 0 else 1
            now = time.monotonic()
            for front in self.front_ends:
                self._watch_front(front, now)
            if self.crashes >= CRASH_LOOP:
                logger.error(
                    "front ends keep exiting at start-up (%d in a row); stopping the service", self.crashes
                )
                return self._stop(1)
        return self._stop(0)

    def _stop_fronts(self, hurry: bool) -> bool:
        """SIGTERM to every front end (each drains; a second one, when hurried, skips the drain delay),
        then wait for them; True when all exited 0."""
        self.hurry = self.hurry or hurry
        self._signal_fronts()
        if self.hurry:
            self._signal_fronts()
        fronts = [f.process for f in self.front_ends if f.process is not None]
        # Without its engine a front end can finish nothing: it gets a moment, then it is killed.
        budget = (
            HURRY_S if self.hurry else self.settings.drain_delay_s + self.settings.graceful_shutdown_s + 5
        )
        clean = True
        for process in fronts:
            code = _wait(process, budget)
            if code == -signal.SIGTERM:
                # Killed by the signal's default action: it was still importing, before the server that
                # handles SIGTERM (app/__main__.py) was installed, so it had bound no socket and accepted
                # nothing; a rollout that lands then is a clean stop.
                logger.info("front end (pid %d) stopped while it was starting", process.pid)
                continue
            clean &= code == 0
        return clean

    def _stop(self, code: int) -> int:
        logger.info("supervisor: draining the front ends, then the engine")
        clean = self._stop_fronts(hurry=self.hurry)
        if self.engine is not None and self.engine.poll() is None:
            self.engine.send_signal(signal.SIGTERM)
            clean &= _wait(self.engine, self.settings.graceful_shutdown_s + 5) == 0
        logger.info("supervisor: stopped (%s)", "clean" if clean else "not clean")
        return code if code else (0 if clean else 1)


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    try:
        return process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return -signal.SIGKILL
