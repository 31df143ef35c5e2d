"""Resident memory of every process of the service, by role (`service_memory`, read from /proc by the
front end that answers a scrape); app/observability/metrics.py is the overview."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from app.observability.base import PREFIX

PROC = Path("/proc")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class ServiceProcess:
    pid: int
    role: str  # supervisor, engine, frontend, parse, resource_tracker, other
    resident_bytes: int


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # gone meanwhile, or not Linux
        return None


def _children(pid: int) -> list[int]:
    """A process's children: the kernel's list per thread where it has one, else a scan of /proc."""
    listed = glob.glob(str(PROC / str(pid) / "task" / "*" / "children"))
    if listed:
        return [int(c) for path in listed for c in (_read(Path(path)) or "").split()]
    found = []
    for stat in glob.glob(str(PROC / "[0-9]*" / "stat")):
        text = _read(Path(stat))
        # the parent pid is the 2nd field after the command, which is in parentheses and may hold spaces
        if text is not None and int(text.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(Path(stat).parent.name))
    return found


def _role(pid: int, root: int, supervised: bool, parent: int) -> str:
    if pid == root:
        return "supervisor" if supervised else "frontend"
    argv = (_read(PROC / str(pid) / "cmdline") or "").split("\0")
    command = " ".join(argv)
    if "app.engine" in argv:
        return "engine"
    if "multiprocessing.resource_tracker" in command:
        return "resource_tracker"
    if "multiprocessing.spawn" in command:  # the parse worker (app/core/offload.py)
        return "parse"
    if parent == root and "app" in argv:
        return "frontend"
    return "other"


def service_processes(root: int, supervised: bool) -> list[ServiceProcess]:
    """`root` (the supervisor with RSA_WORKERS > 1, else the service's one process) and every process
    under it, each with its role and resident memory (/proc; none where there is no /proc)."""
    found: list[ServiceProcess] = []
    todo = [(root, 0)]
    while todo:
        pid, parent = todo.pop()
        statm = _read(PROC / str(pid) / "statm")
        if statm is None:
            continue
        found.append(
            ServiceProcess(pid, _role(pid, root, supervised, parent), int(statm.split()[1]) * PAGE_BYTES)
        )
        todo.extend((child, pid) for child in _children(pid))
    return found


def service_memory(supervisor: int | None) -> list[Metric]:
    """Resident memory of every process of the service, by role and pid, and in total: the processes
    under `supervisor` (RSA_WORKERS > 1), else under this one."""
    processes = service_processes(supervisor or os.getpid(), supervised=supervisor is not None)
    if not processes:
        return []
    each = GaugeMetricFamily(
        f"{PREFIX}_process_resident_memory_bytes",
        "Resident memory of each process of the service, by role (supervisor, engine, frontend, parse, "
        "resource_tracker, other) and pid.",
        labels=["role", "pid"],
    )
    for process in sorted(processes, key=lambda p: (p.role, p.pid)):
        each.add_metric([process.role, str(process.pid)], process.resident_bytes)
    total = GaugeMetricFamily(
        f"{PREFIX}_service_resident_memory_bytes",
        "Resident memory of the whole service: the sum over its processes "
        "(rsa_process_resident_memory_bytes).",
        value=sum(p.resident_bytes for p in processes),
    )
    return [each, total]
