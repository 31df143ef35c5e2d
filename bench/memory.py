"""Does resident memory come back after bursts of big batches?  CPU memory settings side by side:

    .venv/bin/python -m bench.memory [--bursts 256,1024,64,16] [--threads 1] [--rounds 3]
                                     [--variants a,b,...] [--timed a,b,...]

ONNX Runtime's CPU arena (BFC) keeps every region it ever grew, so a session holds on to the memory of
the largest batch it ever ran. Each variant (`VARIANTS`) is measured in a fresh subprocess (RSS is per
process, and glibc's heap state from one variant would skew the next), which

1. loads the forecast session (`model.onnx`) of every version with the service's session options
   (`app.engine.session.session_options`) plus the variant's memory settings, and warms each up
   with one window, as the service does;
2. records VmRSS (`/proc/self/status`; no psutil in the image) after the warm-up, right after bursts of
   big batches on every version, after a few one-window calls, and after more cycles of the same
   (history must not ratchet it up); VmHWM is the peak, the working set of the biggest batch.

Latency (`--timed`): median session.run time on the latest version, per batch size, each variant in a
fresh process of its own (an arena, glibc's heaps and THP are per process: variants sharing one would
interfere); `--rounds` rounds in rotating order, so that a slow stretch of this shared machine does not
land on one variant only, and each figure is the median of the rounds.

`service` is the app's `OnnxModel` as it is in this tree, built and called exactly as the service does
(in the parent's environment): the arena on while calls come back to back (its latency is timed that
way), and `release_memory` once each burst is over, as the batcher calls it when a version has been
idle for RSA_MEMORY_RELEASE_IDLE_S. After bursts it must stay within the bound.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.cli import ints
from bench.harness.measure import proc_status_mib
from bench.harness.report import format_table

REPO = Path(__file__).resolve().parents[1]
MODEL_DIR = REPO / "model_repository" / "etth1-rsa"
SHRINK_KEY = "memory.enable_memory_arena_shrinkage"  # onnxruntime_run_options_config_keys.h
SHRINK_CPU = "cpu:0"  # "device:id" pairs, ';'-separated; needs the CPU arena enabled
# glibc >= 2.35: malloc asks for transparent huge pages (madvise) on what it maps. Where THP is in
# "madvise" mode (this machine, Ubuntu hosts) a big batch then faults 2 MiB pages instead of 4 KiB ones.
THP_TUNABLE = "glibc.malloc.hugetlb=1"
MARGIN_MB = 50.0  # the bound: growth after bursts <= max(MARGIN_MB, MARGIN_PCT % of the warm level)
MARGIN_PCT = 20.0
# Without an arena, big tensors are mmapped and unmapped, but glibc serves the ones under its (dynamic, up
# to 32 MiB) mmap threshold from its heaps, and fragments there stay resident: measured +60 MiB after
# mixed 256/64/16-row bursts, +130 MiB with 1024. malloc_trim(0) hands free heap pages back; after runs of
# more rows than this only, as it costs ~1 ms (page faults on the next call) that a 1-row call would feel.
TRIM_ABOVE_ROWS = 8
TRIMMED = f"glibc malloc_trim(0) after runs of more than {TRIM_ABOVE_ROWS} rows"
THP = f"GLIBC_TUNABLES={THP_TUNABLE}"


@dataclass(frozen=True)
class Variant:
    name: str
    what: str
    arena: bool = True  # SessionOptions.enable_cpu_mem_arena
    shrink: bool = False  # RunOptions SHRINK_KEY=SHRINK_CPU on every run: idle arena regions freed after it
    mem_pattern: bool = True  # SessionOptions.enable_mem_pattern
    same_as_requested: bool = False  # one env-wide CPU arena that grows by exactly what is asked
    trim_above: int | None = None  # glibc malloc_trim(0) after runs of more rows than this
    thp: bool | None = False  # GLIBC_TUNABLES=THP_TUNABLE in the process; None: the parent's environment
    service: bool = False  # app.engine.session.OnnxModel as it is in the tree (load, warmup, run_forecast)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.thp is not None:  # explicit either way, whatever the parent (a container) has set
            env.pop("GLIBC_TUNABLES", None)
            if self.thp:
                env["GLIBC_TUNABLES"] = THP_TUNABLE
        return env


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("default", "CPU arena on, never shrunk: the service before the fix"),
        Variant("no-arena", "enable_cpu_mem_arena=False: plain malloc/free", arena=False),
        Variant("no-arena+trim", f"no-arena, {TRIMMED}", arena=False, trim_above=TRIM_ABOVE_ROWS),
        Variant("shrink", "arena on, RunOptions memory.enable_memory_arena_shrinkage=cpu:0", shrink=True),
        Variant("shrink+trim", f"shrink, {TRIMMED}", shrink=True, trim_above=TRIM_ABOVE_ROWS),
        Variant("default+thp", f"default, {THP}", thp=True),
        Variant("no-arena+thp", f"no-arena, {THP}", arena=False, thp=True),
        Variant(
            "no-arena+trim+thp", f"no-arena+trim, {THP}", arena=False, trim_above=TRIM_ABOVE_ROWS, thp=True
        ),
        Variant("shrink+thp", f"shrink, {THP}", shrink=True, thp=True),
        Variant(
            "shrink-exact",
            "shrink on a shared env arena with kSameAsRequested",
            shrink=True,
            same_as_requested=True,
        ),
        Variant("no-pattern", "no-arena and enable_mem_pattern=False", arena=False, mem_pattern=False),
        Variant(
            "service", "app.engine.session.OnnxModel as in this tree, parent's env", thp=None, service=True
        ),
    )
}
BASELINE = "default"
RECOMMENDED = "shrink+trim"
MEMORY_VARIANTS = (
    "default",
    "no-arena",
    "no-arena+trim",
    "shrink",
    "shrink+trim",
    "default+thp",
    "no-arena+thp",
    "no-arena+trim+thp",
    "service",
)
LATENCY_VARIANTS = (
    "default",
    "no-arena",
    "no-arena+trim",
    "shrink+trim",
    "default+thp",
    "no-arena+trim+thp",
    "service",
)


@dataclass
class MemoryResult:
    variant: str
    threads: int
    bursts: list[int]
    rss_start_mb: float = 0.0  # after imports, before any session
    rss_warm_mb: float = 0.0  # sessions loaded and warmed up with one window
    rss_burst_mb: float = 0.0  # right after the first bursts
    rss_small_mb: float = 0.0  # then after a few one-window calls on every version
    rss_cycles_mb: list[float] = field(default_factory=list)  # after each further cycle of bursts + small
    peak_mb: float = 0.0  # VmHWM: the working set of the biggest batch, which RSA_MAX_BATCH_ROWS bounds

    @property
    def rss_after_mb(self) -> float:
        """The worst level once the bursts are over (small calls or a later cycle): what the bound is on."""
        return max([self.rss_small_mb, *self.rss_cycles_mb])

    @property
    def growth_mb(self) -> float:
        return self.rss_after_mb - self.rss_warm_mb

    @property
    def growth_pct(self) -> float:
        return 100.0 * self.growth_mb / self.rss_warm_mb


def within_margin(r: MemoryResult, *, mb: float = MARGIN_MB, pct: float = MARGIN_PCT) -> bool:
    """The stated bound: after the bursts, RSS is at most `mb` MiB or `pct` % (whichever is larger) above
    its level after warm-up."""
    return r.growth_mb <= max(mb, r.rss_warm_mb * pct / 100.0)


# -- in the subprocess ----------------------------------------------------------------------------------
def _proc_status_mb(key: str) -> float:
    """VmRSS / VmHWM of this process in MiB."""
    return proc_status_mib(os.getpid(), key)


def _malloc_trim() -> Callable[[], None]:
    """glibc's malloc_trim(0): give the free pages of every malloc heap back to the kernel."""
    libc = ctypes.CDLL(None)  # the C library this process already has loaded
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int

    def trim() -> None:
        libc.malloc_trim(0)

    return trim


