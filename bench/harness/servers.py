"""Servers: a service or peer process started on a free 127.0.0.1 port, polled on GET /readyz, stopped.

- `serve`: any command (given the port) for the duration of a `with` block; its own process group, so
  that whatever it leaves behind after a bounded stop (LitServe's workers, a supervisor's children) is
  killed with it; its output in a log file, not a pipe (nobody reads it while the load runs).
- `local_server`: the service, `python -m app`, with a clean RSA_* environment plus the caller's.
- `peer_server`: a bench.peers module (`--port`, `--model-dir`, `--device`).
- `PeerPackages`: packages a peer needs that live apart from .venv; never installed here: a benchmark
  reports the peer as skipped, with `install_command`, when they are missing.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness import REPO

HOST = "127.0.0.1"
KEPT_BYTES = 64 * 1024


@dataclass
class LocalServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    exit_code: int | None = None  # set once it has stopped
    kept: str | None = None  # the log's last bytes, once it has stopped and its folder is gone

    def output(self, tail: int = 4000) -> str:
        if self.kept is not None:
            return self.kept[-tail:]
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of a process's children."""
    out = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid=,args="], capture_output=True, text=True)
    rows = [line.strip().split(None, 1) for line in out.stdout.splitlines() if line.strip()]
    return [(int(pid_), args) for pid_, args in rows]


def exited(pid: int) -> bool:
    """Gone, or a zombie whose every thread has exited. A zombie leader alone is not enough: its other
    threads still hold the process's files (its listening socket among them) while they exit. Seen on the
    quiet 2-core machine (2026-12-06, a front end of 7 threads killed by SIGKILL, `ss` sampled): the
    socket still listening when the leader first showed Z with 5 threads left, gone 18 ms later; longer
    under load. A connection the kernel hands that socket meanwhile is reset."""
    try:
        zombie = "\tZ" in Path(f"/proc/{pid}/status").read_text().split("State:")[1][:4]
        return zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except (FileNotFoundError, IndexError):
        return True


