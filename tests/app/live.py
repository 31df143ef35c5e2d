"""A real service process (`python -m app`) on a free loopback port, for the tests that need one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.loadgen import free_port
from tests.utils.speed import scaled

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LiveService:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM, then the exit code (killed, and -9, if it does not exit in time)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
            return -9


@contextmanager
def live_service(repository: Path, log: Path, **env: str) -> Iterator[LiveService]:
    """`python -m app` serving `repository`, ready (GET /readyz 200) before it is yielded; `env`: RSA_
    settings over the defaults here (RSA_DRAIN_DELAY_S 0 among them)."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    environment.update(
        {
            "RSA_MODEL_REPOSITORY": str(repository),
            "RSA_HOST": "127.0.0.1",
            "RSA_PORT": str(port),
            "RSA_INTRA_OP_THREADS": "1",
            "RSA_LOG_LEVEL": "INFO",
            # no load balancer to tell: stop at once (the default 5 s cost ~50 s of the suite's teardowns,
            # 2026-12-06); the drain tests set their own
            "RSA_DRAIN_DELAY_S": "0",
            **env,
        }
    )
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=ROOT, env=environment, stdout=sink, stderr=subprocess.STDOUT
        )
    service = LiveService(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_s = scaled(30)
        deadline = time.monotonic() + wait_s
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the service exited with {process.returncode}:\n{service.output()}")
            try:
                if httpx.get(f"{service.url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the service was not ready after {wait_s:.0f} s:\n{service.output()}")
            time.sleep(0.05)
        yield service
    finally:
        service.stop()