Run = Callable[[int], None]  # batch size -> one forecast call on fresh random windows


def _runners(
    variant: Variant,
    version_dirs: Sequence[Path],
    threads: int,
    idle: list[Callable[[], object]] | None = None,
) -> list[Run]:
    """One callable per version, running the forecast graph the way the variant says; each warmed up.
    `idle` gets what the service does once a version has been idle for a moment (its batcher's release
    hook), for the service variant; the other variants do all they do in their runs."""
    import numpy as np
    import onnxruntime as ort

    from app.artifacts.manifest import load_manifest
    from app.engine.model import OnnxModel
    from app.engine.providers import RuntimeOptions
    from app.engine.session import session_options

    options = RuntimeOptions(device="cpu", intra_op_threads=threads)
    rng = np.random.default_rng(0)
    if variant.same_as_requested:
        # The CPU EP's own arena cannot be configured from Python; a shared one registered in the env can.
        # max_mem 0 = no limit, strategy 1 = kSameAsRequested, -1 = ORT defaults for the chunk sizes.
        info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
        ort.create_and_register_allocator(info, ort.OrtArenaCfg(0, 1, -1, -1))
    trim = _malloc_trim() if variant.trim_above is not None else None
    run_options: ort.RunOptions | None = None
    if variant.shrink:
        run_options = ort.RunOptions()
        run_options.add_run_config_entry(SHRINK_KEY, SHRINK_CPU)
    runs: list[Run] = []
    for vdir in version_dirs:
        model = OnnxModel(vdir, load_manifest(vdir / "manifest.json"), options)

        def feed(n: int, model: OnnxModel = model) -> dict[str, Any]:
            m = model.manifest
            x = rng.standard_normal((n, m.input_length, m.n_channels), dtype=np.float32)
            phases = None if m.cycle is None else np.arange(n, dtype=np.int64) % m.cycle.period
            return model.feed(x, phases)

        if variant.service:
            model.load()
            model.warmup()  # what the registry does before a version turns ready

            def run_service(n: int, model: OnnxModel = model, feed: Any = feed) -> None:
                model.run_forecast(feed(n))

            runs.append(run_service)
            if idle is not None:
                idle.append(model.release_memory)
            continue
        so = session_options(options)  # the service's options, then the variant's memory settings
        so.enable_cpu_mem_arena = variant.arena
        so.enable_mem_pattern = variant.mem_pattern
        if variant.same_as_requested:
            so.add_session_config_entry("session.use_env_allocators", "1")
        session = ort.InferenceSession(str(vdir / "model.onnx"), so, providers=["CPUExecutionProvider"])

        def run(n: int, session: ort.InferenceSession = session, feed: Any = feed) -> None:
            session.run(["forecast"], feed(n), run_options)  # the output is dropped at once, as a reply's is
            if trim is not None and n > (variant.trim_above or 0):
                trim()

        run(1)  # warm-up, as OnnxModel.warmup
        runs.append(run)
    return runs


