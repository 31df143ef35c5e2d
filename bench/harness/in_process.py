"""The service in this process (`create_app` under Starlette's TestClient: the real request path, no
port), ready before a bench uses it.

The service loads every model version in the background (app/lifecycle.py), so a bench waits for GET
/readyz before it times or checks anything. The wait is bounded: a version that fails to load keeps
/readyz at 503, and the bench stops with the readiness answer (which names the version and why) instead
of polling forever.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from app.core.config import Settings

READY_TIMEOUT_S = (
    300.0  # the slowest start-up a bench makes (a repository of every shipped model) takes seconds
)
POLL_S = 0.2


class Probe(Protocol):
    def get(self, url: str) -> _Answer: ...


class _Answer(Protocol):
    status_code: int
    text: str


def wait_ready(client: Probe, timeout_s: float = READY_TIMEOUT_S, poll_s: float = POLL_S) -> None:
    """Return once `client`'s GET /readyz answers 200; RuntimeError with its last answer after
    `timeout_s` (at most timeout_s / poll_s + 1 probes)."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / poll_s) + 1):
        answer = client.get("/readyz")
        if answer.status_code == 200:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    raise RuntimeError(
        f"the service was not ready within {timeout_s:g} s: "
        f"GET /readyz {answer.status_code} {answer.text[:2000]}"
    )


@contextlib.contextmanager
def serve_in_process(settings: Settings, timeout_s: float = READY_TIMEOUT_S) -> Iterator[TestClient]:
    """The service of `settings` in this process, every version loaded and warmed up (`wait_ready`)."""
    from fastapi.testclient import TestClient

    from app.main import create_app

    with TestClient(create_app(settings)) as client:
        wait_ready(client, timeout_s)
        yield client
