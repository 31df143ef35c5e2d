"""The processes of a live service with RSA_WORKERS > 1, as the tests that kill them see them: the
supervisor's children (the engine and the front ends) and whether a killed one has let go of its sockets."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench.harness.servers import listens
from tests.app.live import LiveService
from tests.utils.speed import scaled


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of a process's children."""
    out = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid=,args="], capture_output=True, text=True)
    rows = [line.strip().split(None, 1) for line in out.stdout.splitlines() if line.strip()]
    return [(int(pid_), args) for pid_, args in rows]


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
    found = children(service.process.pid)
    return [pid for pid, args in found if "app.engine" not in args and not exited(pid)]


def exited(pid: int) -> bool:
    """Gone, or a zombie whose every thread has exited. A zombie leader alone is not enough: its other
    threads still hold the process's files (its listening socket among them) while they exit. Seen on the
    quiet 2-core machine (2026-12-06, a front end of 7 threads killed by SIGKILL, `ss` sampled): the
    socket still listening when the leader first showed Z with 5 threads left, gone 18 ms later; longer
    under load. A connection the kernel hands that socket meanwhile is reset."""
    try:
        zombie = "\tZ" in Path(f"/proc/{pid}/status").read_text().split("State:")[1][:4]
        return zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except (FileNotFoundError, IndexError):
        return True


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
