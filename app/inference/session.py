"""ONNX Runtime sessions for one model version: numpy in, numpy out. No web framework here.

`OnnxModel` owns the forecast session (created by `load()`) and the inspection session (created on
the first `inspect()` call, so forecasting never pays for it). Calls block: run them off the event loop.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from app.artifacts.contract import (
    ATTN_MIXED,
    ATTN_REM,
    ATTN_SOFTMAX,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    INSPECT_FILE,
    MODEL_FILE,
    PHASE_INPUT,
)
from app.artifacts.manifest import Manifest, input_names
from app.inference.batching import Feed  # graph input name -> array with one row per window

logger = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"

ProviderSpec = str | tuple[str, dict[str, Any]]

# Memory is released (OnnxModel.release_memory) only if a call of more rows than this ran since the last
# release: a few-row call grows nothing worth the ~1 ms a release costs.
TRIM_ABOVE_ROWS = 8
# ONNX Runtime's run option that frees the CPU arena's unused regions at the end of that run
# (onnxruntime_run_options_config_keys.h); "device:id" pairs.
ARENA_SHRINK_KEY = "memory.enable_memory_arena_shrinkage"
ARENA_SHRINK_CPU = "cpu:0"


class SessionLoadError(RuntimeError):
    """The ONNX file could not be loaded or does not match its manifest."""


@dataclass(frozen=True)
class RuntimeOptions:
    device: str = "auto"  # "auto" | "cpu" | "cuda"
    cuda_device_id: int = 0
    gpu_mem_limit_bytes: int | None = None
    intra_op_threads: int | None = None  # None: the CPUs this process may run on
    # On the CPU provider, calls of at most this many rows run on a second, single-threaded instance of
    # the forecast session (0: none). See OnnxModel.
    single_thread_max_rows: int = 0


def default_intra_op_threads() -> int:
    """The CPUs in this process's affinity mask (what a container's cpuset grants), not the host's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


_preloaded = False


def preload_cuda_libraries() -> None:
    """Load CUDA, cuDNN and cuBLAS from NVIDIA's PyPI wheels, where they are installed (the image).

    onnxruntime-gpu finds the CUDA libraries on the system library path (NVIDIA's CUDA images) or,
    after `preload_dlls`, in the `nvidia` packages of site-packages. Only called when those packages
    exist: elsewhere preload_dlls prints a failure line for every library it cannot find.
    """
    global _preloaded
    if _preloaded or importlib.util.find_spec("nvidia") is None:
        return
    _preloaded = True
    ort.preload_dlls(directory="")  # "": NVIDIA's site packages first, then the default search path
    logger.info("preloaded the CUDA and cuDNN libraries of NVIDIA's Python wheels")


def choose_providers(options: RuntimeOptions) -> list[ProviderSpec]:
    """CUDA (with explicit options) then CPU when CUDA is allowed and this build has it; else CPU only."""
    if options.device == "cpu":
        return [CPU]
    if CUDA not in ort.get_available_providers():
        if options.device == "cuda":
            logger.warning("RSA_DEVICE=cuda but this onnxruntime build has no %s; using %s", CUDA, CPU)
        return [CPU]
    preload_cuda_libraries()
    cuda_options: dict[str, Any] = {
        "device_id": options.cuda_device_id,
        "arena_extend_strategy": "kSameAsRequested",
        "cudnn_conv_algo_search": "HEURISTIC",
        "do_copy_in_default_stream": True,
    }
    if options.gpu_mem_limit_bytes is not None:
        cuda_options["gpu_mem_limit"] = options.gpu_mem_limit_bytes
    return [(CUDA, cuda_options), CPU]


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _glibc_malloc_trim()


def release_free_heap() -> None:
    """Hand the free pages of every malloc heap back to the kernel (glibc; a no-op elsewhere).

    What ONNX Runtime's arena frees on shrinking goes back to glibc; the big regions are unmapped, but
    glibc serves blocks under its (dynamic, up to 32 MiB) mmap threshold from its heaps, whose free
    fragments stay resident: +125 MiB after 256/64/16-row bursts with shrinking alone, +10 MiB with this
    after it (bench/memory.py). Costs about a millisecond.
    """
    if _malloc_trim is not None:
        _malloc_trim(0)


def session_options(options: RuntimeOptions) -> ort.SessionOptions:
    so = ort.SessionOptions()
    # The CPU memory arena stays on: without it every call maps and faults in its tensors afresh, 2.7x
    # slower at 256 rows (bench/memory.py). An arena keeps every region it grows for the life of the
    # session (a few 256-row batches: ~90 MiB -> 2.2 GiB, for good), so OnnxModel.release_memory shrinks
    # it once the version has been idle a moment (the batcher's release hook).
    so.enable_cpu_mem_arena = True
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = options.intra_op_threads or default_intra_op_threads()
    so.inter_op_num_threads = 1
    return so


