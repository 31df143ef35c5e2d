"""Process plumbing for the service's child processes (the engine, the front ends)."""

from __future__ import annotations

import contextlib
import ctypes
import signal

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux; elsewhere a no-op), so
    that a supervisor killed with SIGKILL leaves no engine or front end behind: they drain and exit."""
    with contextlib.suppress(OSError, AttributeError):  # no prctl: not Linux
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
