"""Progress of a batch job: series done, their rate and the ETA (from the parts left), as a tqdm bar on a
terminal and as plain lines otherwise (a log, a CI job), at most one line every `every_s` seconds."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def rate_text(series: int, seconds: float) -> str:
    """Series per second, to two significant figures below 10 (a small run's 5 series in 5.1 s read
    "0 series/s" as a whole number)."""
    if seconds <= 0:
        return "?"
    rate = series / seconds
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


class Progress:
    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0, bar: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.bar_wanted = self.stream.isatty() if bar is None else bar
        self.bar: Any = None

    def start(self, parts: int) -> None:
        self.parts, self.done_parts, self.series = parts, 0, 0
        self.t0 = self.last = time.monotonic()
        if self.bar_wanted:
            from tqdm import tqdm

            self.bar = tqdm(total=parts, unit="part", file=self.stream, dynamic_ncols=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        left = self.parts - self.done_parts
        eta = elapsed / self.done_parts * left if self.done_parts else float("nan")
        eta_text = _clock(eta) if eta == eta else "?"
        return (
            f"parts {self.done_parts}/{self.parts}  series {self.series:,}  "
            f"{rate_text(self.series, elapsed)} series/s  "
            f"elapsed {_clock(elapsed)}  ETA {eta_text}"
        )

    def update(self, series: int) -> None:
        self.done_parts += 1
        self.series += series
        if self.bar is not None:
            elapsed = time.monotonic() - self.t0
            self.bar.set_postfix(series=f"{self.series:,}", rate=f"{rate_text(self.series, elapsed)}/s")
            self.bar.update(1)
            return
        now = time.monotonic()
        if now - self.last >= self.every_s or self.done_parts == self.parts:
            self.last = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
