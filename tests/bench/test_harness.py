"""bench.harness: the pieces every benchmark is built from, on their own (no server started, no timing
asserted): a peer's missing packages reported with their install command, the one table helper in both
styles, targets judged by code, CPU accounting of a process tree, a served repository of links."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.harness import REPO
from bench.harness.measure import back_to_back, interleaved, process_cpu_s, tree_cpu_s
from bench.harness.report import Target, at_least, format_table, median_target, target
from bench.harness.servers import PeerPackages, free_port, serve, served_repository, stop


def test_missing_peer_packages_are_named_with_the_command_that_installs_them(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements-peer.txt"
    requirements.write_text("# a comment\nalpha==1.2\nbeta==3.4\n")
    packages = PeerPackages(tmp_path / "target", requirements)
    assert packages.missing() == ["alpha==1.2", "beta==3.4"]
    (tmp_path / "target" / "alpha-1.2.dist-info").mkdir(parents=True)
    assert packages.missing() == ["beta==3.4"]
    (tmp_path / "target" / "beta-3.4.dist-info").mkdir()
    assert packages.missing() == []
    assert packages.install_command == (
        f".venv/bin/python -m pip install --no-deps --target {tmp_path / 'target'} -r {requirements}"
    )
    env = packages.environ({"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "target"), "/elsewhere"])


def test_the_litserve_command_is_relative_to_the_repository() -> None:
    from bench import serving_servers

    assert serving_servers.LITSERVE.install_command == (
        ".venv/bin/python -m pip install --no-deps --target .venv/litserve "
        "-r bench/peers/requirements-litserve.txt"
    )


def test_one_table_helper_writes_text_and_markdown() -> None:
    rows = [["one", 1, "2.50"], ["three", 333, "0.10"]]
    assert format_table(["case", "n", "ms"], rows).splitlines() == [
        "case     n    ms",
        "----------------",
        "one      1  2.50",
        "three  333  0.10",
    ]
    assert format_table(["case", "n"], [["one", 1]], markdown=True).splitlines() == [
        "| case | n |",
        "| --- | --- |",
        "| one | 1 |",
    ]


@dataclass
class FakeCell:
    value: float
    shaky: bool = False


def test_targets_are_judged_by_code_and_missing_cells_give_no_data() -> None:
    ratio = lambda a, b: a.value / b.value  # noqa: E731
    met = target("a / b", "≥ 0.9", [FakeCell(9), FakeCell(10)], ratio, at_least(0.9))
    assert (met.value, met.met, met.shaky) == (0.9, True, False)
    assert target("a / b", "≥ 0.9", [FakeCell(9), None], ratio, at_least(0.9)) == Target(
        "a / b", None, "≥ 0.9", None
    )
    pairs = [
        (FakeCell(8), FakeCell(10)),
        (FakeCell(10), FakeCell(10)),
        (FakeCell(12, shaky=True), FakeCell(10)),
    ]
    median = median_target("a / b", "≥ 0.9", pairs, ratio, at_least(0.9))
    assert median.rounds == (0.8, 1.0, 1.2) and median.value == 1.0 and median.met and median.shaky
    assert median.row() == ["a / b", "1.00 (0.80, 1.00, 1.20)", "≥ 0.9", "met (errors or cut)"]
    assert median_target("a / b", "≥ 0.9", [], ratio, at_least(0.9)).met is None
    missed = median_target("a / b", "≥ 0.9", pairs[:1], ratio, at_least(0.9))
    assert missed.row()[-1] == "**missed**" and missed.summary()["rounds"] == [0.8]


def test_interleaved_and_back_to_back_count_their_calls() -> None:
    calls: list[str] = []
    times = interleaved(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3, budget_s=60
    )
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]  # one warm-up each, then the order rotated
    assert [len(t) for t in times.values()] == [3, 3]
    seen: list[int] = []
    result = back_to_back(lambda x: seen.append(len(x)), [[0] * 4, [0] * 4], calls=5, seconds=60, warmup=1)
    assert seen == [4] * 6 and result.batch == 4 and len(result.latencies_ms) == 5


# A child that burns 0.3 s of CPU (its own clock: the same on a busy machine, only slower), says so, waits.
BURN = (
    "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    "print(1, flush=True)\ntime.sleep(60)\n"
)


def test_the_cpu_of_a_process_tree_includes_its_children() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {BURN!r}])",
        ],
        stdout=subprocess.PIPE,  # the child writes to it too
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == b"1"
        own = process_cpu_s(parent.pid)
        assert own is not None and tree_cpu_s(parent.pid) - own >= 0.29  # the child's, still running
    finally:
        stop(parent, signal.SIGTERM, 10)  # and its group: the child with it
    assert process_cpu_s(parent.pid) is None  # gone


def test_a_served_repository_links_only_the_versions_asked_for() -> None:
    repository = served_repository(REPO / "model_repository" / "etth1-rsa", [1, 3])
    versions = sorted(p.name for p in (repository / "etth1-rsa").iterdir())
    assert versions == ["1", "3"]
    assert (repository / "etth1-rsa" / "1" / "manifest.json").is_file()


READY_SERVER = """
import http.server, sys
class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
print("listening", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ready).serve_forever()
"""


def test_a_stopped_server_leaves_no_folder_and_keeps_its_output() -> None:
    port = free_port()
    with serve([sys.executable, "-c", READY_SERVER, str(port)], port, dict(os.environ), name="ready") as live:
        assert live.log.exists()
    assert live.exit_code is not None and live.exit_code != 0  # stopped by its signal
    assert not live.log.parent.exists()
    assert "listening" in live.output()
