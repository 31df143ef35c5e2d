"""The batch command's standard error without the one line Ray's driver prints at error level on every
successful run (issue 45, item 12): everything else written to file descriptor 2, by Python or by Ray's
C++ core, passes through unchanged and at once (a tqdm bar's carriage returns too)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ["KNOWN_LINES", "without_lines"]

# Ray 2.60's core worker logs this at error level for every actor created with arguments in the object
# store and restarts allowed: every Ray Data actor pool (Ray Data puts its map transformer there itself,
# and allows restarts by default, max_restarts=-1; ours 2). The arguments stay referenced for the whole
# job, so a restart finds them (ray-project/ray#53727). The line is still in the driver's log file
# (python-core-driver-*.log in the session's logs).
KNOWN_LINES = ("has constructor arguments in the object store and max_restarts > 0",)


@contextmanager
def without_lines(drop: Sequence[str] = KNOWN_LINES) -> Iterator[None]:
    """Inside, file descriptor 2 is a pipe whose reader passes every line (ended by a newline or a
    carriage return) on to the real standard error, but the lines holding one of `drop`."""
    try:
        real = os.dup(2)
    except OSError:  # no standard error to filter
        yield
        return
    read, write = os.pipe()
    sys.stderr.flush()
    os.dup2(write, 2)
    os.close(write)
    marks = [d.encode() for d in drop]

    def pump() -> None:
        pending = b""
        while True:
            chunk = os.read(read, 65536)
            if not chunk:
                break
            pending += chunk
            cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
            done, pending = pending[:cut], pending[cut:]
            out = b"".join(
                line for line in done.splitlines(keepends=True) if not any(m in line for m in marks)
            )
            if out:
                os.write(real, out)
        if pending and not any(m in pending for m in marks):
            os.write(real, pending)
        os.close(read)

    thread = threading.Thread(target=pump, name="stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe's last write end closes: the reader drains it and stops
        thread.join(timeout=5.0)
        if not thread.is_alive():  # else a child still holds the pipe: the reader keeps `real`
            os.close(real)
