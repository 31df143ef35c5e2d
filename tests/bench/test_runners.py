"""bench.runners: the smoke form on the CPU (plain and bound runners of a shipped version, answers checked
bit for bit before timing). No timing is asserted; the CUDA rows run in the GPU lane (docs/gpu.md)."""

from __future__ import annotations

import pytest

from bench import runners
from tests.bench.tables import table_rows


def test_smoke_run_checks_and_times_the_runners(capsys: pytest.CaptureFixture[str]) -> None:
    runners.main(["--smoke"])
    out = capsys.readouterr().out
    rows = table_rows(out, "version")
    assert [(r["version"], r["batch"]) for r in rows] == [("1", "1"), ("1", "8")], out
    for r in rows:
        assert float(r["bound max|diff|"]) == 0, out  # identical answers, bit for bit
        assert float(r["plain ms"]) > 0 and float(r["bound ms"]) > 0 and float(r["plain/bound"]) > 0, out
        assert 1 <= int(r["rounds"]) <= 5, out
    assert "graph ms" not in out  # CUDA graphs exist on the CUDA device only
    assert "v1: answers bit for bit as the plain session: yes" in out, out
    # the speed targets are the GPU's: on CPU they are named as such, never judged
    assert "Speed targets (issue 23) apply on CUDA only" in out and "fewer ms than plain" not in out, out


def test_cuda_is_refused_where_it_cannot_run() -> None:
    """No GPU here: asking for CUDA stops the bench rather than timing the CPU under a CUDA label."""
    from app.engine.providers import cuda_device_count

    if cuda_device_count():
        pytest.skip("a GPU is visible: the CUDA rows run (the GPU lane)")
    with pytest.raises(
        SystemExit, match="the session runs on CPUExecutionProvider, not CUDAExecutionProvider"
    ):
        runners.main(["--smoke", "--device", "cuda"])
