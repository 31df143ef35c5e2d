"""A runner per provider: how one version's forecast graph is called, and how its calls may be scheduled.

Every runner takes a feed (named arrays, one row per series) and returns the forecast [n, H, C]; the
batcher (app/engine/batching.py) reads its `policy` to know how many calls may run side by side and
whether a small call may run on the event loop.

- `CpuRunner`: the CPU provider as the service has always run it: the configured instance (every intra-op
  thread) for big calls and calls with the machine to themselves, a single-threaded second instance for
  small calls side by side, and the CPU arena shrunk (plus glibc's free heap trimmed) once the version
  is idle after big calls.
- `BoundRunner`: inputs and outputs bound to buffers made once per batch bucket (IOBinding): rows are
  padded with zeros to the next bucket (1, 2, 4, ... the rows per call, or configured), so each call
  reuses its bucket's buffers and the answer is the first n rows, never a padded one. On CUDA the
  buffers are device memory, fed from and read back into page-locked host staging, and optionally each
  bucket replays a CUDA graph captured at load (one graph per bucket: ONNX Runtime's `gpu_graph_id`),
  which removes the kernel launches that are most of a small call's GPU time. On the CPU the buffers are
  the host arrays themselves (what the tests run).
- `PlainRunner`: one session, `session.run` from numpy: CUDA without IOBinding (RSA_CUDA_IO_BINDING=false).

Device faults, whatever the runner (`Runner.run`): a call that runs out of device memory is retried once
in two halves; if a half fails again, or the provider fails otherwise (a CUDA or cuBLAS error, a lost
device), the callers get `DeviceOutOfMemory` / `DeviceError` (503, retryable), and the service keeps
serving. Any other exception is a bug or a broken graph and goes up as it is (500).
"""

from __future__ import annotations

import ctypes
import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from app.artifacts.contract import FORECAST_INPUT, FORECAST_OUTPUT
from app.artifacts.manifest import Manifest, input_names
from app.core.errors import DeviceError, DeviceOutOfMemory
from app.engine.batching import Feed, feed_rows
from app.engine.providers import CPU, CUDA, RuntimeOptions
from app.engine.session import (
    SessionLoadError,
    check_io,
    create_session,
    default_intra_op_threads,
    release_free_heap,
)

logger = logging.getLogger(__name__)

# Memory is released (CpuRunner.release_memory) only if a call of more rows than this ran since the last
# release: a few-row call grows nothing worth the ~1 ms a release costs.
TRIM_ABOVE_ROWS = 8
# ONNX Runtime's run option that frees the arena's unused regions at the end of that run
# (onnxruntime_run_options_config_keys.h); "device:id" pairs.
ARENA_SHRINK_KEY = "memory.enable_memory_arena_shrinkage"
ARENA_SHRINK_CPU = "cpu:0"
# The run option naming the CUDA graph a run captures or replays (kOrtRunOptionsConfigCudaGraphAnnotation).
GRAPH_ID_KEY = "gpu_graph_id"
# Runs per bucket at load: ONNX Runtime captures a bucket's CUDA graph after a regular run, then replays.
WARMUP_RUNS = 3

# The exception types ONNX Runtime's Python binding raises from a run.
ORT_ERRORS: tuple[type[Exception], ...] = (
    ort_errors.Fail,
    ort_errors.RuntimeException,
    ort_errors.EPFail,
    ort_errors.EngineError,
    ort_errors.DeviceReset,
)
# What ONNX Runtime, CUDA, cuBLAS and cuDNN say when an allocation fails, on the GPU or the host.
_OUT_OF_MEMORY = re.compile(
    r"out of memory|failed to allocate memory|bad_alloc|cudaErrorMemoryAllocation|_ALLOC_FAILED",
    re.IGNORECASE,
)
# A provider fault that is not the graph's: the device, its driver or its libraries.
_DEVICE = re.compile(r"CUDA|CUBLAS|CUDNN|cuBLAS|cuDNN|device", re.IGNORECASE)

