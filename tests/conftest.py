"""Session-wide: the folder of the models built once per run (tests/utils/once.py), the `slow` mark of the
tests outside the fast tier (tests/tiers.py), the groups and order of xdist's workers under `-n` and their
share of the CPUs (tests/utils/parallel.py), and the figure the time-bounded tests were scaled by
(tests/utils/speed.py), if any asked."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import pytest

from tests import tiers
from tests.utils import once, parallel, speed


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: outside the fast tier (tests/tiers.py names them; deselect with -m 'not slow', "
        "which bash scripts/test-fast.sh does)",
    )
    parallel.share_cpus(config)  # under -n: each worker's thread pools get its share of the CPUs
    if not hasattr(config, "workerinput") and once.SHARED not in os.environ:
        # The folder of the models built once per run (tests/utils/once.py): made before xdist starts its
        # workers, which inherit the variable, and removed when the run ends.
        os.environ[once.SHARED] = tempfile.mkdtemp(prefix="rsa-built-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(once.SHARED), ignore_errors=True))


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    parallel.unique_ids(items)  # one node id per test, as xdist schedules by it
    tiers.mark(items)
    if parallel.distributed(config):  # -n: the groups of tests/utils/parallel.py, heaviest first
        parallel.arrange(items)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent where xdist is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under -n: each group of tests/utils/parallel.py to one worker (a test file, the Ray files, ...)."""
    return parallel.scheduler(config, log)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if speed.measured():
        terminalreporter.write_line(
            f"time bounds scaled by {speed.slowdown():.2f}x: this machine's measured slowdown "
            f"against the quiet reference (tests/utils/speed.py)"
        )
