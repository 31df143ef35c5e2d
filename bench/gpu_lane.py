"""The GPU lane: one command, under 8 minutes on a 16-core GPU host, its tables and JSON in a folder.

    bash scripts/gpu-lane.sh OUT            # the lane: = python -m bench.gpu_lane OUT        (< 8 min)
    bash scripts/gpu-lane.sh OUT --slow     # the optional rest, a second command             (< 10 min)
    bash scripts/gpu-lane.sh OUT --cpu-smoke  # the same steps in their smoke sizes on the CPU (the tests)

On a host with a CUDA device and onnxruntime-gpu (docs/gpu.md: the bring-up on a lent GPU machine), the
lane runs, each step in its own process group under its own time limit (`Step.timeout_s`; a step that
fails or runs out of time is recorded and the next one still runs):

- tests (160 s): `pytest tests/gpu/test_parity.py tests/gpu/test_runners.py`: CPU <-> CUDA parity per
  shipped version (TF32 off and on); bound and graph runners within 1e-4 std of the plain session; the
  staging pinned once with no CUDA error left; graphs from any calling thread; a capture while another
  version serves; a real out-of-memory retried in halves or 503;
- runners (80 s): `bench.runners --device cuda` at 1/8/64/256 rows: plain vs bound vs graphs, every
  version;
- serving (95 s): `bench.serving --device cuda --servers service`: the service at c = 1/16/64 and 256
  series per request, against raw ORT;
- workers (110 s): `bench.workers --device cuda --workers 1,8`: front ends x engine on CUDA.

Limits 445 s, plus `OVERHEAD_S` for starting, the machine's description and the summary: 470 s, under
`LANE_BUDGET_S` (480 s); every bench's own counts and per-cell caps are set so that it ends inside its
limit. `--slow`, the rest (the service on CUDA through HTTP, the exporter's CUDA record, PyTorch vs the
graph on CUDA, the service against its peers), has its own budget, under one command's 10 minutes.

Written into OUT (at most 8 files, what a lent machine sends back): `<step>.txt` per step (its whole
output), `serving.json` (bench.serving's raw results), `gpu-lane.json` (every step: command, limit,
exit status, seconds, the tables parsed from its output, the parity lines) and `gpu-lane.md` (BENCHMARKS.md's
GPU section: machine, date, each step's tables). `--update-page` also rewrites that section of
BENCHMARKS.md. Where no CUDA device can run (and not `--cpu-smoke`), it stops before any step, with the
reason, exit status 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "BENCHMARKS.md"
START, END = "<!-- gpu-lane:start -->", "<!-- gpu-lane:end -->"
LANE_BUDGET_S = 480  # the lane's one command: under 8 minutes
SLOW_BUDGET_S = 570  # the optional second command: under one command's 10 minutes, with room to spare
OVERHEAD_S = 25  # interpreter start, nvidia-smi, parsing and writing the summary (measured: a few s)
SMOKE_TIMEOUT_S = 600  # the CPU form's per-step limit: a safety net on a shared machine, never a verdict
# Peers that need no package the GPU machine lacks (LitServe is installed from the index on first use).
SLOW_SERVERS = "minimal,floor,naive,service"


@dataclass(frozen=True)
class Step:
    """One process of the lane: `module` run with `args` (`smoke_args` in the CPU form), killed with its
    process group after `timeout_s`."""

    name: str
    module: str  # run as `python -m module`
    args: tuple[str, ...]
    timeout_s: int
    smoke_args: tuple[str, ...] = ()
    json_out: bool = False  # takes `--json OUT/<name>.json`

    def command(self, python: str, out: Path, smoke: bool) -> list[str]:
        extra = ["--json", str(out / f"{self.name}.json")] if self.json_out else []
        return [python, "-m", self.module, *(self.smoke_args if smoke else self.args), *extra]


PYTEST = ("-ra", "-q", "-p", "no:cacheprovider", "-s")

SERVING = (
    "--device cuda --servers service --rounds 1 --concurrency 1,16,64 --requests 1000 --warmup 100 "
    "--seconds 10 --windows 64 --big-series 256 --big-windows 4 --big-requests 12 --big-concurrency 4"
)
WORKERS = (
    "--device cuda --workers 1,8 --rounds 1 --concurrency 1,16,64 --requests 800 --warmup 100 "
    "--seconds 5 --big-requests 8 --flood 16 --transport-calls 50"
)
RUNNERS = "--device cuda --batches 1,8,64,256 --repeats 200 --budget 1.5"
PEERS = (
    f"--device cuda --servers {SLOW_SERVERS} --rounds 1 --seconds 6 --requests 1000 --warmup 100 "
    "--big-windows 4 --big-requests 8"
)
GPU_TESTS = ("tests/gpu/test_parity.py", "tests/gpu/test_runners.py", *PYTEST)

# Each bench's counts and per-cell caps (--seconds caps a cell and, apart, its warm-up) keep it inside its
# limit; the limit is what bounds the command, whatever a step does.
LANE = (
    Step("tests", "pytest", GPU_TESTS, 160, GPU_TESTS),
    Step(
        "runners",
        "bench.runners",
        tuple(RUNNERS.split()),
        80,
        ("--smoke",),
    ),
    Step(
        "serving",
        "bench.serving",
        tuple(SERVING.split()),
        95,
        ("--smoke", "--servers", "service"),
        json_out=True,
    ),
    Step("workers", "bench.workers", tuple(WORKERS.split()), 110, ("--smoke",)),
)

SLOW = (
    Step("service", "pytest", ("tests/gpu/test_service.py", *PYTEST), 100),
    Step("export", "pytest", ("tests/gpu/test_export.py", *PYTEST), 90),
    # Untrained weights (the same graph, the same speed): one epoch of training on one CPU thread did not
    # end inside the step's 120 s on the H200 host (2026-12-04, results/gpu/).
    Step("engine", "bench.engine", ("--device", "cuda", "--budget", "5", "--train-windows", "0"), 120),
    Step("peers", "bench.serving", tuple(PEERS.split()), 235),
)


@dataclass
class Result:
    name: str
    command: list[str]
    timeout_s: int
    exit: int | None  # None: killed at its limit
    seconds: float
    tables: list[dict[str, object]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # verdicts and parity lines, as printed

    @property
    def timed_out(self) -> bool:
        return self.exit is None


def budget(steps: Sequence[Step]) -> int:
    """The most a command of these steps can take: their limits plus the lane's own overhead."""
    return sum(s.timeout_s for s in steps) + OVERHEAD_S


