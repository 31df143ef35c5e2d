"""ONNX Runtime sessions: how one is made and checked against its manifest. No web framework here.

What runs a version's forecast calls is its runner (`app/engine/runners.py`); the version's sessions
as a whole are `app/engine/model.py`'s `OnnxModel`.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort

from app.artifacts.contract import FORECAST_INPUT, PHASE_INPUT
from app.artifacts.manifest import Manifest, graph_inputs
from app.engine.gate import cuda_call
from app.engine.providers import CUDA, RuntimeOptions, choose_providers

logger = logging.getLogger(__name__)


class SessionLoadError(RuntimeError):
    """The ONNX file could not be loaded or does not match its manifest."""


def default_intra_op_threads() -> int:
    """The CPUs in this process's affinity mask (what a container's cpuset grants), not the host's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


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


# Lets intra-op threads spin while they wait for work (onnxruntime_session_options_config_keys.h).
ALLOW_SPINNING_KEY = "session.intra_op.allow_spinning"


def session_options(options: RuntimeOptions, *, cuda: bool = False) -> ort.SessionOptions:
    """`cuda`: the session asks for the CUDA provider. Its graph's kernels run on the GPU and only shape
    nodes (if any) on the CPU, so it gets one intra-op thread (unless RSA_INTRA_OP_THREADS says otherwise)
    and no spinning: a spinning pool per CPU per session would take the CPU the front ends need (the
    2026-11-24 measurements: on a GPU the front end is the limit). Not measured against the default yet
    (docs/gpu.md)."""
    so = ort.SessionOptions()
    # The CPU memory arena stays on: without it every call maps and faults in its tensors afresh, 2.7x
    # slower at 256 rows (bench/memory.py). An arena keeps every region it grows for the life of the
    # session (a few 256-row batches: ~90 MiB -> 2.2 GiB, for good), so the CPU runner shrinks it once
    # the version has been idle a moment (the batcher's release hook).
    so.enable_cpu_mem_arena = True
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = options.intra_op_threads or (1 if cuda else default_intra_op_threads())
    so.inter_op_num_threads = 1
    if cuda:
        so.add_session_config_entry(ALLOW_SPINNING_KEY, "0")
    return so


def create_session(path: Path, options: RuntimeOptions, *, graphs: bool = False) -> ort.InferenceSession:
    """A session on the best allowed provider; logs the provider really in use. `graphs`: CUDA graphs
    (ONNX Runtime refuses them at creation when a node of the graph would not run on CUDA)."""
    providers = choose_providers(options, graphs=graphs)
    requested = [p if isinstance(p, str) else p[0] for p in providers]
    so = session_options(options, cuda=CUDA in requested)
    try:
        with cuda_call(requested[0]):  # copies the weights to the device: never during a capture
            session = ort.InferenceSession(str(path), sess_options=so, providers=providers)
    except Exception as exc:  # ORT raises its own exception types (Fail, InvalidGraph, ...)
        raise SessionLoadError(f"onnxruntime cannot load {path}: {exc}") from exc
    in_use = session.get_providers()
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


def check_io(session: ort.InferenceSession, manifest: Manifest, outputs: tuple[str, ...], path: Path) -> None:
    """The session's inputs and outputs are the ones the artifacts contract and the manifest promise."""
    inputs = session.get_inputs()
    names = [i.name for i in inputs]
    want_names = list(graph_inputs(manifest))
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
    have = {o.name for o in session.get_outputs()}
    missing = [name for name in outputs if name not in have]
    if missing:
        raise SessionLoadError(f"{path}: missing outputs {missing}; it has {sorted(have)}")
