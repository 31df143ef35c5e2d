"""The processes of a live service with RSA_WORKERS > 1, as the tests that kill them see them: the
supervisor's children (the engine and the front ends) and whether a killed one has let go of its sockets
(`children`, `exited` and `front_ends_of` are bench.harness.servers', which the benches use too)."""

from __future__ import annotations

import time

from bench.harness.servers import children, exited, front_ends_of, listens
from tests.app.live import LiveService
from tests.utils.speed import scaled


def tree(pid: int) -> list[int]:
    """The process and every process under it."""
    found, todo = [], [pid]
    while todo:
        now = todo.pop()
        found.append(now)
        todo.extend(child for child, _ in children(now))
    return found


def engine(service: LiveService) -> int:
    return next(pid for pid, args in children(service.process.pid) if "app.engine" in args)


def front_ends(service: LiveService) -> list[int]:
    """The live ones: a killed front end not yet reaped by the supervisor is left out."""
    return front_ends_of(service.process.pid)


def wait_exited(pid: int) -> None:
    """Until `exited(pid)`, at most 10 s (on a quiet machine)."""
    deadline = time.monotonic() + scaled(10)
    while not exited(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still alive")
        time.sleep(0.01)


def serving_front_ends(service: LiveService, count: int = 2) -> list[int]:
    """The front ends once `count` of them listen on the service's port, at most 30 s (on a quiet machine).
    A front end started again but still importing holds no socket yet: killing the other then would
    leave none, and connections would be refused for no fault of the client's."""
    port = int(service.url.rsplit(":", 1)[1])
    deadline = time.monotonic() + scaled(30)
    while len(fronts := front_ends(service)) < count or not all(listens(f, port) for f in fronts):
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} front ends not serving: {children(service.process.pid)}")
        time.sleep(0.1)
    return fronts
