"""bench.gpu_lane (scripts/gpu-lane.sh): its time budget (under 8 minutes, by the steps' own limits), what it
covers, the CPU form end to end (the steps' smoke sizes: tables and JSON written into the folder given),
and where no GPU can run it, the reason and exit 2 with nothing written. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import gpu_lane

REPO = Path(__file__).resolve().parents[2]


def test_the_lane_fits_one_command_on_a_lent_gpu_host() -> None:
    """Each step is killed at its limit, so the limits plus the overhead bound the command: under 8
    minutes for the lane, under one command's 10 minutes for the optional second one."""
    assert gpu_lane.budget(gpu_lane.LANE) <= gpu_lane.LANE_BUDGET_S <= 8 * 60
    assert gpu_lane.budget(gpu_lane.SLOW) <= gpu_lane.SLOW_BUDGET_S < 10 * 60
    for step in (*gpu_lane.LANE, *gpu_lane.SLOW):  # every bench bounds its own cells too
        if step.module.startswith("bench."):
            assert {"--budget", "--seconds"} & set(step.args), step.name


def test_the_lane_covers_what_the_issue_asks_on_cuda() -> None:
    steps = {s.name: s for s in gpu_lane.LANE}
    assert "tests/gpu/test_parity.py" in steps["tests"].args  # parity per shipped version
    for name in ("runners", "serving", "workers"):
        args = steps[name].args
        assert args[args.index("--device") + 1] == "cuda", name

    def value(name: str, flag: str) -> str:
        args = steps[name].args
        return args[args.index(flag) + 1]

    assert value("runners", "--batches") == "1,8,64,256"
    assert value("serving", "--concurrency") == "1,16,64" and value("serving", "--big-series") == "256"
    assert value("workers", "--workers") == "1,8"


def test_every_step_names_a_module_of_this_repository() -> None:
    for step in (*gpu_lane.LANE, *gpu_lane.SLOW):
        assert step.module == "pytest" or (REPO / f"{step.module.replace('.', '/')}.py").is_file(), step
        for arg in step.args:
            if arg.startswith("tests/"):
                assert (REPO / arg).is_file(), arg


def test_the_lane_stops_with_the_reason_where_no_gpu_runs(tmp_path: Path) -> None:
    if gpu_lane.cuda_missing() is None:
        pytest.skip("a GPU is visible here: run the lane itself")
    done = subprocess.run(
        ["bash", "scripts/gpu-lane.sh", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "gpu-lane: not run: GPU lane: " in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_cpu_form_writes_its_tables_and_json_into_the_folder(tmp_path: Path) -> None:
    """The lane's steps in their smoke sizes on the CPU (workers left out here: tests/bench/test_workers.py
    runs its smoke form): each step's output, serving.json, gpu-lane.json and gpu-lane.md."""
    out = tmp_path / "lane"
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_lane", str(out), "--cpu-smoke", "--steps", "tests,runners,serving"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3 * gpu_lane.SMOKE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu-lane.json",
        "gpu-lane.md",
        "runners.txt",
        "serving.json",
        "serving.txt",
        "tests.txt",
    ]
    summary = json.loads((out / "gpu-lane.json").read_text())
    steps = {s["name"]: s for s in summary["steps"]}
    assert list(steps) == ["tests", "runners", "serving"] and all(s["exit"] == 0 for s in steps.values())
    assert summary["budget_s"] == sum(s.timeout_s for s in gpu_lane.LANE[:3]) + gpu_lane.OVERHEAD_S
    runner_rows = steps["runners"]["tables"][0]["rows"]
    assert [(r["version"], r["batch"]) for r in runner_rows] == [("1", "1"), ("1", "8")]
    assert "v1: answers bit for bit as the plain session: yes" in steps["runners"]["lines"]
    assert any("skipped" in line for line in steps["tests"]["lines"])  # no GPU: the GPU tests skip
    assert summary["serving"] is not None and any(t["markdown"] for t in steps["serving"]["tables"])
    page = (out / "gpu-lane.md").read_text()
    assert page.startswith(gpu_lane.START) and page.rstrip().endswith(gpu_lane.END)
    assert "**runners** (exit 0" in page and "--cpu-smoke" in page


def test_tables_are_read_from_both_formats() -> None:
    text = (
        "version  batch  plain ms\n-------  -----  --------\n1        8      0.5\n\n"
        "| a | b |\n| --- | --- |\n| x | 2 |\n"
    )
    found = gpu_lane.tables(text)
    assert found == [
        {
            "header": ["version", "batch", "plain ms"],
            "rows": [{"version": "1", "batch": "8", "plain ms": "0.5"}],
            "markdown": False,
        },
        {"header": ["a", "b"], "rows": [{"a": "x", "b": "2"}], "markdown": True},
    ]


def test_the_section_between_the_markers_is_replaced_with_every_step() -> None:
    page = (REPO / "BENCHMARKS.md").read_text()
    assert page.count(gpu_lane.START) == 1 and page.count(gpu_lane.END) == 1
    results = [
        gpu_lane.Result("tests", ["-m", "pytest"], 160, 0, 40.0, [], ["17 passed in 40.0s"]),
        gpu_lane.Result("runners", ["-m", "bench.runners"], 80, None, 80.0),
    ]
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    new = gpu_lane.section(results, "NVIDIA H100; 16 CPUs", when, "bash scripts/gpu-lane.sh OUT")
    written = gpu_lane.replace_section(page, new)
    before, after = page.split(gpu_lane.START)[0], page.split(gpu_lane.END)[1]
    assert written.startswith(before) and written.endswith(after)
    assert "`bash scripts/gpu-lane.sh OUT` on 2026-11-24 12:00 UTC" in written
    assert "**tests** (exit 0, 40 s)" in written and "17 passed in 40.0s" in written
    assert "**runners** (killed at its 80 s limit, 80 s)" in written
    with pytest.raises(ValueError, match="no <!-- gpu-lane:start -->"):
        gpu_lane.replace_section("# no markers", new)