Fault = Literal["out_of_memory", "device"]


def classify_fault(exc: BaseException) -> Fault | None:
    """What an exception from a session call says of the device: out of memory, another device fault,
    or None (a graph or input error, or not ONNX Runtime's at all)."""
    if not isinstance(exc, ORT_ERRORS):
        return None
    text = str(exc)
    if _OUT_OF_MEMORY.search(text):
        return "out_of_memory"
    if isinstance(exc, ort_errors.EPFail | ort_errors.DeviceReset) or _DEVICE.search(text):
        return "device"
    return None


@dataclass(frozen=True)
class CallPolicy:
    """How the batcher may schedule a version's calls on this runner."""

    max_calls: int = 1  # session calls side by side
    concurrent_max_rows: int = 0  # only calls of at most this many rows run side by side
    inline: bool = True  # a small call may run on the event loop when nothing else waits (batching.py)


class Runner(ABC):
    """Calls one version's forecast graph. `run` maps device faults to domain errors (module doc)."""

    provider: str
    policy: CallPolicy = CallPolicy()
    on_retry: Callable[[Fault], None] | None = None  # a call retried in halves (the metrics' hook)

    def run(self, feed: Feed, alone: bool = False) -> np.ndarray:
        """The forecast [n, H, C] for a feed of n rows. `alone`: the call has the machine to itself."""
        try:
            return self._call(feed, alone)
        except Exception as exc:
            fault = classify_fault(exc)
            if fault is None:
                raise
            rows = feed_rows(feed)
            if fault != "out_of_memory" or rows < 2:
                raise self._device_error(fault, rows, exc) from exc
        # Out of memory on more than one row: once more in two halves, each a call of its own.
        half = (rows + 1) // 2
        logger.warning("%s ran out of memory on a call of %d rows; retrying in halves", self.provider, rows)
        if self.on_retry is not None:
            self.on_retry("out_of_memory")
        parts = []
        for start, stop in ((0, half), (half, rows)):
            try:
                parts.append(self._call({k: v[start:stop] for k, v in feed.items()}, alone))
            except Exception as again:
                fault = classify_fault(again)
                if fault is None:
                    raise
                raise self._device_error(fault, stop - start, again) from again
        return np.concatenate(parts)

    def _device_error(self, fault: Fault, rows: int, exc: BaseException) -> DeviceError:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if fault == "out_of_memory":
            return DeviceOutOfMemory(
                f"the {self.provider} ran out of memory on a call of {rows} series (retried in halves "
                f"where it had more than one); send fewer series per request or retry later ({first_line})",
                retry_after_s=1,
            )
        return DeviceError(f"the {self.provider} failed: {first_line}; retry later", retry_after_s=1)

    @abstractmethod
    def _call(self, feed: Feed, alone: bool) -> np.ndarray:
        """One session call, device faults raised as ONNX Runtime raises them."""

    def warmup(self, feed: Feed) -> np.ndarray:
        """Calls at load so that the first request pays for no lazy initialisation; the one-row answer."""
        return self._call(feed, False)

    def release_memory(self) -> bool:
        """Give back what big calls grew, when the version is idle; False when there was nothing to do."""
        return False

    def close(self) -> None:  # noqa: B027  (most runners hold nothing but their sessions)
        """Free what the runner holds beyond its sessions (called when its version is unloaded)."""