def measure_memory(spec: Mapping[str, Any]) -> MemoryResult:
    """RSS of one variant through bursts, in this (fresh) process."""
    variant = VARIANTS[spec["variant"]]
    bursts: list[int] = spec["bursts"]
    res = MemoryResult(variant.name, spec["threads"], bursts, rss_start_mb=_proc_status_mb("VmRSS"))
    idle: list[Callable[[], object]] = []
    runs = _runners(variant, [Path(p) for p in spec["version_dirs"]], spec["threads"], idle)
    res.rss_warm_mb = _proc_status_mb("VmRSS")
    for cycle in range(1 + spec["cycles"]):
        for n in bursts:  # every version sees the big batches, as a few large requests would make
            for _ in range(spec["burst_calls"]):
                for run in runs:
                    run(n)
        for release in idle:  # the burst is over: the service's versions go idle
            release()
        if cycle == 0:
            res.rss_burst_mb = _proc_status_mb("VmRSS")
        for _ in range(spec["small_calls"]):
            for run in runs:
                run(1)
        for release in idle:
            release()
        if cycle == 0:
            res.rss_small_mb = _proc_status_mb("VmRSS")
        else:
            res.rss_cycles_mb.append(_proc_status_mb("VmRSS"))
    res.peak_mb = _proc_status_mb("VmHWM")
    return res


