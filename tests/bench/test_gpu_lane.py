"""bench.gpu_lane (scripts/gpu-lane.sh): where no GPU can run it says why and stops (exit 2, nothing
written); where one can, BENCHMARKS.md's GPU section is rewritten from the steps' outputs."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import gpu_lane

REPO = Path(__file__).resolve().parents[2]


def test_the_lane_stops_with_the_reason_where_no_gpu_runs(tmp_path: Path) -> None:
    if gpu_lane.cuda_missing() is None:
        pytest.skip("a GPU is visible here: run the lane itself")
    done = subprocess.run(
        ["bash", "scripts/gpu-lane.sh", "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "gpu-lane: not run: GPU lane: " in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_section_between_the_markers_is_replaced_with_every_step() -> None:
    page = (REPO / "BENCHMARKS.md").read_text()
    assert page.count(gpu_lane.START) == 1 and page.count(gpu_lane.END) == 1
    results = {"tests": (0, "17 passed in 40.0s"), "runners": (1, "version  batch\n-----")}
    new = gpu_lane.section(results, "NVIDIA H100; 16 CPUs", datetime(2026, 11, 24, 12, 0, tzinfo=UTC), True)
    written = gpu_lane.replace_section(page, new)
    before, after = page.split(gpu_lane.START)[0], page.split(gpu_lane.END)[1]
    assert written.startswith(before) and written.endswith(after)
    assert "`bash scripts/gpu-lane.sh --quick` on 2026-11-24 12:00 UTC" in written
    assert (
        "**tests** (exit 0)" in written
        and "17 passed in 40.0s" in written
        and "**runners** (exit 1)" in written
    )
    with pytest.raises(ValueError, match="no <!-- gpu-lane:start -->"):
        gpu_lane.replace_section("# no markers", new)


def test_every_step_names_a_module_of_this_repository() -> None:
    for step in gpu_lane.steps("python3"):
        module = step.command[2]
        assert module == "pytest" or (REPO / f"{module.replace('.', '/')}.py").is_file(), module