def create_session(path: Path, options: RuntimeOptions) -> ort.InferenceSession:
    """A session on the best allowed provider; logs the provider really in use."""
    providers = choose_providers(options)
    so = session_options(options)
    try:
        session = ort.InferenceSession(str(path), sess_options=so, providers=providers)
    except Exception as exc:  # ORT raises its own exception types (Fail, InvalidGraph, ...)
        raise SessionLoadError(f"onnxruntime cannot load {path}: {exc}") from exc
    in_use = session.get_providers()
    requested = [p if isinstance(p, str) else p[0] for p in providers]
    logger.info(
        "%s: providers in use %s (requested %s, intra_op_threads=%d)",
        path,
        in_use,
        requested,
        so.intra_op_num_threads,
    )
    if CUDA in requested and in_use[0] != CUDA:
        logger.warning("%s: %s was requested but the session fell back to %s", path, CUDA, in_use[0])
    return session


def _check_io(
    session: ort.InferenceSession, manifest: Manifest, outputs: tuple[str, ...], path: Path
) -> None:
    """The session's inputs and outputs are the ones the artifacts contract and the manifest promise."""
    inputs = session.get_inputs()
    names = [i.name for i in inputs]
    want_names = list(input_names(manifest.cycle))
    if names != want_names:
        raise SessionLoadError(f"{path}: expected inputs {want_names} (as the manifest says), got {names}")
    window = inputs[0]
    if window.type != "tensor(float)":
        raise SessionLoadError(f"{path}: input {FORECAST_INPUT!r} is {window.type}, expected tensor(float)")
    want = (manifest.input_length, manifest.n_channels)
    shape = list(window.shape)
    if len(shape) != 3 or any(isinstance(g, int) and g != w for g, w in zip(shape[1:], want, strict=True)):
        raise SessionLoadError(f"{path}: input shape {shape} does not match [batch, {want[0]}, {want[1]}]")
    if manifest.cycle is not None:
        phase = inputs[1]
        if phase.type != "tensor(int64)" or len(phase.shape) != 1:
            raise SessionLoadError(
                f"{path}: input {PHASE_INPUT!r} is {phase.type} {list(phase.shape)}, "
                "expected tensor(int64) [batch]"
            )
    names = {o.name for o in session.get_outputs()}
    missing = [name for name in outputs if name not in names]
    if missing:
        raise SessionLoadError(f"{path}: missing outputs {missing}; it has {sorted(names)}")


@dataclass(frozen=True)
class InspectResult:
    """Outputs of inspect.onnx for a batch of windows (N layers, Hh heads)."""

    forecast: np.ndarray  # [batch, H, C]
    softmax: np.ndarray  # [batch, C, N, Hh, L, L]
    rem: np.ndarray  # [N, Hh, L, L]
    mixed: np.ndarray  # [batch, C, N, Hh, L, L]


