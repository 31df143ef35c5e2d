"""A serving process takes what it has imported and built out of the cyclic garbage collector's walks
before it serves (app/core/process.py `freeze_startup_objects`): a full collection of the service's 100k
start-up objects stalled the event loop 30-60 ms. Run in fresh interpreters: freezing this test process's
objects would keep every later test's garbage cycles that reach them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RECORD = textwrap.dedent(
    """
    import gc, sys
    import {module} as entry
    seen = []
    def run(*args, **kwargs):
        seen.append(gc.get_freeze_count())
    {patch}
    sys.argv = {argv!r}
    entry.main()
    assert seen and seen[0] > 10_000, seen
    print("frozen before serving:", seen[0])
    """
)


def _run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_service_freezes_its_start_up_objects_before_it_serves() -> None:
    code = RECORD.format(module="app.__main__", patch="entry.Server.run = run", argv=["app"])
    assert "frozen before serving" in _run(code)


def test_the_engine_process_freezes_its_start_up_objects_before_it_serves() -> None:
    patch = "entry.asyncio.run = lambda coroutine: (coroutine.close(), run())"
    code = RECORD.format(module="app.engine.__main__", patch=patch, argv=["app.engine", "ipc:///tmp/x.sock"])
    assert "frozen before serving" in _run(code)