class PlainRunner(Runner):
    """One session, called from numpy with `session.run`."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self.session = session
        self.provider = session.get_providers()[0]

    def _call(self, feed: Feed, alone: bool) -> np.ndarray:
        return self.session.run([FORECAST_OUTPUT], feed)[0]


class CpuRunner(PlainRunner):
    """The CPU provider: the configured instance (RSA_INTRA_OP_THREADS, all the CPUs by default) for big
    calls, and, as Triton's instance groups, a single-threaded instance for calls of at most
    `single_thread_max_rows` rows, up to `single_thread_calls` of them side by side. Intra-op threads halve
    a 256-row call's latency, but on small calls they cost more CPU than they save (batch 1: 0.61 ms wall
    for 1.22 ms of CPU with 2 spinning threads, against 0.68 ms of both with one), and under load CPU is
    what a small request path runs out of. The weights are under a megabyte; the instances share nothing
    else."""

    def __init__(self, session: ort.InferenceSession, path: Path, options: RuntimeOptions) -> None:
        super().__init__(session)
        threads = options.intra_op_threads or default_intra_op_threads()
        self._single: ort.InferenceSession | None = None
        self.single_max_rows = 0
        calls = 1
        if threads > 1 and options.single_thread_max_rows > 0:
            self._single = create_session(path, replace(options, device="cpu", intra_op_threads=1))
            self.single_max_rows = options.single_thread_max_rows
            calls = options.single_thread_calls or default_intra_op_threads()
        self.policy = CallPolicy(max_calls=calls, concurrent_max_rows=self.single_max_rows)
        self._grown: set[ort.InferenceSession] = set()  # instances that ran a call of > TRIM_ABOVE_ROWS rows
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry(ARENA_SHRINK_KEY, ARENA_SHRINK_CPU)

    def _call(self, feed: Feed, alone: bool) -> np.ndarray:
        """`alone`: a call with the machine to itself (the batcher's inline calls: idle, nothing else in
        flight or waiting) runs on the configured instance with all its threads whatever its size, as its
        latency is all anyone waits for: one row in 0.52 ms against 0.64-0.80 ms on one thread here. Under
        load the single-threaded instance leaves the other cores to other calls and the loop."""
        rows = len(feed[FORECAST_INPUT])
        session = self.session
        if not alone and self._single is not None and rows <= self.single_max_rows:
            session = self._single
        (out,) = session.run([FORECAST_OUTPUT], feed)
        if rows > TRIM_ABOVE_ROWS:
            self._grown.add(session)
        return out

    def warmup(self, feed: Feed) -> np.ndarray:
        if self._single is not None:
            self._single.run([FORECAST_OUTPUT], feed)
        return self.session.run([FORECAST_OUTPUT], feed)[0]

    def release_memory(self) -> bool:
        """One zeros window run with arena shrinking (the arena's free regions freed at its end), then
        glibc's free heap pages; only when a call of more than TRIM_ABOVE_ROWS rows ran since the last
        release. Called when the version is idle: shrinking after every call would make each big call
        grow the arena afresh (2.7x slower)."""
        if not self._grown:
            return False
        zeros = self._zeros
        for session in self._grown:
            session.run([FORECAST_OUTPUT], zeros, self._shrink)
        self._grown.clear()
        release_free_heap()
        return True

    @property
    def _zeros(self) -> dict[str, np.ndarray]:
        return {i.name: np.zeros([1, *i.shape[1:]], _DTYPES[i.type]) for i in self.session.get_inputs()}


_DTYPES: dict[str, type[np.generic]] = {"tensor(float)": np.float32, "tensor(int64)": np.int64}


def default_buckets(max_rows: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to `max_rows` (itself the last bucket when not a power of two)."""
    buckets = [1]
    while buckets[-1] < max_rows:
        buckets.append(min(buckets[-1] * 2, max_rows))
    return tuple(buckets)


class _HostPinning:
    """Page-locks numpy buffers with the CUDA runtime (cudaHostRegister), so that copies between them and
    the device are DMA transfers rather than staged through a driver buffer. Where the runtime library
    cannot be found, buffers stay pageable (slower copies, same answers)."""

    def __init__(self) -> None:
        self._cudart: ctypes.CDLL | None = None
        for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
            try:  # already loaded by onnxruntime (preload_dlls or the system path): dlopen finds it
                self._cudart = ctypes.CDLL(name)
                break
            except OSError:
                continue
        self.pinned: list[np.ndarray] = []

    def pin(self, array: np.ndarray) -> None:
        if self._cudart is None:
            return
        ptr, size = ctypes.c_void_p(array.ctypes.data), ctypes.c_size_t(array.nbytes)
        if self._cudart.cudaHostRegister(ptr, size, 0) == 0:
            self.pinned.append(array)

    def release(self) -> None:
        if self._cudart is not None:
            for array in self.pinned:
                self._cudart.cudaHostUnregister(ctypes.c_void_p(array.ctypes.data))
        self.pinned.clear()


@dataclass(eq=False)
class _Slot:
    """One bucket's buffers and binding: `host` (staging, or the bound buffers themselves on the CPU),
    `device` (bound inputs and output), `used` the rows of the last call (what padding must re-zero)."""

    rows: int
    host: dict[str, np.ndarray]
    host_out: np.ndarray
    device: dict[str, ort.OrtValue]
    device_out: ort.OrtValue
    host_out_value: ort.OrtValue
    binding: ort.IOBinding
    run_options: ort.RunOptions
    used: int = 0


class BoundRunner(Runner):
    """IOBinding with buffers per batch bucket (module doc). One call at a time: the slots are reused, and
    on a GPU one call at a time already keeps it as busy as a call can."""

    def __init__(
        self,
        session: ort.InferenceSession,
        manifest: Manifest,
        buckets: Iterable[int],
        *,
        device: Literal["cpu", "cuda"],
        device_id: int = 0,
        graphs: bool = False,
    ) -> None:
        if graphs and device != "cuda":
            raise ValueError("CUDA graphs need the CUDA device")
        self.session = session
        self.provider = session.get_providers()[0]
        self.device, self.device_id, self.graphs = device, device_id, graphs
        self.buckets = tuple(sorted(set(buckets)))
        if not self.buckets or self.buckets[0] < 1:
            raise ValueError(f"batch buckets must be positive row counts, got {list(buckets)}")
        self.policy = CallPolicy(max_calls=1, concurrent_max_rows=0)
        self._lock = threading.Lock()
        self._pinning = _HostPinning() if device == "cuda" else None
        self._copy_out_in_place = True  # D2H into the pinned staging; falls back to a fresh array
        shapes = {i.name: (i.shape[1:], _DTYPES[i.type]) for i in session.get_inputs()}
        if list(shapes) != list(input_names(manifest.cycle)):
            raise SessionLoadError(f"inputs {list(shapes)} are not {list(input_names(manifest.cycle))}")
        out_shape = (manifest.horizon, manifest.n_channels)
        self._slots = [self._slot(index, rows, shapes, out_shape) for index, rows in enumerate(self.buckets)]

    def _value(self, array: np.ndarray) -> ort.OrtValue:
        """A buffer for the binding: the array itself on the CPU, device memory of its shape on CUDA."""
        if self.device == "cpu":
            return ort.OrtValue.ortvalue_from_numpy(array)
        return ort.OrtValue.ortvalue_from_shape_and_type(array.shape, array.dtype, "cuda", self.device_id)

    def _slot(
        self,
        index: int,
        rows: int,
        shapes: dict[str, tuple[list[int], type[np.generic]]],
        out_shape: tuple[int, int],
    ) -> _Slot:
        host = {name: np.zeros([rows, *dims], dtype) for name, (dims, dtype) in shapes.items()}
        host_out = np.zeros((rows, *out_shape), np.float32)
        if self._pinning is not None:
            for array in (*host.values(), host_out):
                self._pinning.pin(array)
        device = {name: self._value(array) for name, array in host.items()}
        device_out = self._value(host_out)
        binding = self.session.io_binding()
        for name, value in device.items():
            binding.bind_ortvalue_input(name, value)
        binding.bind_ortvalue_output(FORECAST_OUTPUT, device_out)
        run_options = ort.RunOptions()
        if self.graphs:
            run_options.add_run_config_entry(GRAPH_ID_KEY, str(index))
        return _Slot(
            rows=rows,
            host=host,
            host_out=host_out,
            device=device,
            device_out=device_out,
            host_out_value=ort.OrtValue.ortvalue_from_numpy(host_out),
            binding=binding,
            run_options=run_options,
        )

    def bucket_for(self, rows: int) -> int:
        """The smallest bucket that holds `rows` (the largest, for a call split over several)."""
        return next((b for b in self.buckets if b >= rows), self.buckets[-1])

    def _call(self, feed: Feed, alone: bool) -> np.ndarray:
        rows = feed_rows(feed)
        largest = self.buckets[-1]
        if rows > largest:  # more rows than any bucket: in calls of the largest (the batcher avoids it)
            return np.concatenate(
                [
                    self._call({k: v[i : i + largest] for k, v in feed.items()}, alone)
                    for i in range(0, rows, largest)
                ]
            )
        slot = self._slots[self.buckets.index(self.bucket_for(rows))]
        with self._lock:
            for name, array in slot.host.items():
                array[:rows] = feed[name]
                if slot.used > rows:  # padding rows are zeros: a window of zeros, phase 0
                    array[rows : slot.used] = 0
            slot.used = rows
            if self.device == "cuda":
                for name, value in slot.device.items():
                    value.update_inplace(slot.host[name])
            self.session.run_with_iobinding(slot.binding, slot.run_options)
            return self._read(slot)[:rows].copy()

    def _read(self, slot: _Slot) -> np.ndarray:
        """The bucket's output on the host: the bound array itself on the CPU; on CUDA copied into the
        pinned staging (or, where ONNX Runtime cannot copy into a host value, read out fresh)."""
        if self.device == "cpu":
            return slot.host_out
        if self._copy_out_in_place:
            try:
                slot.host_out_value.update_inplace(slot.device_out)
                return slot.host_out
            except Exception as exc:  # an onnxruntime without device-to-host update_inplace
                logger.info("reading outputs through OrtValue.numpy(): %s", exc)
                self._copy_out_in_place = False
        return slot.device_out.numpy()

    def warmup(self, feed: Feed) -> np.ndarray:
        """Every bucket WARMUP_RUNS times (with graphs: each captured, then replayed), then the one-row
        answer of `feed`."""
        for slot in self._slots:
            padded = {name: np.repeat(array, slot.rows, axis=0) for name, array in feed.items()}
            for _ in range(WARMUP_RUNS):
                self._call(padded, False)
        return self._call(feed, False)

    def close(self) -> None:
        if self._pinning is not None:
            self._pinning.release()
        self._slots.clear()


def create_runner(path: Path, manifest: Manifest, options: RuntimeOptions, max_rows: int) -> Runner:
    """The runner for a version's forecast graph on the provider that really runs it: CUDA with IOBinding
    (and graphs, when asked for and the graph allows them), CUDA plain, or the CPU runner."""
    graphs = options.cuda_graphs and options.cuda_io_binding
    try:
        session = create_session(path, options, graphs=graphs)
    except SessionLoadError as exc:
        if not graphs:
            raise
        logger.warning("%s: CUDA graphs unavailable (%s); running without them", path, exc)
        graphs = False
        session = create_session(path, options)
    check_io(session, manifest, (FORECAST_OUTPUT,), path)
    provider = session.get_providers()[0]
    if provider == CUDA and options.cuda_io_binding:
        buckets = options.batch_buckets or default_buckets(max_rows)
        return BoundRunner(
            session, manifest, buckets, device="cuda", device_id=options.cuda_device_id, graphs=graphs
        )
    if provider == CUDA:
        return PlainRunner(session)
    if provider != CPU:
        logger.warning("%s: unexpected provider %s, run as a plain session", path, provider)
        return PlainRunner(session)
    return CpuRunner(session, path, options)