def cuda_missing() -> str | None:
    """Why the CUDA provider cannot run here (None where it can): the GPU tests' own check."""
    from tests.gpu.conftest import cuda_missing as missing

    return missing()


def machine() -> str:
    """The GPU (nvidia-smi), its driver, the host's CPUs, onnxruntime's version."""
    import onnxruntime as ort

    gpu = "no GPU (nvidia-smi not found)"
    if shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
            timeout=20,
        )
        if out.returncode == 0 and out.stdout.strip():
            gpu = "; ".join(line.strip() for line in out.stdout.strip().splitlines())
    cpus = len(os.sched_getaffinity(0))
    return f"{gpu}; {cpus} CPUs; Python {platform.python_version()}; onnxruntime {ort.__version__}"


def tables(text: str) -> list[dict[str, object]]:
    """Every table in a step's output, as {"header": [...], "rows": [{column: cell}], "markdown": bool}:
    bench.harness.report.format_table's (a header, a rule of dashes, rows split on two or more spaces) and
    markdown ones (bench.serving's report)."""
    lines = text.splitlines()
    found: list[dict[str, object]] = []
    for i in range(len(lines) - 1):
        line, rule = lines[i].strip(), lines[i + 1].strip()
        markdown = line.startswith("|") and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", rule) is not None
        if not markdown and (not line or not rule or set(rule) - {"-", " "} or line.startswith("|")):
            continue
        split = _markdown_cells if markdown else _text_cells
        head = split(line)
        rows = []
        for row in lines[i + 2 :]:
            cells = split(row.strip())
            if len(cells) != len(head) or not row.strip():
                break
            rows.append(dict(zip(head, cells, strict=True)))
        found.append({"header": head, "rows": rows, "markdown": markdown})
    return found


def _text_cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line)


def _markdown_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []


VERDICT = re.compile(
    r"^(v\d+: |.*: (met|NOT met)|.*max \|CUDA - CPU\||\d+ (passed|failed|skipped)|SKIPPED|FAILED|ERROR)"
)