def measure_latency(spec: Mapping[str, Any]) -> dict[int, float]:
    """Median session.run time (ms) per batch size, on the latest version, in this (fresh) process."""
    (run,) = _runners(VARIANTS[spec["variant"]], [Path(spec["version_dirs"][-1])], spec["threads"])
    out: dict[int, float] = {}
    for batch, repeats in zip(spec["batches"], spec["repeats"], strict=True):
        run(batch)  # the first call at a size plans (and, with an arena, grows) memory for it
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            run(batch)
            times.append(time.perf_counter() - t)
        out[batch] = 1e3 * statistics.median(times)
    return out


# -- in the parent ---------------------------------------------------------------------------------------
def _version_dirs() -> list[str]:
    return [str(p.parent) for p in sorted(MODEL_DIR.glob("*/model.onnx"))]


def version_dirs(versions: Sequence[int]) -> list[str]:
    """The folders of these versions of etth1-rsa; a version that is not there is refused by name."""
    missing = [v for v in versions if not (MODEL_DIR / str(v) / "model.onnx").is_file()]
    if missing:
        raise SystemExit(
            f"no version {missing} of {MODEL_DIR.name}; it has {[Path(d).name for d in _version_dirs()]}"
        )
    return [str(MODEL_DIR / str(v)) for v in versions]


def _subprocess(mode: str, spec: Mapping[str, Any], env: Mapping[str, str], timeout_s: float) -> Any:
    """`python -m bench.memory --MODE SPEC` in a fresh process; its JSON answer (last line of stdout)."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.memory", f"--{mode}", json.dumps(spec)],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} {spec} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_memory(
    variant: str,
    *,
    bursts: Sequence[int] = (256, 1024),
    burst_calls: int = 2,
    small_calls: int = 3,
    cycles: int = 2,
    threads: int = 1,
    version_dirs: Sequence[str] | None = None,
    timeout_s: float = 900,
) -> MemoryResult:
    """`measure_memory` for one variant in a fresh Python process (RSS is per process)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {sorted(VARIANTS)}")
    spec = {
        "variant": variant,
        "threads": threads,
        "bursts": list(bursts),
        "burst_calls": burst_calls,
        "small_calls": small_calls,
        "cycles": cycles,
        "version_dirs": list(version_dirs or _version_dirs()),
    }
    return MemoryResult(**_subprocess("memory", spec, VARIANTS[variant].env(), timeout_s))


def run_latency(
    variants: Sequence[str],
    *,
    batches: Sequence[int] = (1, 64, 256),
    repeats: Sequence[int] = (200, 20, 8),
    threads: int = 1,
    rounds: int = 3,
    version_dirs: Sequence[str] | None = None,
    timeout_s: float = 1800,
) -> dict[str, dict[int, float]]:
    """`measure_latency` for each variant in its own fresh process (an arena, glibc's heaps and THP are
    per process: sharing one would let variants interfere); `rounds` rounds, the order rotated each
    round so that a slow stretch of a shared machine does not land on one variant. variant -> batch ->
    median over the rounds of each round's median, in ms."""
    if len(batches) != len(repeats):
        raise ValueError(f"{len(batches)} batch sizes but {len(repeats)} repeat counts")
    names = list(variants)
    per_round: dict[str, dict[int, list[float]]] = {n: {b: [] for b in batches} for n in names}
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            spec = {
                "variant": name,
                "batches": list(batches),
                "repeats": list(repeats),
                "threads": threads,
                "version_dirs": list(version_dirs or _version_dirs()),
            }
            for b, ms in _subprocess("latency", spec, VARIANTS[name].env(), timeout_s).items():
                per_round[name][int(b)].append(ms)
    return {n: {b: statistics.median(v) for b, v in per.items()} for n, per in per_round.items()}


