"""Measurement: CPU accounting from /proc, interleaved timing of in-process cases, one loaded cell.

- `process_cpu_s` / `tree_cpu_s`: utime + stime of one process, or of a process and all its descendants
  (a server's supervisor, engine and front ends; LitServe's workers); `proc_status_mib`: its memory.
- `interleaved` / `median_ms`: in-process cases run round-robin, the order rotated every round, so that
  the machine's drift hits all alike.
- `back_to_back`: in-process calls (a raw session: the baseline a server is compared with), timed;
- `load_cell`: a warm-up, then the measured phase of `run_load` with the server's process-tree CPU
  around it, the warm-up's checks counted in the result; `measure_cell`: the same as a `Cell` (one
  server at one load), with how many answers were parsed and their size.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from bench.harness.checks import AnswerCheck
    from bench.harness.load import Checker, LoadResult
    from bench.harness.servers import LocalServer
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


def proc_status_mib(pid: int, key: str) -> float:
    """VmRSS / VmHWM (`key`) of a process in MiB, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {key} in /proc/{pid}/status")


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


@dataclass
class Calls:
    """In-process calls, back to back, each on `batch` windows."""

    batch: int
    duration_s: float
    latencies_ms: list[float] = field(repr=False)

    @property
    def windows_per_s(self) -> float:
        return self.batch * len(self.latencies_ms) / self.duration_s if self.duration_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))

    def summary(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "calls": len(self.latencies_ms),
            "duration_s": self.duration_s,
            "windows_per_s": self.windows_per_s,
            "latency_ms": {f"p{q}": self.percentile_ms(q) for q in (50, 90, 99)},
        }


def back_to_back(
    call: Callable[[np.ndarray], object],
    batches: Sequence[np.ndarray],
    *,
    calls: int,
    seconds: float,
    warmup: int = 5,
) -> Calls:
    """`calls` calls (none started after `seconds`), cycling through `batches`, after `warmup` untimed
    ones (at most one per batch)."""
    for x in batches[:warmup]:
        call(x)
    latencies: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds
    for i in range(calls):
        if time.perf_counter() >= deadline:
            break
        t0 = time.perf_counter()
        call(batches[i % len(batches)])
        latencies.append((time.perf_counter() - t0) * 1e3)
    return Calls(len(batches[0]), time.perf_counter() - start, latencies)


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


@dataclass(frozen=True)
class Load:
    """One cell's load: `requests` measured at `concurrency` after `warmup`, each phase cut at `seconds`."""

    concurrency: int
    requests: int
    warmup: int
    seconds: float


@dataclass
class Cell:
    """One server at one load, one workload, one protocol."""

    server: str
    concurrency: int
    series_per_request: int
    result: LoadResult
    parsed: int  # answers parsed and compared in this cell (the rest byte-identical to a verified one)
    answer_bytes: float | None  # mean size of the distinct answers verified so far
    protocol: str = "v1"

    @property
    def ok(self) -> bool:
        return self.result.error_count == 0 and self.result.completed == self.result.requests

    @property
    def shaky(self) -> bool:
        """Errors, or cut by the time limit: a target computed from it says so."""
        return not self.ok or self.result.stopped_by_time_limit

    @property
    def windows_per_s(self) -> float:
        return self.result.throughput * self.series_per_request

    def cpu_ms(self, seconds: float | None) -> float | None:
        return None if seconds is None else 1e3 * seconds / max(self.result.completed, 1)

    def summary(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "protocol": self.protocol,
            "parsed_answers": self.parsed,
            "answer_bytes": self.answer_bytes,
            "server_cpu_ms_per_request": self.cpu_ms(self.result.server_cpu_s),
            "client_cpu_ms_per_request": self.cpu_ms(self.result.client_cpu_s),
        } | self.result.summary()


def measure_cell(
    server: str, live: LocalServer, work: Workload, check: AnswerCheck, load: Load, protocol: str = "v1"
) -> Cell:
    """`load_cell` of `work` on `live` (answers checked by `check`, this server's own), as a `Cell`."""
    parsed0 = check.parsed
    result = load_cell(live.url, work, **asdict(load), pid=live.process.pid, check=check)
    sizes = check.answer_sizes()
    return Cell(
        server=server,
        concurrency=load.concurrency,
        series_per_request=work.series_per_request,
        result=result,
        parsed=check.parsed - parsed0,
        answer_bytes=statistics.mean(sizes) if sizes else None,
        protocol=protocol,
    )