def run_step(step: Step, python: str, out: Path, smoke: bool) -> Result:
    """One step in its own process group, killed with every process it started at its limit."""
    command = step.command(python, out, smoke)
    limit = SMOKE_TIMEOUT_S if smoke else step.timeout_s
    print(f"gpu-lane: {step.name} (limit {limit} s): {' '.join(command[1:])}", flush=True)
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with (out / f"{step.name}.txt").open("w") as log:
        process = subprocess.Popen(
            command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code: int | None = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
    seconds = time.perf_counter() - t0
    text = (out / f"{step.name}.txt").read_text(errors="replace")
    lines = [line.strip() for line in text.splitlines() if VERDICT.match(line.strip())]
    status = "killed at its limit" if code is None else f"exit {code}"
    print(f"gpu-lane: {step.name}: {status} in {seconds:.0f} s", flush=True)
    return Result(step.name, command[1:], limit, code, round(seconds, 1), tables(text), lines)


def section(results: Sequence[Result], host: str, when: datetime, label: str) -> str:
    """BENCHMARKS.md's GPU section: the command, machine and date, then each step's status, verdict lines
    and tables."""
    lines = [START, f"Written by `{label}` on {when:%Y-%m-%d %H:%M} UTC. **Machine:** {host}.", ""]
    for r in results:
        status = f"killed at its {r.timeout_s} s limit" if r.timed_out else f"exit {r.exit}"
        lines += [f"**{r.name}** ({status}, {r.seconds:.0f} s): `{' '.join(r.command)}`", ""]
        body, markdown = list(r.lines), []
        for table in r.tables:
            head = [str(h) for h in table["header"]]  # type: ignore[attr-defined]
            rows = [[str(row[h]) for h in head] for row in table["rows"]]  # type: ignore[attr-defined]
            if table["markdown"]:
                markdown += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
                markdown += ["| " + " | ".join(row) + " |" for row in rows] + [""]
            else:
                body += ["", "  ".join(head), *("  ".join(row) for row in rows)]
        if body:
            lines += ["```text", *body, "```", ""]
        lines += markdown
    lines.append(END)
    return "\n".join(lines)


def replace_section(page: str, new: str) -> str:
    """`page` with the text between the gpu-lane markers (the markers included) replaced by `new`."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(page):
        raise ValueError(f"BENCHMARKS.md has no {START} ... {END} section")
    return pattern.sub(lambda _: new, page, count=1)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.gpu_lane",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("out", type=Path, help="folder for the tables and JSON (created)")
    ap.add_argument("--slow", action="store_true", help="the optional second command instead of the lane")
    ap.add_argument("--cpu-smoke", action="store_true", help="the steps' smoke sizes, on the CPU (tests)")
    ap.add_argument("--update-page", action="store_true", help="rewrite BENCHMARKS.md's GPU section too")
    ap.add_argument("--steps", type=_names, default=None, help="only these steps, e.g. runners,serving")
    ap.add_argument("--page", type=Path, default=BENCHMARKS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.slow and args.cpu_smoke:
        ap.error("--cpu-smoke runs the lane's steps only")
    if not args.cpu_smoke:
        reason = cuda_missing()
        if reason is not None:
            print(f"gpu-lane: not run: {reason}", file=sys.stderr)
            return 2
    steps: tuple[Step, ...] = SLOW if args.slow else LANE
    if args.steps is not None:
        unknown = sorted(set(args.steps) - {s.name for s in steps})
        if unknown:
            ap.error(f"no step {unknown}; the steps are {[s.name for s in steps]}")
        steps = tuple(s for s in steps if s.name in args.steps)
    args.out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    print(f"gpu-lane: {len(steps)} steps, at most {budget(steps)} s in all", flush=True)
    results = [run_step(step, sys.executable, args.out, args.cpu_smoke) for step in steps]
    host = machine()
    label = "bash scripts/gpu-lane.sh OUT" + (" --slow" if args.slow else "")
    label += " --cpu-smoke" if args.cpu_smoke else ""
    serving = args.out / "serving.json"
    summary = {
        "command": label,
        "machine": host,
        "started": started.isoformat(timespec="seconds"),
        "budget_s": budget(steps),
        "steps": [{**asdict(r), "timed_out": r.timed_out} for r in results],
        "serving": json.loads(serving.read_text()) if serving.exists() and not args.slow else None,
    }
    (args.out / "gpu-lane.json").write_text(json.dumps(summary, indent=1, default=str))
    text = section(results, host, started, label)
    (args.out / "gpu-lane.md").write_text(text + "\n")
    if args.update_page:
        args.page.write_text(replace_section(args.page.read_text(), text))
    print(f"gpu-lane: wrote {args.out}/gpu-lane.json, gpu-lane.md and one .txt per step", flush=True)
    return 0 if all(r.exit == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
