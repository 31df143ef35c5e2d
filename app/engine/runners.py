"""A runner per provider: how one version's forecast graph is called, and how its calls may be scheduled.

Every runner takes a feed (named arrays, one row per series) and returns the forecast [n, H, C]; the
batcher (app/engine/batching/) reads its `policy` to know how many calls may run side by side and
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

Device faults, whatever the runner (`Runner.run`): classified in app/engine/faults.py (`classify_fault`,
the one place that decides); a call out of device memory is retried once in two halves, and the callers
get `DeviceOutOfMemory` / `DeviceError` (503, retryable) where that fails or the device fails otherwise.
The bound runner's own CUDA runtime calls and page-locked staging are in app/engine/cuda.py.

CUDA work of the whole process passes `app.engine.gate.CUDA_GATE`, which a CUDA graph capture holds alone.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import onnxruntime as ort

from app.artifacts.contract import FORECAST_INPUT, FORECAST_OUTPUT
from app.artifacts.manifest import Manifest, graph_inputs
from app.core.errors import DeviceError, DeviceOutOfMemory
from app.engine.cuda import D2H, H2D, Cudart, CudaRuntime, PinnedBlock
from app.engine.faults import BindingError, Fault, binding_errors, classify_fault
from app.engine.gate import CUDA_GATE, cuda_call
from app.engine.providers import CPU, CUDA, RuntimeOptions
from app.engine.session import (
    SessionLoadError,
    check_io,
    create_session,
    default_intra_op_threads,
    release_free_heap,
)
from app.engine.types import Feed, feed_rows

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
# The run option's value for a run that neither captures nor replays (kCudaGraphAnnotationSkip); ids >= 1
# are the buckets' graphs, 0 being reserved for ONNX Runtime's own use.
GRAPH_ID_SKIP = "-1"
# The CUDA provider captures a graph id once this many regular runs have been made
# (min_num_runs_before_cuda_graph_capture_, cuda_execution_provider.h), ...
MIN_RUNS_BEFORE_CAPTURE = 2
# ... so each graph id runs this many times at load: the regular runs, the capture, one replay.
GRAPH_RUNS_PER_ID = MIN_RUNS_BEFORE_CAPTURE + 2

T = TypeVar("T")


@dataclass(frozen=True)
class CallPolicy:
    """How the batcher may schedule a version's calls on this runner."""

    max_calls: int = 1  # session calls side by side
    concurrent_max_rows: int = 0  # only calls of at most this many rows run side by side
    inline: bool = True  # a small call may run on the event loop when nothing else waits (batching/inline.py)


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
        # CUDA calls never run inline on the event loop: a GPU round trip would block it.
        self.policy = CallPolicy(inline=self.provider != CUDA)

    def _call(self, feed: Feed, alone: bool) -> np.ndarray:
        with cuda_call(self.provider):
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


@dataclass(eq=False)
class _Slot:
    """One bucket's buffers and binding: `host` (staging, or the bound buffers themselves on the CPU),
    `device` (bound inputs and output), `used` the rows of the last call (the rows past it are zeros)."""

    rows: int
    host: dict[str, np.ndarray]
    host_out: np.ndarray
    device: dict[str, ort.OrtValue]
    device_out: ort.OrtValue
    binding: ort.IOBinding
    run_options: ort.RunOptions
    used: int = 0


