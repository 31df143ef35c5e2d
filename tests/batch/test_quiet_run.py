"""The batch command's output on a successful run (issue 45, item 12): Ray's one error-level line of
every actor pool is left out of standard error and nothing else is; a small run's rate is not "0"."""

from __future__ import annotations

import os

import pytest

from batch.progress import rate_text
from batch.stderr import KNOWN_LINES, without_lines


def test_the_filter_drops_only_the_known_line(capfd: pytest.CaptureFixture[str]) -> None:
    with without_lines():
        os.write(2, b"parts 1/2\r")  # a bar's update: passed on without waiting for a newline
        os.write(2, f"[E 1 1] core_worker.cc:2465: Actor ... {KNOWN_LINES[0]}. See ...\n".encode())
        os.write(2, b"error: a real one\npartial")  # the rest without a newline: passed on at the end
    os.write(2, b" end\n")
    assert capfd.readouterr().err == "parts 1/2\rerror: a real one\npartial end\n"


def test_the_filter_keeps_everything_else_in_order(capfd: pytest.CaptureFixture[str]) -> None:
    lines = [f"line {i}\n" for i in range(2000)]
    with without_lines():
        for line in lines:
            os.write(2, line.encode())
    assert capfd.readouterr().err == "".join(lines)


@pytest.mark.parametrize(
    ("series", "seconds", "text"),
    [(5, 8.0, "0.62"), (4, 5.0, "0.8"), (95, 10.0, "9.5"), (189_000, 1000.0, "189"), (10, 0.0, "?")],
)
def test_a_rate_keeps_two_figures_below_ten(series: int, seconds: float, text: str) -> None:
    assert rate_text(series, seconds) == text
