"""A fleet on loopback: what the Kubernetes manifests rely on, shown with real processes.

Three replicas (`python -m app`, each on its own port, one intra-op thread and one single-threaded call
at a time, as the manifests' CPU request of one would give them) behind HAProxy from Debian's packages,
which health-checks `/readyz` as a Service's endpoints follow readiness; Prometheus (Debian's) scrapes
all three, each target labelled with the `namespace` and `pod` that Kubernetes' scrape discovery would
attach. Then:

- a rolling restart under continuous load: SIGTERM one replica, wait for its exit (0), start it again,
  wait until it is ready and back in HAProxy's rotation, then the next; HAProxy retries nothing, so a
  request that reached a replica after it stopped accepting would fail. Every answer is checked: status
  200 and the forecast equal to ONNX Runtime's, computed here (bench.loadgen's workload and checker).
- a load step: the ScaledObject's own query, read from the rendered gpu overlay, run against that
  Prometheus, is below the threshold when idle, above it under load and below it again once idle; the
  replica count KEDA would ask for is printed for each phase.

Bounded: a fixed count of requests (and a time limit) per load phase, everything on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import pytest

from bench.loadgen import LoadResult, Workload, free_port, prepare_forecast_workload, run_load
from tests.deploy.conftest import need_tool
from tests.deploy.manifests import find, prometheus_trigger, render
from tests.deploy.test_prometheus import Proc, start, wait_for
from tests.utils.speed import scaled

ROOT = Path(__file__).resolve().parents[2]
MODEL = "etth1-rsa"
VERSION = max(int(p.name) for p in (ROOT / "model_repository" / MODEL).iterdir() if p.name.isdigit())
REPLICAS = 3
NAMESPACE = "rsa"  # the labels Kubernetes' pod discovery gives each target, as the query selects them
POD_PREFIX = "rsa-forecast-7d9f8c6b5-"
# Short, so that the test is short: HAProxy checks every 200 ms and takes a replica out at the first 503,
# well within the drain (the manifests: every 2 s, out after 2, within a 5 s drain delay). A check that
# takes longer than CHECK_TIMEOUT_S fails too: both it and the drain delay are stretched on a busy
# machine (tests/utils/speed.py), where /readyz answered past HAProxy's 200 ms (its default check
# timeout, the interval), every replica left the rotation and HAProxy answered 503 itself. The drain
# still outlasts two intervals and a check: 0.4 + 0.5 s < 1.5 s, at any slowdown.
DRAIN_DELAY_S = 1.5
CHECK_INTERVAL_MS = 200
CHECK_TIMEOUT_S = 0.5
SCRAPE_INTERVAL = "500ms"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0  # the drain delay + the service's graceful shutdown (20 s) + a margin

# Continuous load during the rolling restart: one-series requests from 4 connections, in rounds of
# ROLLING_ROUND requests, until the restart is over (at most ROLLING_MAX_ROUNDS).
ROLLING_CONCURRENCY, ROLLING_ROUND, ROLLING_MAX_ROUNDS = 4, 200, 200
# The load step's heavy phase: LOAD_REQUESTS requests from 16 connections, each of 14 series (bodies under
# 1 MiB, so parsed on the event loop), 8-12 s here; no phase sends past LOAD_SECONDS (a slower machine).
LOAD_CONCURRENCY, LOAD_SERIES, LOAD_REQUESTS, LOAD_SECONDS = 16, 14, 120, 20.0
LIGHT_REQUESTS = 1500  # one series each, from ROLLING_CONCURRENCY connections: about 3 s here


@dataclass
class Fleet:
    work: Path
    ports: list[int]
    replicas: list[Proc]
    haproxy: Proc
    lb_url: str
    prometheus: Proc
    prometheus_url: str
    env: dict[str, str]
    restarts: int = 0
    log: list[str] = field(default_factory=list)

    def restart_replica(self, i: int) -> None:
        self.restarts += 1
        self.replicas[i] = _replica(self.work, self.env, self.ports[i], i, self.restarts)

    def wait_ready(self, i: int) -> None:
        url = f"http://127.0.0.1:{self.ports[i]}/readyz"
        wait_for(
            f"replica {i} ready",
            lambda: httpx.get(url, timeout=2).status_code == 200,
            [self.replicas[i]],
            START_TIMEOUT_S,
        )

    def servers_up(self) -> int:
        """Replicas in HAProxy's rotation (its health checks of /readyz)."""
        return int(httpx.get(f"{self.lb_url}/lb/up", timeout=2).text)

    def query(self, expr: str) -> float | None:
        """An instant query's single value (None: empty)."""
        r = httpx.get(f"{self.prometheus_url}/api/v1/query", params={"query": expr}, timeout=5)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", r.text
        result = body["data"]["result"]
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_for_scrape_after(self, t: float) -> None:
        """Until Prometheus holds a sample of every replica scraped after wall-clock time t."""
        procs = [*self.replicas, self.prometheus]
        wait_for(
            f"scrapes after {t:.1f}",
            lambda: (
                (self.query('min(timestamp(up{job="rsa"}) and up{job="rsa"} == 1)') or 0) > t
                and self.query('count(up{job="rsa"} == 1)') == REPLICAS
            ),
            procs,
            20,
        )