class BoundRunner(Runner):
    """IOBinding with buffers per batch bucket (module doc). One call at a time: the slots are reused, and
    on a GPU one call at a time already keeps it as busy as a call can.

    On CUDA: host staging is one pinned block (`PinnedBlock`); a call copies only its rows host to
    device (`cudaMemcpy` into the bound buffer), zeroes the device rows a bigger call left behind once,
    and reads back only its rows into the pinned output staging. Where libcudart cannot be found the
    copies go through ONNX Runtime (`update_inplace`, whole buckets).

    With CUDA graphs (or `own_thread`), the runner owns one thread that makes every one of its session
    calls, warm-up and captures included: ONNX Runtime keeps CUDA graphs per thread, so graphs captured
    on one thread are never replayed by another, which would capture its own during live requests.
    Captures hold `CUDA_GATE` alone. A capture that fails falls back to this runner without graphs
    (`rebuild` makes the session again without them), with one warning; the version serves."""

    def __init__(
        self,
        session: ort.InferenceSession,
        manifest: Manifest,
        buckets: Iterable[int],
        *,
        device: Literal["cpu", "cuda"],
        device_id: int = 0,
        graphs: bool = False,
        own_thread: bool | None = None,
        rebuild: Callable[[], ort.InferenceSession] | None = None,
        cudart: CudaRuntime | None = None,
    ) -> None:
        if graphs and device != "cuda":
            raise ValueError("CUDA graphs need the CUDA device")
        self.session = session
        self.provider = session.get_providers()[0]
        self.device, self.device_id, self.graphs = device, device_id, graphs
        self.buckets = tuple(sorted(set(buckets)))
        if not self.buckets or self.buckets[0] < 1:
            raise ValueError(f"batch buckets must be positive row counts, got {list(buckets)}")
        self._lock = threading.Lock()
        self._rebuild = rebuild
        self._cudart = (cudart or Cudart.load()) if device == "cuda" else None
        self._copy_out_in_place = True  # without libcudart: D2H via update_inplace, else .numpy()
        self._shapes = {i.name: (tuple(i.shape[1:]), _DTYPES[i.type]) for i in session.get_inputs()}
        want = list(graph_inputs(manifest))
        if list(self._shapes) != want:
            raise SessionLoadError(f"inputs {list(self._shapes)} are not {want}")
        self._out_shape = (manifest.horizon, manifest.n_channels)
        self._block: PinnedBlock | None = None
        self._slots: list[_Slot] = []
        self._closed = False
        self._owner: ThreadPoolExecutor | None = None
        self.owner_thread: int | None = None  # the thread ident that makes every call, where one does
        if graphs if own_thread is None else own_thread:
            self._owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rsa-cuda-graphs")
            self.owner_thread = self._owner.submit(threading.get_ident).result()
        # CUDA calls never run inline on the event loop: a GPU round trip blocks it, and a graph runner's
        # calls belong to its own thread.
        self.policy = CallPolicy(
            max_calls=1, concurrent_max_rows=0, inline=device == "cpu" and not self._owner
        )
        self._build_slots()

    # -- buffers ----------------------------------------------------------------------------------
    def _build_slots(self) -> None:
        """Every bucket's staging (one block), device buffers, binding and run options."""
        layouts: list[tuple[tuple[int, ...], np.dtype]] = []
        for rows in self.buckets:
            layouts += [((rows, *dims), np.dtype(dtype)) for dims, dtype in self._shapes.values()]
            layouts.append(((rows, *self._out_shape), np.dtype(np.float32)))
        if self.device == "cuda":
            self._block = PinnedBlock(layouts, self._cudart)
            views = iter(self._block.views)
        else:  # the CPU binds the host arrays themselves
            views = iter([np.zeros(shape, dtype) for shape, dtype in layouts])
        self._slots = []
        for index, rows in enumerate(self.buckets):
            host = {name: next(views) for name in self._shapes}
            host_out = next(views)
            device = {name: self._value(array) for name, array in host.items()}
            device_out = self._value(host_out)
            binding = self.session.io_binding()
            for name, value in device.items():
                binding.bind_ortvalue_input(name, value)
            binding.bind_ortvalue_output(FORECAST_OUTPUT, device_out)
            run_options = ort.RunOptions()
            if self.graphs:  # id 0 is ONNX Runtime's (onnxruntime_run_options_config_keys.h)
                run_options.add_run_config_entry(GRAPH_ID_KEY, str(index + 1))
            self._slots.append(_Slot(rows, host, host_out, device, device_out, binding, run_options))

    def _value(self, array: np.ndarray) -> ort.OrtValue:
        """A buffer for the binding: the array itself on the CPU, zeroed device memory of its shape on
        CUDA (zeroed: its rows past a call's are padding)."""
        if self.device == "cpu":
            return ort.OrtValue.ortvalue_from_numpy(array)
        with binding_errors():
            value = ort.OrtValue.ortvalue_from_shape_and_type(
                array.shape, array.dtype, "cuda", self.device_id
            )
            if self._cudart is not None:
                self._check(self._cudart.memset(value.data_ptr(), 0, array.nbytes), "cudaMemset")
            else:
                value.update_inplace(array)
        return value

    def _check(self, code: int, what: str) -> None:
        """A CUDA runtime call's status: a failure is raised as the binding's calls raise theirs."""
        if code != 0:
            assert self._cudart is not None
            self._cudart.get_last_error()
            raise BindingError(f"CUDA error {self._cudart.error_name(code)}: {what} failed ({code})")

    def bucket_for(self, rows: int) -> int:
        """The smallest bucket that holds `rows` (the largest, for a call split over several)."""
        return next((b for b in self.buckets if b >= rows), self.buckets[-1])

    # -- calls ------------------------------------------------------------------------------------
    def _on_owner(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the runner's own thread where it has one (waiting for it), else here."""
        owner = self._owner
        if owner is None or threading.get_ident() == self.owner_thread:
            return fn(*args)
        return owner.submit(fn, *args).result()

    def _call(self, feed: Feed, alone: bool) -> np.ndarray:
        return self._on_owner(self._call_here, feed)

    def _call_here(self, feed: Feed) -> np.ndarray:
        rows = feed_rows(feed)
        largest = self.buckets[-1]
        if rows > largest:  # more rows than any bucket: in calls of the largest (the batcher avoids it)
            return np.concatenate(
                [
                    self._call_here({k: v[i : i + largest] for k, v in feed.items()})
                    for i in range(0, rows, largest)
                ]
            )
        with cuda_call(self.provider), self._lock:
            if self._closed:
                raise RuntimeError("the runner is closed (its version was unloaded)")
            slot = self._slots[self.buckets.index(self.bucket_for(rows))]
            return self._run_slot(slot, feed, rows, slot.run_options)

    def _run_slot(self, slot: _Slot, feed: Feed, rows: int, run_options: ort.RunOptions) -> np.ndarray:
        """One call on a slot (its lock held): stage, copy in, run, read back the first `rows` rows."""
        cudart = self._cudart
        with binding_errors():
            for name, array in slot.host.items():
                array[:rows] = feed[name]
                if self.device == "cpu" or cudart is None:
                    if slot.used > rows:  # the host array is what is bound or copied whole
                        array[rows : slot.used] = 0
                    if self.device == "cuda":
                        slot.device[name].update_inplace(array)
                else:  # only the rows used; the rows a bigger call left are zeroed once, on the device
                    row = array[0].nbytes
                    dst = slot.device[name].data_ptr()
                    self._check(cudart.memcpy(dst, array.ctypes.data, rows * row, H2D), "cudaMemcpy H2D")
                    if slot.used > rows:
                        tail = (slot.used - rows) * row
                        self._check(cudart.memset(dst + rows * row, 0, tail), "cudaMemset")
            if cudart is not None:  # cudaMemset may still be queued on the legacy stream
                self._check(cudart.synchronize_legacy_stream(), "cudaStreamSynchronize")
            slot.used = rows
            self.session.run_with_iobinding(slot.binding, run_options)
            return self._read(slot, rows)[:rows].copy()

    def _read(self, slot: _Slot, rows: int) -> np.ndarray:
        """The bucket's output on the host, its first `rows` rows at least: the bound array itself on the
        CPU; on CUDA the rows copied into the pinned staging (or, without libcudart, read through ONNX
        Runtime)."""
        if self.device == "cpu":
            return slot.host_out
        if self._cudart is not None:
            size = rows * slot.host_out[0].nbytes
            src = slot.device_out.data_ptr()
            self._check(self._cudart.memcpy(slot.host_out.ctypes.data, src, size, D2H), "cudaMemcpy D2H")
            return slot.host_out
        if self._copy_out_in_place:
            try:
                ort.OrtValue.ortvalue_from_numpy(slot.host_out).update_inplace(slot.device_out)
                return slot.host_out
            except Exception as exc:  # an onnxruntime without device-to-host update_inplace
                logger.info("reading outputs through OrtValue.numpy(): %s", exc)
                self._copy_out_in_place = False
        return slot.device_out.numpy()

    # -- warm-up ----------------------------------------------------------------------------------
    def warmup(self, feed: Feed) -> np.ndarray:
        """Every bucket run at load (with graphs: each captured, then replayed, `_warm`), then the
        one-row answer of `feed`. A capture that fails: the session made again without graphs and this
        runner warmed up without them, with one warning."""
        if not self.graphs:
            return self._on_owner(self._warm, feed, False)
        try:
            return self._on_owner(self._warm, feed, True)
        except Exception as exc:
            if self._rebuild is None:
                raise
            logger.warning(
                "%s: capturing CUDA graphs failed (%s: %s); this version serves without them",
                self.provider,
                type(exc).__name__,
                str(exc).strip().splitlines()[0] if str(exc).strip() else "",
            )
        self._drop_graphs()
        return self._on_owner(self._warm, feed, False)

    def _warm(self, feed: Feed, capture: bool) -> np.ndarray:
        """Regular runs of every bucket ascending then descending, so the arena holds every shape's memory
        before any capture (an allocation during a capture breaks it). With graphs, then, each bucket's
        graph id GRAPH_RUNS_PER_ID times, the gate held alone: ONNX Runtime captures an id after
        MIN_RUNS_BEFORE_CAPTURE regular runs (a counter per thread shared by every id in the CUDA
        provider that added ids, one per id in newer providers: enough either way), then replays it."""
        padded = [{k: np.repeat(a, slot.rows, axis=0) for k, a in feed.items()} for slot in self._slots]
        order = [*range(len(self._slots)), *reversed(range(len(self._slots)))]
        skip = ort.RunOptions()
        if capture:
            skip.add_run_config_entry(GRAPH_ID_KEY, GRAPH_ID_SKIP)
        with cuda_call(self.provider), self._lock:
            for i in order:
                self._run_slot(self._slots[i], padded[i], self._slots[i].rows, skip)
        if capture:
            with CUDA_GATE.capture(), self._lock:
                for slot, rows_feed in zip(self._slots, padded, strict=True):
                    for _ in range(GRAPH_RUNS_PER_ID):
                        self._run_slot(slot, rows_feed, slot.rows, slot.run_options)
        return self._call_here(feed)

    def _drop_graphs(self) -> None:
        """After a failed capture: a session without graphs, new buffers, calls on the caller's threads."""
        assert self._rebuild is not None
        with self._lock:
            if self._block is not None:
                self._block.release()
            self._slots.clear()
        with cuda_call(self.provider):
            session = self._rebuild()
            with self._lock:
                self.session, self.graphs = session, False
                self._build_slots()
        if self._owner is not None:
            self._owner.shutdown(wait=True)
            self._owner, self.owner_thread = None, None

    def close(self) -> None:
        """Unregister the staging and drop the buffers, after the call in flight (the call lock)."""
        with self._lock:
            self._closed = True
            if self._block is not None:
                self._block.release()
            self._slots.clear()
        if self._owner is not None and threading.get_ident() != self.owner_thread:
            self._owner.shutdown(wait=True)


def create_runner(path: Path, manifest: Manifest, options: RuntimeOptions, max_rows: int) -> Runner:
    """The runner for a version's forecast graph on the provider that really runs it: CUDA with IOBinding
    (and graphs, when asked for and the graph allows them), CUDA plain, or the CPU runner."""
    graphs = options.cuda_graphs
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
    if provider == CUDA and (options.cuda_io_binding or graphs):
        buckets = options.batch_buckets or default_buckets(max_rows)
        with cuda_call(CUDA):  # device buffers: cudaMalloc, never during another runner's capture
            return BoundRunner(
                session,
                manifest,
                buckets,
                device="cuda",
                device_id=options.cuda_device_id,
                graphs=graphs,
                rebuild=partial(create_session, path, options) if graphs else None,
            )
    if provider == CUDA:
        return PlainRunner(session)
    if provider != CPU:
        logger.warning("%s: unexpected provider %s, run as a plain session", path, provider)
        return PlainRunner(session)
    return CpuRunner(session, path, options)
