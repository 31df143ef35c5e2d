"""Smoke run of bench.saturation at a tiny size (no timing assertions): the script must not rot."""

from __future__ import annotations

import pytest

from bench import saturation


def test_saturation_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    assert saturation.main(["--series-per-request", "4", "--concurrency", "2", "--seconds", "2"]) == 0
    out = capsys.readouterr().out
    assert "0 errors" in out and "/healthz: p50" in out and "p99" in out
