"""Session-wide: the figure the time-bounded tests were scaled by (tests/utils/speed.py), if any asked."""

from __future__ import annotations

import pytest

from tests.utils import speed


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if speed.measured():
        terminalreporter.write_line(
            f"time bounds scaled by {speed.slowdown():.2f}x: this machine's measured slowdown "
            f"against the quiet reference (tests/utils/speed.py)"
        )
