"""The GPU lane, one command: the tests that need a GPU, then the benches on CUDA, their tables written.

    bash scripts/gpu-lane.sh [--out results/gpu] [--quick]          # = python -m bench.gpu_lane

On a host with a CUDA device and onnxruntime-gpu (docs/gpu.md says how to bring the project to a lent
GPU machine), it runs, each in its own process:
1. `pytest tests/gpu -ra`: parity CPU <-> CUDA for every shipped version, the bound and graph runners
   against the plain session, the service on CUDA, the exporter's CUDA check;
2. `python -m bench.runners --device cuda`: plain session vs IOBinding vs CUDA graphs, per batch;
3. `python -m bench.engine --device cuda`: PyTorch eager vs the exported graph, same weights;
4. `python -m bench.serving --device cuda`: the service against raw ORT and the minimal peers.

Each step's output goes to `<out>/<step>.txt`, and BENCHMARKS.md's GPU section (between its
`gpu-lane` markers) is rewritten with the machine, the date and every step's tables, so that the page's
GPU numbers always come from this command. Where no CUDA device can run, it stops before any step, with
the reason, exit status 2. `--quick`: shorter benches (a first look; the page says so).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "BENCHMARKS.md"
START, END = "<!-- gpu-lane:start -->", "<!-- gpu-lane:end -->"
# Peers that need no package the GPU machine lacks (LitServe is installed from the index on first use).
SERVERS = "minimal,floor,naive,service"


@dataclass(frozen=True)
class Step:
    name: str
    command: tuple[str, ...]
    quick: tuple[str, ...] = ()  # extra arguments for --quick


def steps(python: str) -> list[Step]:
    return [
        Step("tests", (python, "-m", "pytest", "tests/gpu", "-ra", "-q", "-p", "no:cacheprovider", "-s")),
        Step("runners", (python, "-m", "bench.runners", "--device", "cuda"), ("--budget", "3")),
        Step("engine", (python, "-m", "bench.engine", "--device", "cuda"), ("--budget", "5")),
        Step(
            "serving",
            (python, "-m", "bench.serving", "--device", "cuda", "--servers", SERVERS),
            ("--rounds", "1"),
        ),
    ]


def cuda_missing() -> str | None:
    """Why the CUDA provider cannot run here (None where it can): the GPU tests' own check."""
    from tests.gpu.conftest import cuda_missing as missing

    return missing()


def machine() -> str:
    """The GPU (nvidia-smi), its driver, the host's CPUs, onnxruntime's version."""
    import onnxruntime as ort

    gpu = "unknown GPU"
    if shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode == 0 and out.stdout.strip():
            gpu = "; ".join(line.strip() for line in out.stdout.strip().splitlines())
    cpus = len(os.sched_getaffinity(0))
    return f"{gpu}; {cpus} CPUs; Python {platform.python_version()}; onnxruntime {ort.__version__}"


def section(results: dict[str, tuple[int, str]], host: str, when: datetime, quick: bool) -> str:
    """BENCHMARKS.md's GPU section: each step's command, exit status and output, verbatim."""
    lines = [
        START,
        f"Written by `bash scripts/gpu-lane.sh{' --quick' if quick else ''}` on {when:%Y-%m-%d %H:%M} UTC. "
        f"**Machine:** {host}.",
        "",
    ]
    for name, (status, output) in results.items():
        lines += [f"**{name}** (exit {status})", "", "```text", output.rstrip(), "```", ""]
    lines.append(END)
    return "\n".join(lines)


def replace_section(page: str, new: str) -> str:
    """`page` with the text between the gpu-lane markers (the markers included) replaced by `new`."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(page):
        raise ValueError(f"BENCHMARKS.md has no {START} ... {END} section")
    return pattern.sub(lambda _: new, page, count=1)


def _tail(text: str, lines: int = 80) -> str:
    """The last lines of a step's output: pytest's and the benches' summaries are at the end."""
    kept = text.rstrip().splitlines()
    return "\n".join(kept[-lines:])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.gpu_lane",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--out", type=Path, default=REPO / "results" / "gpu", help="folder for each step's output"
    )
    ap.add_argument("--quick", action="store_true", help="shorter benches")
    ap.add_argument("--page", type=Path, default=BENCHMARKS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    reason = cuda_missing()
    if reason is not None:
        print(f"gpu-lane: not run: {reason}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, tuple[int, str]] = {}
    for step in steps(sys.executable):
        command = [*step.command, *(step.quick if args.quick else ())]
        print(f"gpu-lane: {' '.join(command[1:])}", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        output = done.stdout + (f"\n[stderr]\n{_tail(done.stderr, 20)}" if done.returncode else "")
        (args.out / f"{step.name}.txt").write_text(done.stdout + done.stderr)
        results[step.name] = (done.returncode, _tail(output))
        print(
            f"gpu-lane: {step.name}: exit {done.returncode} in {time.perf_counter() - t0:.0f} s", flush=True
        )
    page = args.page.read_text()
    args.page.write_text(replace_section(page, section(results, machine(), datetime.now(UTC), args.quick)))
    print(f"gpu-lane: wrote {args.page} and {args.out}/*.txt")
    return max(status for status, _ in results.values())


if __name__ == "__main__":
    sys.exit(main())