def table(memory: Sequence[MemoryResult], latency: Mapping[str, Mapping[int, float]]) -> str:
    batches = sorted({b for per in latency.values() for b in per})
    base = latency.get(BASELINE, {})
    header = ["variant", "warm", "burst", "small", "cycles", "peak", "growth", "%", "bound"]
    header += [h for b in batches for h in (f"p50@{b} ms", "x")]
    names = [r.variant for r in memory] + [n for n in latency if n not in {r.variant for r in memory}]
    by_name = {r.variant: r for r in memory}
    rows = []
    for name in names:
        row = [name]
        r = by_name.get(name)
        if r is None:
            row += [""] * 8
        else:
            cycles = "/".join(f"{v:.0f}" for v in r.rss_cycles_mb) or "-"
            row += [f"{r.rss_warm_mb:.0f}", f"{r.rss_burst_mb:.0f}", f"{r.rss_small_mb:.0f}", cycles]
            row += [f"{r.peak_mb:.0f}", f"{r.growth_mb:.1f}", f"{r.growth_pct:.0f}"]
            row += ["ok" if within_margin(r) else "NO"]
        for b in batches:
            ms = latency.get(name, {}).get(b)
            row += [f"{ms:.2f}" if ms is not None else "-"]
            row += [f"{ms / base[b]:.2f}" if ms is not None and b in base else "-"]
        rows.append(row)
    return format_table(header, rows)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memory", help=argparse.SUPPRESS)  # JSON spec: measure here, print JSON (subprocess)
    ap.add_argument("--latency", help=argparse.SUPPRESS)  # likewise
    ap.add_argument("--variants", default=",".join(MEMORY_VARIANTS), help=f"RSS of: {', '.join(VARIANTS)}")
    ap.add_argument("--timed", default=",".join(LATENCY_VARIANTS), help="latency of (empty: none)")
    ap.add_argument("--bursts", default="256,1024,64,16", help="batch sizes of a burst, in order")
    ap.add_argument("--burst-calls", type=int, default=2, help="calls per burst size and version")
    ap.add_argument("--cycles", type=int, default=2, help="further cycles of bursts + small calls")
    ap.add_argument("--latency-batches", default="1,64,256")
    ap.add_argument("--latency-repeats", default="200,20,8", help="timed calls per batch size and round")
    ap.add_argument("--rounds", type=int, default=3, help="latency rounds (one process per variant each)")
    ap.add_argument("--threads", type=int, default=1, help="intra_op_num_threads (the tests run with 1)")
    ap.add_argument("--versions", default="", help="versions of etth1-rsa to load, e.g. 1,3 (default: all)")
    args = ap.parse_args(argv)
    if args.memory:
        print(json.dumps(asdict(measure_memory(json.loads(args.memory)))))
        return
    if args.latency:
        print(json.dumps(measure_latency(json.loads(args.latency))))
        return
    versions = version_dirs(ints(args.versions)) if args.versions else None
    memory = []
    for name in _names(args.variants):
        res = run_memory(
            name,
            bursts=ints(args.bursts),
            burst_calls=args.burst_calls,
            cycles=args.cycles,
            threads=args.threads,
            version_dirs=versions,
        )
        memory.append(res)
        print(f"memory {name}: {json.dumps(asdict(res))}", file=sys.stderr)
    latency: dict[str, dict[int, float]] = {}
    if _names(args.timed):
        latency = run_latency(
            _names(args.timed),
            batches=ints(args.latency_batches),
            repeats=ints(args.latency_repeats),
            threads=args.threads,
            rounds=args.rounds,
            version_dirs=versions,
        )
        print(f"latency: {json.dumps(latency)}", file=sys.stderr)
    print(
        f"RSS in MiB (VmRSS; peak = VmHWM). A burst: {args.bursts} rows x{args.burst_calls} calls on every "
        f"version; then 3 one-window calls each (small); then {args.cycles} more such cycles (cycles). "
        f"growth = worst of small/cycles - warm; bound: growth <= max({MARGIN_MB:g} MiB, "
        f"{MARGIN_PCT:g}% of warm)."
    )
    print(
        f"Latency: session.run on the latest version, intra_op_threads={args.threads}; median of "
        f"{args.latency_repeats} calls in a fresh process per variant and round, median of {args.rounds} "
        f"rounds; x = ratio to {BASELINE}. service: whichever variant app/engine/session.py is."
    )
    print(table(memory, latency))


def _names(text: str) -> list[str]:
    names = [s for s in text.split(",") if s]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    return names


if __name__ == "__main__":
    main()
