"""Device faults: what an exception from a session call says of the device, whichever runner
(app/engine/runners.py) and whichever ONNX Runtime call raised it (typed exceptions from `session.run`,
plain `RuntimeError`s from the binding's calls, wrapped as `BindingError`): `classify_fault` is the one
place that decides. A call that runs out of device memory is retried once in two halves; if a half fails
again, or the provider fails otherwise (a CUDA or cuBLAS error, a lost device), the callers get
`DeviceOutOfMemory` / `DeviceError` (503, retryable), and the service keeps serving (`Runner.run`). Any
other exception is a bug or a broken graph and goes up as it is (500).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

# The exception types ONNX Runtime's Python binding raises from `session.run`.
ORT_ERRORS: tuple[type[Exception], ...] = (
    ort_errors.Fail,
    ort_errors.RuntimeException,
    ort_errors.EPFail,
    ort_errors.EngineError,
    ort_errors.DeviceReset,
)
# What ONNX Runtime, CUDA, cuBLAS and cuDNN say when an allocation fails, on the GPU or the host. The
# arena's "Available memory of N is smaller than requested bytes of M" (bfc_arena.cc, a gpu_mem_limit
# reached) was the only text of a real out-of-memory on the H200 (2026-12-04, results/gpu/).
_OUT_OF_MEMORY = re.compile(
    r"out of memory|failed to allocate memory|bad_alloc|cudaErrorMemoryAllocation|_ALLOC_FAILED"
    r"|is smaller than requested bytes",
    re.IGNORECASE,
)
# A provider fault that is not the graph's: the device, its driver or its libraries.
_DEVICE = re.compile(r"CUDA|CUBLAS|CUDNN|cuBLAS|cuDNN|device", re.IGNORECASE)
# The stricter form, for the binding's untyped errors: what ONNX Runtime's CUDA_CALL / CUBLAS_CALL /
# CUDNN_CALL checks write ("CUDA failure 700: an illegal memory access ...", "CUBLAS failure 13: ...",
# "CUDA error cudaErrorLaunchFailure: ..."), or a library status name. The bare word "device" or "CUDA"
# is not enough there: "input bound on the wrong device" is our bug, not the GPU's.
_CUDA_FAILURE = re.compile(
    r"\b(?:CUDA|CUBLAS|CUDNN|CUFFT|CURAND|NVRTC) (?:failure|error)\b|cudaError\w+|CUBLAS_STATUS_\w+"
    r"|CUDNN_STATUS_\w+",
    re.IGNORECASE,
)

Fault = Literal["out_of_memory", "device"]


class BindingError(RuntimeError):
    """A plain `RuntimeError` raised by one of ONNX Runtime's IOBinding or OrtValue calls (the bound
    runner's `run_with_iobinding`, `update_inplace`, the read-back), same text. Those calls do not raise
    ONNX Runtime's typed exceptions: `run_with_iobinding` throws `std::runtime_error("Error in execution: "
    + status)` (onnxruntime_pybind_state.cc) and a failed CUDA copy throws from CUDA_CALL_THROW, both
    `builtins.RuntimeError` in Python. Only the bound runner raises this, and only around those calls,
    so a `RuntimeError` of our own code (a bug) is never taken for the device's."""


@contextmanager
def binding_errors() -> Iterator[None]:
    """Around ONNX Runtime's binding calls: their plain `RuntimeError`s become `BindingError`s."""
    try:
        yield
    except RuntimeError as exc:
        if type(exc) is RuntimeError:
            raise BindingError(str(exc)) from exc
        raise


def classify_fault(exc: BaseException) -> Fault | None:
    """What an exception from a session call says of the device: out of memory, another device fault,
    or None (a graph or input error, or not ONNX Runtime's at all), whichever path raised it.

    - ONNX Runtime's typed exceptions (`session.run`): by type and text (`_DEVICE`).
    - `BindingError` (the bound runner's `run_with_iobinding` and copies): by text only, and strictly:
      an allocation failure, or a CUDA/cuBLAS/cuDNN failure as ONNX Runtime's checks write it
      (`_CUDA_FAILURE`). Anything else there ("Error in execution: Got invalid dimensions ...", a
      binding of the wrong shape or device) is a bug or a broken graph: None, a 500, not masked as 503.
    - Any other exception, `RuntimeError` included: None.
    """
    text = str(exc)
    if isinstance(exc, BindingError):
        if _OUT_OF_MEMORY.search(text):
            return "out_of_memory"
        return "device" if _CUDA_FAILURE.search(text) else None
    if not isinstance(exc, ORT_ERRORS):
        return None
    if _OUT_OF_MEMORY.search(text):
        return "out_of_memory"
    if isinstance(exc, ort_errors.EPFail | ort_errors.DeviceReset) or _DEVICE.search(text):
        return "device"
    return None