def _replica(work: Path, env: dict[str, str], port: int, i: int, generation: int) -> Proc:
    log = work / f"replica-{i}-{generation}.log"
    return start(f"replica {i}", [sys.executable, "-m", "app"], log, {**env, "RSA_PORT": str(port)})


def _haproxy_config(port: int, replica_ports: list[int]) -> str:
    servers = "\n".join(f"    server replica-{i} 127.0.0.1:{p} check" for i, p in enumerate(replica_ports))
    return f"""global
    maxconn 256

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # A Service does not resend a request: neither does this load balancer.
    retries 0

frontend fleet
    bind 127.0.0.1:{port}
    # How many replicas are in rotation, for the test to wait on.
    http-request return status 200 content-type text/plain lf-string "%[nbsrv(replicas)]" if {{ path /lb/up }}
    default_backend replicas

backend replicas
    balance leastconn
    # A new connection per request to a replica in rotation: rotation follows readiness, request by request.
    option http-server-close
    option httpchk GET /readyz
    http-check expect status 200
    timeout check {round(scaled(CHECK_TIMEOUT_S) * 1000)}ms
    default-server inter {CHECK_INTERVAL_MS}ms fall 1 rise 1
{servers}
"""


def _prometheus_config(replica_ports: list[int]) -> str:
    targets = "\n".join(
        f'      - targets: ["127.0.0.1:{p}"]\n'
        f"        labels: {{namespace: {NAMESPACE}, pod: {POD_PREFIX}{i}}}"
        for i, p in enumerate(replica_ports)
    )
    return f"""global:
  scrape_interval: {SCRAPE_INTERVAL}
  scrape_timeout: {SCRAPE_INTERVAL}
scrape_configs:
  - job_name: rsa
    metrics_path: /metrics
    static_configs:
{targets}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    haproxy, prometheus = need_tool("haproxy"), need_tool("prometheus")
    work = tmp_path_factory.mktemp("fleet")
    ports = [free_port() for _ in range(REPLICAS)]
    lb_port, prom_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    env.update(
        {
            "RSA_HOST": "127.0.0.1",
            "RSA_MODEL_REPOSITORY": str(ROOT / "model_repository"),
            "RSA_DEVICE": "cpu",
            "RSA_INTRA_OP_THREADS": "1",
            "RSA_SINGLE_THREAD_CALLS": "1",
            "RSA_DRAIN_DELAY_S": str(scaled(DRAIN_DELAY_S)),
            "RSA_LOG_LEVEL": "WARNING",
        }
    )
    (work / "haproxy.cfg").write_text(_haproxy_config(lb_port, ports), encoding="utf-8")
    (work / "prometheus.yml").write_text(_prometheus_config(ports), encoding="utf-8")
    started: list[Proc] = []
    f: Fleet | None = None
    try:
        started += [_replica(work, env, port, i, 0) for i, port in enumerate(ports)]
        lb = start("haproxy", [haproxy, "-db", "-f", str(work / "haproxy.cfg")], work / "haproxy.log")
        started.append(lb)
        server = start(
            "prometheus",
            [
                prometheus,
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            work / "prometheus.log",
        )
        started.append(server)
        lb_url, prom_url = f"http://127.0.0.1:{lb_port}", f"http://127.0.0.1:{prom_port}"
        f = Fleet(work, ports, started[:REPLICAS], lb, lb_url, server, prom_url, env)
        for i in range(REPLICAS):
            f.wait_ready(i)
        procs = [*f.replicas, f.haproxy, f.prometheus]
        wait_for("HAProxy: every replica in rotation", lambda: f.servers_up() == REPLICAS, procs, 10)
        wait_for(
            "Prometheus ready",
            lambda: httpx.get(f"{f.prometheus_url}/-/ready", timeout=1).status_code == 200,
            procs,
            START_TIMEOUT_S,
        )
        f.wait_for_scrape_after(time.time())
        yield f
    finally:
        procs = [*started, *(f.replicas if f is not None else [])]
        for proc in procs:  # all at once: each replica drains for DRAIN_DELAY_S
            if proc.process.poll() is None:
                proc.process.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.stop()


@pytest.fixture(scope="module")
def query() -> tuple[str, float, int, int]:
    """The gpu overlay's ScaledObject: its PromQL, threshold and replica bounds, as rendered."""
    so = find(render("gpu"), "ScaledObject")
    trigger = prometheus_trigger(so)
    return (
        trigger["query"],
        float(trigger["threshold"]),
        so["spec"]["minReplicaCount"],
        so["spec"]["maxReplicaCount"],
    )