def front_ends_of(supervisor: int) -> list[int]:
    """The live front ends of a `python -m app` supervisor (RSA_WORKERS > 1): its children but the engine,
    a killed one not yet reaped left out."""
    return [pid for pid, args in children(supervisor) if "app.engine" not in args and not exited(pid)]


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` holds a TCP socket listening on `port` (IPv4 or IPv6; Linux's /proc). A front
    end of the supervisor's counts as serving from then on: one still starting holds no such socket, and
    the kernel sends it no connection."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()  # sl, local address:port (hex), remote, state (0A: LISTEN), ..., inode
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    try:
        return any(os.readlink(fd) in inodes for fd in Path(f"/proc/{pid}/fd").iterdir())
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False


def is_ready(port: int) -> bool:
    # http.client, not urllib: urllib would honour *_proxy variables, and this traffic stays on loopback.
    conn = http.client.HTTPConnection(HOST, port, timeout=2)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def stop(process: subprocess.Popen[bytes], sig: signal.Signals, timeout_s: float) -> None:
    """`sig`, then a kill after `timeout_s`; then the rest of its process group (ours alone)."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):  # nothing was left: the usual case
        os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def serve(
    command: Sequence[str],
    port: int,
    env: Mapping[str, str],
    *,
    name: str,
    ready_timeout_s: float = 90.0,
    stop_timeout_s: float = 40.0,
    stop_signal: signal.Signals = signal.SIGTERM,
) -> Iterator[LocalServer]:
    """`command` (which listens on `port`) until /readyz is 200; `stop_signal` on exit.

    `exit_code` is set once it has stopped (after a bounded wait, killed if need be: then it is the
    kill's negative signal number, never 0), and the log's last 64 KiB kept in memory (`output()`): its
    folder is removed, so that a suite of benches and tests leaves nothing behind in the temp folder.
    Not ready in time, or exited first: RuntimeError.
    """
    log = Path(tempfile.mkdtemp(prefix="bench-")) / f"{name}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            list(command),
            cwd=REPO,
            env=dict(env),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    live = LocalServer(f"http://{HOST}:{port}", process, log)
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not is_ready(port):
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode} before ready:\n{live.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after {ready_timeout_s:.0f} s:\n{live.output()}")
            time.sleep(0.1)
        yield live
    finally:
        stop(process, stop_signal, stop_timeout_s)
        live.exit_code = process.returncode
        live.kept = live.output(tail=KEPT_BYTES)
        shutil.rmtree(log.parent, ignore_errors=True)


def local_server(
    env: Mapping[str, str] | None = None, *, ready_timeout_s: float = 90.0, stop_timeout_s: float = 40.0
) -> contextlib.AbstractContextManager[LocalServer]:
    """`sys.executable -m app` on a free port. Its environment is ours without RSA_* variables (a stray
    setting must not change what is measured), plus `env`. No drain delay unless `env` sets one: no load
    balancer is told of its stop, so the default 5 s would only lengthen each run."""
    port = free_port()
    server_env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    server_env.update({"RSA_LOG_LEVEL": "WARNING", "RSA_DRAIN_DELAY_S": "0", **(env or {})})
    server_env.update({"RSA_HOST": HOST, "RSA_PORT": str(port)})
    return serve(
        [sys.executable, "-m", "app"],
        port,
        server_env,
        name="the service",
        ready_timeout_s=ready_timeout_s,
        stop_timeout_s=stop_timeout_s,
    )


@dataclass(frozen=True)
class PeerPackages:
    """Pinned packages installed apart from .venv (`pip install --target`), put on PYTHONPATH for one
    peer's process only."""

    target: Path
    requirements: Path

    def pins(self) -> list[tuple[str, str]]:
        lines = self.requirements.read_text().splitlines()
        return [(n, v) for n, v in (line.split("==") for line in lines if line and not line.startswith("#"))]

    def missing(self) -> list[str]:
        return [f"{n}=={v}" for n, v in self.pins() if not (self.target / f"{n}-{v}.dist-info").is_dir()]

    @property
    def install_command(self) -> str:
        target, requirements = (p.relative_to(REPO) if p.is_relative_to(REPO) else p for p in self.paths)
        return f".venv/bin/python -m pip install --no-deps --target {target} -r {requirements}"

    @property
    def paths(self) -> tuple[Path, Path]:
        return self.target, self.requirements

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        out = dict(env)
        out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.target), env.get("PYTHONPATH")]))
        return out


def peer_server(
    module: str,
    model_dir: Path,
    device: str,
    *,
    packages: PeerPackages | None = None,
    stop_signal: signal.Signals = signal.SIGTERM,
    ready_timeout_s: float = 90.0,
    stop_timeout_s: float = 40.0,
) -> contextlib.AbstractContextManager[LocalServer]:
    """A bench.peers module on a free port, `packages` on its PYTHONPATH."""
    port = free_port()
    env = os.environ.copy() if packages is None else packages.environ(os.environ)
    command = [sys.executable, "-m", module, "--port", str(port), "--model-dir", str(model_dir)]
    return serve(
        [*command, "--device", device],
        port,
        env,
        name=module.rsplit(".", 1)[-1],
        ready_timeout_s=ready_timeout_s,
        stop_timeout_s=stop_timeout_s,
        stop_signal=stop_signal,
    )


def served_repository(model_dir: Path, versions: Iterable[int]) -> Path:
    """A model repository of just these versions of `model_dir` (links): a service loads only what is
    measured."""
    repository = Path(tempfile.mkdtemp(prefix="bench-repo-"))
    (repository / model_dir.name).mkdir()
    for version in set(versions):
        link = repository / model_dir.name / str(version)
        link.symlink_to(model_dir.resolve() / str(version), target_is_directory=True)
    return repository
