"""A local Ray of the batch commands listens on loopback only (issue 46, item 10): once it has started and
run a task, no listening TCP socket of this process or of any process under it (the GCS, the raylet,
the workers, the agents, the autoscaler's metrics server) is on 0.0.0.0 or :: (nor on any other address
but loopback), read from /proc/net/tcp and tcp6 by the sockets' inodes, within a bounded time."""

from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path

import pytest
import ray

from batch.score import init_local_ray
from bench.loadgen import free_port
from tests.utils.speed import scaled

LISTEN = "0A"  # the TCP state in /proc/net/tcp


def descendants(root: int) -> set[int]:
    """`root` and every process under it now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def socket_inodes(pids: set[int]) -> dict[int, int]:
    """inode -> pid of each socket the processes hold."""
    inodes = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes[int(target[8:-1])] = pid
    return inodes


def address_of(hex_address: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """A /proc/net/tcp{,6} local address (host-order 32-bit words in hex) and port."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, int(port, 16)
    return ip, int(port, 16)


def listening(pids: set[int]) -> list[tuple[str, str, int]]:
    """(command, address, port) of every listening TCP socket of the processes."""
    inodes = socket_inodes(pids)
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == LISTEN and inode in inodes:
                ip, port = address_of(local)
                try:
                    command = Path(f"/proc/{inodes[inode]}/comm").read_text().strip()
                except OSError:
                    command = "?"
                found.append((command, str(ip), port))
    return found


def test_address_parsing() -> None:
    assert address_of("0100007F:1F90") == (ipaddress.ip_address("127.0.0.1"), 8080)
    assert address_of("00000000:0050") == (ipaddress.ip_address("0.0.0.0"), 80)
    assert address_of("00000000000000000000000000000000:0050")[0] == ipaddress.ip_address("::")
    assert address_of("00000000000000000000000001000000:0050")[0] == ipaddress.ip_address("::1")
    mapped = "0000000000000000FFFF00000100007F:0050"  # ::ffff:127.0.0.1
    assert address_of(mapped)[0] == ipaddress.ip_address("127.0.0.1")


def test_a_local_ray_listens_on_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # The autoscaler's metrics server on a port of the test's own (its default, 44217, may be another
    # Ray's on this machine), so that the test knows it has started.
    metrics = free_port()
    monkeypatch.setenv("AUTOSCALER_METRIC_PORT", str(metrics))
    deadline = time.monotonic() + scaled(120)
    init_local_ray(num_cpus=1, configure_logging=False)
    try:

        @ray.remote
        def pid() -> int:
            return os.getpid()

        worker = ray.get(pid.remote(), timeout=max(1.0, deadline - time.monotonic()))
        seen: list[tuple[str, str, int]] = []
        while True:
            pids = descendants(os.getpid())
            assert worker in pids  # the worker runs under this process: its sockets are counted
            seen = listening(pids)
            wild = [s for s in seen if not ipaddress.ip_address(s[1]).is_loopback]
            assert not wild, f"listening beyond loopback: {wild} (all: {seen})"
            if any(port == metrics for _, _, port in seen):
                break
            assert time.monotonic() < deadline, f"no autoscaler metrics server on :{metrics}; {seen}"
            time.sleep(0.5)
        commands = {command for command, _, _ in seen}
        assert {"gcs_server", "raylet"} <= commands, seen
    finally:
        ray.shutdown()
    # The switch that keeps it on loopback is this job's only: the environment is as it was.
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ
