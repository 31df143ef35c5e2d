"""The memory and CPU of a process tree from Linux's /proc: each process's proportional set size (PSS)
and CPU seconds, and `PeakRss`, the tree's summed PSS sampled in a thread (bench/batch.py's batch job:
the driver, Ray's processes and the actor)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

__all__ = ["PeakRss"]


def _pss_mib(pid: int) -> float:
    """A process's proportional set size (shared pages split among their sharers: Ray's processes share
    the object store and libraries, which a sum of RSS would count once per process)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _named(pid: int, name: str) -> str:
    """A Python process by what it runs (this bench, Ray's agents), other processes by their name."""
    if pid == os.getpid():
        return "driver (this bench)"
    if not name.startswith("python"):
        return name
    with contextlib.suppress(OSError):
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        for i, arg in enumerate(args[1:], 1):
            if arg == b"-m" and i + 1 < len(args):
                return f"python -m {args[i + 1].decode()}"
            if arg.endswith(b".py"):
                return f"python {Path(arg.decode()).name}"
    return name


def _tree(root: int) -> dict[int, tuple[str, float]]:
    """`root` and every descendant (Linux /proc): pid -> (its name, the CPU seconds it has used)."""
    stats: dict[int, list[str]] = {}
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        pid, (name, rest) = int(stat.parent.name), text.split(" (", 1)[1].rsplit(") ", 1)
        fields = rest.split()
        stats[pid] = [name, *fields]
        children.setdefault(int(fields[1]), []).append(pid)
    tick = os.sysconf("SC_CLK_TCK")
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:  # fields after the name: state ppid ... utime (12th) stime (13th)
            found[pid] = (_named(pid, stats[pid][0]), (int(stats[pid][12]) + int(stats[pid][13])) / tick)
        todo.extend(children.get(pid, []))
    return found


class PeakRss:
    """The process tree's summed PSS, sampled every `every_s` in a thread; `peak` its maximum, printed
    every `print_every_s` when that is set; `cpu` the CPU seconds each process used (by name, summed, as
    last seen): where the cores went. The whole /proc is walked for new processes every `walk_every_s`
    only: at every 0.5 s, the walk and the samples took a share of the cores the job was measured on (the
    driver's tree used 196 CPU seconds beside the actor's 516 in the 100,000-series run, 2026-11-27)."""

    def __init__(
        self, root: int, every_s: float = 1.0, print_every_s: float | None = None, walk_every_s: float = 10.0
    ) -> None:
        self.root, self.every_s, self.print_every_s, self.peak = root, every_s, print_every_s, 0.0
        self.walk_every_s = walk_every_s
        self._seen: dict[int, tuple[str, float]] = {}
        self._start: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = walked = time.monotonic()
        tree = _tree(self.root)
        while not self._stop.is_set():
            if time.monotonic() - walked >= self.walk_every_s:
                walked, tree = time.monotonic(), _tree(self.root)
                self._seen.update(tree)
            total = 0.0
            for pid in tree:
                with contextlib.suppress(OSError, ValueError):  # gone meanwhile
                    total += _pss_mib(pid)
            self.peak = max(self.peak, total)
            if self.print_every_s is not None and time.monotonic() - last >= self.print_every_s:
                last = time.monotonic()
                print(f"  peak PSS so far {self.peak:,.0f} MiB (now {total:,.0f})", flush=True)
            self._stop.wait(self.every_s)
        self._seen.update(_tree(self.root))

    @property
    def cpu(self) -> dict[str, float]:
        by_name: dict[str, float] = {}
        for pid, (name, seconds) in self._seen.items():
            by_name[name] = by_name.get(name, 0.0) + seconds - self._start.get(pid, 0.0)
        return dict(sorted(by_name.items(), key=lambda kv: -kv[1]))

    def __enter__(self) -> PeakRss:
        self._start = {pid: cpu for pid, (_, cpu) in _tree(self.root).items()}  # this process's past
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