class OnnxModel:
    """The sessions of one model version.

    On the CPU provider the forecast graph may have two instances (as Triton's instance groups): the
    configured one (RSA_INTRA_OP_THREADS, all the CPUs by default) for big batches, and a single-threaded
    one for calls of at most `single_thread_max_rows` rows. Intra-op threads halve a 256-row call's
    latency, but on small calls they cost more CPU than they save (batch 1: 0.61 ms wall for 1.22 ms of
    CPU with 2 spinning threads, against 0.68 ms of both with one), and under load CPU is what a small
    request path runs out of. The weights are under a megabyte; the instances share nothing else.
    """

    def __init__(self, folder: Path, manifest: Manifest, options: RuntimeOptions) -> None:
        self.folder = folder
        self.manifest = manifest
        self.options = options
        self._session: ort.InferenceSession | None = None
        self._single: ort.InferenceSession | None = None  # the single-threaded instance, if any
        self._provider: str | None = None
        self._inspect_session: ort.InferenceSession | None = None
        self._inspect_lock = threading.Lock()
        self._grown: set[ort.InferenceSession] = set()  # instances that ran a call of > TRIM_ABOVE_ROWS rows
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry(ARENA_SHRINK_KEY, ARENA_SHRINK_CPU)

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        """Create the forecast session and check it against the manifest."""
        path = self.folder / MODEL_FILE
        session = create_session(path, self.options)
        _check_io(session, self.manifest, (FORECAST_OUTPUT,), path)
        self._session = session
        self._provider = session.get_providers()[0]  # asked once: every answer names it
        threads = self.options.intra_op_threads or default_intra_op_threads()
        if self._provider == CPU and threads > 1 and self.options.single_thread_max_rows > 0:
            self._single = create_session(path, replace(self.options, device="cpu", intra_op_threads=1))

    def warmup(self) -> None:
        """One run on a zeros batch, so the first request does not pay for lazy initialisation.

        Also checks the output shape against the manifest, which the graph's metadata may not state.
        """
        m = self.manifest
        out = self._require().run([FORECAST_OUTPUT], self._zeros_feed())[0]
        if self._single is not None:
            self._single.run([FORECAST_OUTPUT], self._zeros_feed())
        if out.shape != (1, m.horizon, m.n_channels):
            raise SessionLoadError(
                f"{self.folder / MODEL_FILE}: forecast shape {list(out.shape)} for one window, the manifest "
                f"says [1, {m.horizon}, {m.n_channels}]"
            )

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @property
    def provider(self) -> str:
        """The execution provider actually running the forecast graph."""
        self._require()
        assert self._provider is not None
        return self._provider

    @property
    def single_thread_rows(self) -> int:
        """Calls of at most this many rows run on the single-threaded instance (0: there is none)."""
        return self.options.single_thread_max_rows if self._single is not None else 0

    @property
    def inspect_provider(self) -> str | None:
        return self._inspect_session.get_providers()[0] if self._inspect_session is not None else None

    # -- inference -----------------------------------------------------------------------------
    def feed(self, windows: np.ndarray, phases: np.ndarray | None = None) -> Feed:
        """The graph inputs: `window` [batch, L, C], plus `phase` [batch] exactly when the model has a cycle
        (ONNX Runtime refuses an input the graph does not declare, and needs every one it does)."""
        feed = {FORECAST_INPUT: np.ascontiguousarray(windows, dtype=np.float32)}
        cycle = self.manifest.cycle
        if cycle is None:
            if phases is not None:
                raise ValueError(f"{self.folder}: the model has no cycle, so it takes no phase")
            return feed
        if phases is None:
            raise ValueError(f"{self.folder}: the model has a cycle (period {cycle.period}); it needs phases")
        phase = np.ascontiguousarray(phases, dtype=np.int64)
        if phase.shape != windows.shape[:1]:
            raise ValueError(f"{self.folder}: {phase.shape} phases for {windows.shape[0]} windows")
        feed[PHASE_INPUT] = phase
        return feed

    def run_forecast(self, feed: Feed, alone: bool = False) -> np.ndarray:
        """The forecast session on a ready feed (what the batcher calls): [batch, H, C].

        `alone`: a call with the machine to itself (the batcher's inline calls: idle, nothing else in
        flight or waiting) runs on the configured instance with all its threads whatever its size, as
        its latency is all anyone waits for: one row in 0.52 ms against 0.64-0.80 ms on one thread here.
        Under load the single-threaded instance leaves the other cores to other calls and the loop."""
        rows = len(feed[FORECAST_INPUT])
        session = self._require()
        if not alone and self._single is not None and rows <= self.options.single_thread_max_rows:
            session = self._single
        (out,) = session.run([FORECAST_OUTPUT], feed)
        if rows > TRIM_ABOVE_ROWS:
            self._grown.add(session)
        return out

    def release_memory(self) -> bool:
        """Give back what big calls grew: one zeros window run with arena shrinking (the arena's free
        regions freed at its end), then glibc's free heap pages. Does nothing (False) when no call of
        more than TRIM_ABOVE_ROWS rows ran since the last release. Called when the version is idle:
        shrinking after every call would make each big call grow the arena afresh (2.7x slower)."""
        if not self._grown:
            return False
        for session in self._grown:
            session.run([FORECAST_OUTPUT], self._zeros_feed(), self._shrink)
        self._grown.clear()
        release_free_heap()
        return True

    def forecast(self, windows: np.ndarray, phases: np.ndarray | None = None) -> np.ndarray:
        """[batch, L, C] raw windows (and their [batch] phases, for a cycle model) -> [batch, H, C]."""
        return self.run_forecast(self.feed(windows, phases))

    def inspect(self, windows: np.ndarray, phases: np.ndarray | None = None) -> InspectResult:
        """Forecast plus per-layer, per-head attention matrices from inspect.onnx."""
        session = self._inspect()
        feed = self.feed(windows, phases)
        forecast, softmax, rem, mixed = session.run(
            [FORECAST_OUTPUT, ATTN_SOFTMAX, ATTN_REM, ATTN_MIXED], feed
        )
        return InspectResult(forecast=forecast, softmax=softmax, rem=rem, mixed=mixed)

    def _zeros_feed(self) -> Feed:
        """One all-zeros window (phase 0 when the model has a cycle), for warm-ups."""
        m = self.manifest
        phases = None if m.cycle is None else np.zeros(1, np.int64)
        return self.feed(np.zeros((1, m.input_length, m.n_channels), np.float32), phases)

    def _require(self) -> ort.InferenceSession:
        if self._session is None:
            raise RuntimeError(f"{self.folder}: session not loaded; call load() first")
        return self._session

    def _inspect(self) -> ort.InferenceSession:
        with self._inspect_lock:
            if self._inspect_session is None:
                path = self.folder / INSPECT_FILE
                session = create_session(path, self.options)
                _check_io(session, self.manifest, (FORECAST_OUTPUT, ATTN_SOFTMAX, ATTN_REM, ATTN_MIXED), path)
                session.run([ATTN_MIXED], self._zeros_feed())  # warm-up
                self._inspect_session = session
            return self._inspect_session
