"""Which ONNX Runtime execution provider a session asks for, and with which options.

CUDA is asked for only where it can run: this onnxruntime build has the CUDA provider and the CUDA driver
shows this process a device. Elsewhere (a CPU host with the onnxruntime-gpu wheel, the usual case in
tests and on laptops) asking anyway makes ONNX Runtime log a red error per session about
`libonnxruntime_providers_cuda.so` or `libcublasLt.so.13` before it falls back; one calm line says why
the service runs on the CPU instead.

The CUDA provider's options are explicit, and its numerics are the exporter's: TF32 is off unless
`RSA_CUDA_TF32` asks for it (`app.artifacts.contract.CUDA_EXACT_OPTIONS`).
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import onnxruntime as ort

from app.artifacts.contract import CUDA_EXACT_OPTIONS

logger = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"

ProviderSpec = str | tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class RuntimeOptions:
    device: str = "auto"  # "auto" | "cpu" | "cuda"
    cuda_device_id: int = 0
    gpu_mem_limit_bytes: int | None = None
    intra_op_threads: int | None = None  # None: the CPUs this process may run on
    # On the CPU provider, calls of at most this many rows run on a second, single-threaded instance of
    # the forecast session (0: none). See app/engine/runners.py.
    single_thread_max_rows: int = 0
    single_thread_calls: int | None = None  # such calls side by side per version; None: one per CPU
    # CUDA: TF32 matmuls (faster on Ampere and newer, ~1e-3 relative error: off unless asked for).
    cuda_tf32: bool = False
    # CUDA: inputs and outputs in device buffers bound per batch bucket (IOBinding), rows padded to the
    # bucket; graphs: one CUDA graph captured per bucket at load (on the bound runner, whatever
    # cuda_io_binding says). Defaults: app/core/config.py.
    cuda_io_binding: bool = False
    cuda_graphs: bool = False
    batch_buckets: tuple[int, ...] = field(default=())  # empty: 1, 2, 4, ... up to the rows per call


@cache
def cuda_device_count() -> int:
    """GPUs the CUDA driver shows this process; 0 without a driver (no libcuda.so.1) or without a device.
    The driver library is what the NVIDIA Container Toolkit mounts into a GPU container."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    try:
        if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
    except AttributeError:  # not a CUDA driver after all
        return 0
    return count.value


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


def cuda_provider_options(options: RuntimeOptions, *, graphs: bool = False) -> dict[str, Any]:
    """The CUDA provider's options, every one explicit. `graphs`: capture CUDA graphs (IOBinding only)."""
    cuda: dict[str, Any] = {
        "device_id": options.cuda_device_id,
        "arena_extend_strategy": "kSameAsRequested",
        "cudnn_conv_algo_search": "HEURISTIC",
        "do_copy_in_default_stream": True,
        # The exported graph is verified with TF32 off (the exporter's bound, 1e-4 of a channel's std);
        # ONNX Runtime turns it on by default on Ampere and newer GPUs.
        **CUDA_EXACT_OPTIONS,
    }
    if options.cuda_tf32:
        cuda["use_tf32"] = "1"
    if options.gpu_mem_limit_bytes is not None:
        cuda["gpu_mem_limit"] = options.gpu_mem_limit_bytes
    if graphs:
        cuda["enable_cuda_graph"] = "1"
    return cuda


_said: set[str] = set()


def _once(level: int, message: str, *args: object) -> None:
    """A line about the host, not the model: said once per process, not once per version."""
    key = message % args
    if key not in _said:
        _said.add(key)
        logger.log(level, message, *args)


def choose_providers(options: RuntimeOptions, *, graphs: bool = False) -> list[ProviderSpec]:
    """CUDA (with explicit options) then CPU when CUDA is allowed, built and visible; else CPU only."""
    if options.device == "cpu":
        return [CPU]
    level = logging.WARNING if options.device == "cuda" else logging.INFO
    if CUDA not in ort.get_available_providers():
        _once(level, "RSA_DEVICE=%s: this onnxruntime build has no %s; using %s", options.device, CUDA, CPU)
        return [CPU]
    if cuda_device_count() <= options.cuda_device_id:
        _once(
            level,
            "RSA_DEVICE=%s: the CUDA driver shows this process %d GPU(s), none with id %d; using %s",
            options.device,
            cuda_device_count(),
            options.cuda_device_id,
            CPU,
        )
        return [CPU]
    preload_cuda_libraries()
    return [(CUDA, cuda_provider_options(options, graphs=graphs)), CPU]