def keda_replicas(value: float, threshold: float, lo: int, hi: int) -> int:
    """What the HPA behind KEDA's AverageValue trigger asks for: ceil(value / threshold), within bounds."""
    return min(hi, max(lo, math.ceil(value / threshold)))


def _load(url: str, work: Workload, *, requests: int, concurrency: int, time_limit_s: float) -> LoadResult:
    return asyncio.run(
        run_load(
            url + work.path,
            work.bodies,
            work.checker,
            requests=requests,
            concurrency=concurrency,
            time_limit_s=time_limit_s,
            series_per_request=len(work.checker.ids[0]),
        )
    )


def _report(capsys: pytest.CaptureFixture[str], text: str) -> None:
    """Printed past pytest's capture: the numbers are the point of these tests."""
    with capsys.disabled():
        print(f"\n{text}")


def test_rolling_restart_under_load_loses_nothing(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    work = prepare_forecast_workload(MODEL, VERSION, windows=32)
    results: list[LoadResult] = []
    done = threading.Event()

    def load() -> None:
        for _ in range(ROLLING_MAX_ROUNDS):
            results.append(
                _load(
                    fleet.lb_url,
                    work,
                    requests=ROLLING_ROUND,
                    concurrency=ROLLING_CONCURRENCY,
                    time_limit_s=30,
                )
            )
            if done.is_set():
                return

    loader = threading.Thread(target=load, name="rolling-load")
    start_t = time.monotonic()
    loader.start()
    try:
        time.sleep(0.5)  # the load runs before the first replica goes
        exits = []
        for i in range(REPLICAS):
            old = fleet.replicas[i]
            old.process.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            exits.append(old.process.wait(timeout=scaled(STOP_TIMEOUT_S)))
            stopped_s = time.monotonic() - t0
            fleet.restart_replica(i)
            fleet.wait_ready(i)
            wait_for(
                f"replica {i} back in rotation",
                lambda: fleet.servers_up() == REPLICAS,
                [fleet.haproxy, *fleet.replicas],
                10,
            )
            fleet.log.append(
                f"replica {i}: exit {exits[-1]} {stopped_s:.1f} s after SIGTERM, back in "
                f"{time.monotonic() - t0:.1f} s"
            )
            assert loader.is_alive(), "the load stopped before the restart was over"
    finally:
        done.set()
        loader.join(timeout=60)
    elapsed = time.monotonic() - start_t
    assert not loader.is_alive()
    sent = sum(r.completed for r in results)
    errors = {k: sum(r.errors.get(k, 0) for r in results) for r in results for k in r.errors}
    latencies = np.concatenate([r.latencies_ms for r in results])
    checked = sum(r.checked for r in results)
    _report(
        capsys,
        f"rolling restart of {REPLICAS} replicas under load ({ROLLING_CONCURRENCY} connections, one series"
        f" per request) in {elapsed:.1f} s: {sent} requests sent, {sum(errors.values())} failed,"
        f" {checked} answers checked against ONNX Runtime; p50 {np.percentile(latencies, 50):.1f} ms, "
        f"p99 {np.percentile(latencies, 99):.1f} ms, max {latencies.max():.1f} ms\n  "
        + "\n  ".join(fleet.log),
    )
    assert exits == [0] * REPLICAS
    assert errors == {}, [s for r in results for s in r.error_samples]
    assert all(r.passed for r in results)  # every round sent all its requests, none past its time limit
    assert checked == sent > 0


def _sampled(
    fleet: Fleet, expr: str, work: Workload, requests: int, concurrency: int
) -> tuple[list[float], LoadResult]:
    """The query's value about once per scrape while a bounded load runs, and the load's result."""
    result: list[LoadResult] = []
    loader = threading.Thread(
        target=lambda: result.append(
            _load(fleet.lb_url, work, requests=requests, concurrency=concurrency, time_limit_s=LOAD_SECONDS)
        )
    )
    values = []
    loader.start()
    while loader.is_alive():
        time.sleep(0.5)
        values.append(_value(fleet, expr))
    loader.join()
    [load] = result
    assert load.error_count == 0 and load.checked == load.completed > 0, load.error_samples
    return values, load


def test_backlog_query_crosses_the_threshold_under_load(
    fleet: Fleet, query: tuple[str, float, int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """Idle, light load (one series per request from 4 connections), heavy load (14 series per request
    from 16), idle again: the query stays under the threshold but under the heavy load."""
    expr, threshold, lo, hi = query
    light = prepare_forecast_workload(MODEL, VERSION, windows=16)
    heavy = prepare_forecast_workload(MODEL, VERSION, windows=16, series_per_request=LOAD_SERIES)
    fleet.wait_for_scrape_after(time.time() + 1)  # the rolling restart's load is over
    phases: dict[str, list[float]] = {"idle": [_value(fleet, expr)]}
    phases["light load"], light_load = _sampled(fleet, expr, light, LIGHT_REQUESTS, ROLLING_CONCURRENCY)
    phases["heavy load"], heavy_load = _sampled(fleet, expr, heavy, LOAD_REQUESTS, LOAD_CONCURRENCY)
    fleet.wait_for_scrape_after(time.time() + 0.5)
    phases["idle again"] = [_value(fleet, expr)]

    lines = [f"load step: {expr}  (threshold {threshold:g} s, replicas {lo}..{hi})"]
    for phase, values in phases.items():
        peak, median = max(values), float(np.median(values))
        lines.append(
            f"  {phase:>10}: {len(values)} values, max {peak:.3f}, median {median:.3f}"
            f" -> KEDA asks for {keda_replicas(peak, threshold, lo, hi)} replicas"
            f" (at the median {keda_replicas(median, threshold, lo, hi)})"
        )
    for name, load in (("light", light_load), ("heavy", heavy_load)):
        lines.append(
            f"  {name} load: {load.completed} requests of {load.series_per_request} series from"
            f" {load.concurrency} connections in {load.duration_s:.1f} s, {load.error_count} failed,"
            f" p50 {load.percentile_ms(50):.0f} ms, p99 {load.percentile_ms(99):.0f} ms"
        )
    rss = ", ".join(f"{_peak_rss_mb(r.process.pid):.0f}" for r in fleet.replicas)
    lines.append(f"  peak resident memory per replica: {rss} MB")
    _report(capsys, "\n".join(lines))
    assert max(phases["idle"]) < threshold
    assert max(phases["light load"]) < threshold
    assert max(phases["heavy load"]) > threshold
    assert max(phases["idle again"]) < threshold
    assert keda_replicas(max(phases["heavy load"]), threshold, lo, hi) > lo


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    [line] = [x for x in status.splitlines() if x.startswith("VmHWM:")]
    return int(line.split()[1]) / 1024


def _value(fleet: Fleet, expr: str) -> float:
    value = fleet.query(expr)
    # Every replica exports the gauge once its models are ready: an empty answer would be a broken query.
    assert value is not None, f"{expr}: no data"
    return value
