"""Measurement: CPU accounting from /proc, interleaved timing of in-process cases, one loaded cell.

- `process_cpu_s` / `tree_cpu_s`: utime + stime of one process, or of a process and all its descendants
  (a server's supervisor, engine and front ends; LitServe's workers).
- `interleaved` / `median_ms`: in-process cases run round-robin, the order rotated every round, so that
  the machine's drift hits all alike.
- `load_cell`: a warm-up, then the measured phase of `run_load` with the server's process-tree CPU
  around it, the warm-up's checks counted in the result.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from bench.harness.load import Checker, LoadResult
    from bench.harness.workloads import Workload

K = TypeVar("K", bound=Hashable)  # what names a timed case


def _utime_stime(stat: str) -> int:
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return int(fields[11]) + int(fields[12])


def process_cpu_s(pid: int) -> float | None:
    """utime + stime of a process from /proc (Linux); None elsewhere or once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return _utime_stime(stat) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """utime + stime of a process and all its descendants, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        pid = int(stat.parent.name)
        children.setdefault(int(text[text.rindex(")") + 2 :].split()[1]), []).append(pid)
        cpu[pid] = _utime_stime(text)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


def interleaved(
    cases: Mapping[K, Callable[[], object]], *, repeats: int, budget_s: float, warmup: int = 1
) -> dict[K, list[float]]:
    """Seconds per call of each case, the cases run round-robin with the order rotated every round, so
    that the machine's drift hits all alike. At most `repeats` rounds, none started after `budget_s`
    (at least one runs)."""
    names = list(cases)
    for _ in range(warmup):  # first calls plan memory, fill caches, spin up thread pools
        for f in cases.values():
            f()
    times: dict[K, list[float]] = {n: [] for n in names}
    deadline = time.perf_counter() + budget_s
    for r in range(max(1, repeats)):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - t0)
        if time.perf_counter() >= deadline:
            break
    return times


def median_ms(seconds: Sequence[float]) -> float:
    return 1e3 * statistics.median(seconds)


def load_cell(
    base_url: str,
    work: Workload,
    *,
    requests: int,
    concurrency: int,
    warmup: int,
    seconds: float,
    pid: int,
    check: Checker | None = None,
) -> LoadResult:
    """`warmup` checked, untimed requests, then `requests` measured ones of `work` at `concurrency`, with
    the server's process-tree CPU (root `pid`) over the measured phase in `server_cpu_s`. Warm-up answers
    are checked too (by `check`, default the workload's checker): their errors count in the result, and
    `warmup` says how many there were. No request starts after `seconds` (per phase)."""
    from bench.harness.load import run_load  # here: the load client imports this module's CPU reader

    check = work.checker if check is None else check
    common = {
        "concurrency": concurrency,
        "time_limit_s": seconds,
        "series_per_request": work.series_per_request,
        "content_type": work.content_type,
        "headers": work.headers,
    }
    url = base_url + work.path

    async def both() -> tuple[LoadResult | None, LoadResult, float, float]:
        warm = await run_load(url, work.bodies, check, requests=warmup, **common) if warmup else None
        cpu0 = tree_cpu_s(pid)
        result = await run_load(url, work.bodies, check, requests=requests, **common)
        return warm, result, cpu0, tree_cpu_s(pid)

    warm, result, cpu0, cpu1 = asyncio.run(both())
    result.server_cpu_s = cpu1 - cpu0
    if warm is not None:
        result.warmup = warm.completed
        result.checked += warm.checked
        for kind, n in warm.errors.items():
            result.errors[kind] = result.errors.get(kind, 0) + n
        result.error_samples[:0] = warm.error_samples
    return result
