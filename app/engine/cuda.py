"""The CUDA runtime as the bound runner (app/engine/runners.py's `BoundRunner`) calls it itself:
libcudart through ctypes (`Cudart`, or a fake with the same calls: `CudaRuntime`) for copies and memsets
of only the rows a call uses, and the runner's page-locked host staging (`PinnedBlock`).
"""

from __future__ import annotations

import ctypes
import logging
import weakref
from collections.abc import Sequence
from typing import Protocol

import numpy as np

logger = logging.getLogger(__name__)


class CudaRuntime(Protocol):
    """The CUDA runtime calls the bound runner makes itself (`Cudart`; the tests give a fake)."""

    def host_register(self, ptr: int, size: int) -> int: ...
    def host_unregister(self, ptr: int) -> int: ...
    def get_last_error(self) -> int: ...
    def error_name(self, code: int) -> str: ...
    def memcpy(self, dst: int, src: int, size: int, kind: int) -> int: ...
    def memset(self, ptr: int, value: int, size: int) -> int: ...
    def synchronize_legacy_stream(self) -> int: ...


H2D, D2H = 1, 2  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost


class Cudart:
    """libcudart through ctypes, every function with its C signature declared. The library onnxruntime
    loaded is the one found (preload_dlls or the system path: dlopen reuses an object of that soname)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        c_int, ptr, size = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        for name, args, res in (
            ("cudaHostRegister", [ptr, size, ctypes.c_uint], c_int),
            ("cudaHostUnregister", [ptr], c_int),
            ("cudaGetLastError", [], c_int),
            ("cudaGetErrorName", [c_int], ctypes.c_char_p),
            ("cudaMemcpy", [ptr, ptr, size, c_int], c_int),
            ("cudaMemset", [ptr, c_int, size], c_int),
            ("cudaStreamSynchronize", [ptr], c_int),
        ):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res

    @classmethod
    def load(cls) -> Cudart | None:
        for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
            try:
                return cls(ctypes.CDLL(name))
            except (OSError, AttributeError):
                continue
        return None

    def host_register(self, ptr: int, size: int) -> int:
        return int(self._lib.cudaHostRegister(ptr, size, 0))

    def host_unregister(self, ptr: int) -> int:
        return int(self._lib.cudaHostUnregister(ptr))

    def get_last_error(self) -> int:
        """The calling thread's last CUDA error, which this clears."""
        return int(self._lib.cudaGetLastError())

    def error_name(self, code: int) -> str:
        name = self._lib.cudaGetErrorName(code)
        return name.decode() if name else str(code)

    def memcpy(self, dst: int, src: int, size: int, kind: int) -> int:
        return int(self._lib.cudaMemcpy(dst, src, size, kind))

    def memset(self, ptr: int, value: int, size: int) -> int:
        return int(self._lib.cudaMemset(ptr, value, size))

    def synchronize_legacy_stream(self) -> int:
        return int(self._lib.cudaStreamSynchronize(None))


PAGE = 4096  # page-locking works on whole pages
ALIGN = 256  # each view starts on this boundary (CUDA's copy alignment)


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


class PinnedBlock:
    """A runner's host staging, every bucket's arrays: one page-aligned block of whole pages, page-locked
    with one `cudaHostRegister`, carved into one view per array (`views`, in the order of `layouts`).

    Registering small arrays one by one fails for the second array on a page already registered
    (cudaErrorHostMemoryAlreadyRegistered, 712: the malloc heap puts them side by side) and leaves that
    error as the thread's last CUDA error, which the next kernel that checks `cudaGetLastError()` then
    reports. One block owns its pages alone, so its one registration cannot overlap another; where it
    fails anyway, the error is cleared and logged, and the block stays pageable (slower copies, same
    answers)."""

    def __init__(self, layouts: Sequence[tuple[tuple[int, ...], np.dtype]], cudart: CudaRuntime | None):
        offsets, size = [], 0
        for shape, dtype in layouts:
            offsets.append(size)
            size = _round_up(size + int(np.prod(shape)) * np.dtype(dtype).itemsize, ALIGN)
        self.size = _round_up(max(size, 1), PAGE)
        self._raw = np.zeros(self.size + PAGE, np.uint8)
        start = (-self._raw.ctypes.data) % PAGE
        self.block = self._raw[start : start + self.size]
        self.views = [
            self.block[o : o + int(np.prod(shape)) * np.dtype(dtype).itemsize].view(dtype).reshape(shape)
            for o, (shape, dtype) in zip(offsets, layouts, strict=True)
        ]
        self.pinned = False
        self.error: str | None = None  # why it is not page-locked, where registration failed
        self._unpin: weakref.finalize | None = None
        if cudart is not None:
            code = cudart.host_register(self.block.ctypes.data, self.size)
            if code == 0:
                self.pinned = True
                # Unregistered before its memory is freed, also where no one calls release (a runner dropped
                # on a failed load): a registration left behind makes the next block of the same size, which
                # the allocator maps at the same address, fail with cudaErrorHostMemoryAlreadyRegistered (seen
                # on an H200, 2026-12-04). The finalizer holds the memory until it has run.
                self._unpin = weakref.finalize(self, _unregister, cudart, self._raw, self.block.ctypes.data)
                self._unpin.atexit = False  # at exit the process's pages go anyway: no CUDA call then
            else:
                cudart.get_last_error()  # clear it: a later kernel's check would report it as its own
                self.error = cudart.error_name(code)
                logger.warning(
                    "page-locking %d bytes of host staging failed (%s); copies stay pageable",
                    self.size,
                    self.error,
                )

    def release(self) -> None:
        if self._unpin is not None:
            self._unpin()  # runs once
        self.pinned = False


def _unregister(cudart: CudaRuntime, memory: np.ndarray, ptr: int) -> None:
    """Unpin a block's pages; `memory` (its owner) is kept alive until this has run."""
    cudart.host_unregister(ptr)
