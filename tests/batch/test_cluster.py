"""A real Ray cluster on loopback: `ray start --head` and one more worker node on this machine (one CPU
and a small object store each, every port on a loopback address), a batch job submitted to it by address
(`python -m batch score --address`), its answers checked against the scorer run here. Each node runs in
its own process group (`ray start --block`), and teardown ends those groups, whatever happened: never
`ray stop`, which would end every Ray on the machine."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from batch.score import Forecaster, Job
from bench.loadgen import free_port
from tests.batch.test_score import write_parts

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
START_S = 120  # the most a node may take to come up on this busy machine (a bound, not a verdict)
# Ray replaces 127.0.0.1 (and localhost) with the machine's outward address, and refuses a second node when
# told to run no multi-machine cluster; any other loopback address it takes as it is: every node, the driver
# and the workers use this one.
HOST = "127.0.0.2"
# Token authentication on, with a token of this test's own (never a file in the home folder): the nodes,
# the probe and the job get it in their environment.
LOOPBACK = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": secrets.token_hex(32),
}


def ports() -> list[str]:
    names = [
        "--node-manager-port",
        "--object-manager-port",
        "--metrics-export-port",
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--runtime-env-agent-port",
    ]
    return [arg for name in names for arg in (name, str(free_port()))]


def start_node(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(
            [RAY, "start", "--block", "--node-ip-address", HOST, "--num-cpus", "1",
             "--object-store-memory", str(80 * 2**20), "--disable-usage-stats", *ports(), *args],
            stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip


def stop_node(process: subprocess.Popen[bytes]) -> None:
    """End the node's process group: SIGTERM, then SIGKILL after a short wait (the worker node's group
    ends within 1 s of SIGTERM; the head's `ray start --block` outlived 20 s of it, 2026-12-06)."""
    for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            # the group may outlive its leader for a moment: its raylet, workers
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                os.killpg(process.pid, 0)
                time.sleep(0.2)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            continue


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("ray-logs")
    temp = tempfile.mkdtemp(prefix="r37-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, **LOOPBACK, "PYTHONPATH": str(ROOT)}
    gcs = free_port()
    address = f"{HOST}:{gcs}"
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        nodes.append(
            start_node(
                ["--head", "--port", str(gcs), "--include-dashboard", "false", "--temp-dir", temp,
                 "--ray-client-server-port", str(free_port())],
                logs / "head.log", env,
            )
        )  # fmt: skip
        wait_for_nodes(address, 1, env, nodes, logs)
        nodes.append(start_node(["--address", address], logs / "worker.log", env))
        wait_for_nodes(address, 2, env, nodes, logs)
        yield address
    finally:
        for node in reversed(nodes):
            stop_node(node)
        shutil.rmtree(temp, ignore_errors=True)


def wait_for_nodes(address: str, n: int, env: dict[str, str], nodes: list, logs: Path) -> None:
    probe = (
        "import ray, sys; ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2], log_to_driver=False); "
        "print(sum(1 for x in ray.nodes() if x['Alive']))"
    )
    deadline = time.monotonic() + START_S
    last = ""
    while time.monotonic() < deadline:
        if any(node.poll() is not None for node in nodes):
            break
        done = subprocess.run(
            [sys.executable, "-c", probe, address, HOST],
            capture_output=True,
            text=True,
            env=env,
            timeout=START_S,
        )
        last = done.stdout + done.stderr
        if done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == [str(n)]:
            return
        time.sleep(1)
    text = "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(logs.glob("*.log")))
    raise AssertionError(f"the cluster did not reach {n} live node(s):\n{text}\nlast probe: {last[-3000:]}")


def test_a_job_submitted_by_address_runs_on_both_nodes(cluster, repository, tmp_path):
    parts = write_parts(tmp_path / "in")
    command = [
        sys.executable, "-m", "batch", "score", "--address", cluster, "--model-repository", str(repository),
        "--model", "etth1-rsa", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
        "--horizon", "24", "--level", "80", "--actors", "2", "--threads", "1",
    ]  # fmt: skip
    env = {**os.environ, **LOOPBACK}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scored 9 series in 3 parts" in done.stdout and "2 node(s)" in done.stdout, done.stdout
    assert "parts 3/3  series 9" in done.stderr  # plain progress lines: not a terminal
    forecaster = Forecaster(Job(str(repository), "etth1-rsa", horizon=24, levels=(80.0,), threads=1))
    for rel in parts:
        written = pq.read_table(tmp_path / "out" / (rel.rsplit(".", 1)[0] + ".parquet"))
        assert written.equals(forecaster.score_table(_read(tmp_path / "in" / rel))), rel


def _read(path: Path):
    from batch import io

    return io.read_part(*io.open_fs(str(path)))
