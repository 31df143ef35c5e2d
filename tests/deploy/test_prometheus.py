"""The metrics as a real Prometheus sees them: `python -m app` on the shipped models, scraped by the
`prometheus` binary running the stack's own scrape file (deploy/prometheus/prometheus.yml, copied byte for
byte next to a targets file naming the test's service), every number checked through Prometheus' query
API after known traffic, and every query of the Grafana dashboard run against it.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.loadgen import free_port
from tests.deploy.conftest import need_tool
from tests.deploy.test_compose import PROMETHEUS_CONFIG, dashboard_queries, load_dashboard
from tests.utils.speed import scaled

ROOT = Path(__file__).resolve().parents[2]
MODEL = "etth1-rsa"
EXAMPLE = json.loads((ROOT / "docs" / "examples" / "forecast_request.json").read_text(encoding="utf-8"))
EXAMPLE_START = EXAMPLE["series"][0]["start"]
JSON_HEADERS = {"content-type": "application/json"}

# A queue of 4 series and a 250 ms batch wait: the first request of a burst holds the batch open long
# enough for the rest of the burst to find the queue full (503 overloaded).
MAX_QUEUE_ROWS = 4
MAX_BATCH_WAIT_MS = 250
BURST = 24  # concurrent requests per overload round
# Series per burst request: three such requests overflow MAX_QUEUE_ROWS, two merge. With one series each, the
# default model's fast calls (L = 512, last step only) could drain the queue as fast as 60 KB bodies arrive.
BURST_SERIES = 2
MAX_BURSTS = 5

ROUNDS = 2  # of the whole mix below, each followed by a scrape (see the `traffic` fixture)
N_GOOD_LATEST, N_GOOD_V1, SERIES_PER_GOOD = 4, 2, 2
# The shipped versions as the repository has them; "latest" is the highest.
VERSIONS = sorted(
    (p.name for p in (ROOT / "model_repository" / "etth1-rsa").iterdir() if p.name.isdigit()), key=int
)
LATEST = VERSIONS[-1]
N_BAD_JSON, N_BAD_SHAPE, N_UNKNOWN_MODEL, N_UNKNOWN_VERSION = 2, 2, 2, 1
FORECAST_ENDPOINTS = 'endpoint=~"/v1/models/.*forecast"'
START_TIMEOUT_S = 30.0
SCRAPE_WAIT_S = 20.0  # several scrape intervals (2 s) and a slow first target discovery


# -- processes -------------------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"{self.name} exited with {self.process.returncode}:\n{self.output()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start(name: str, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> Proc:
    with log.open("wb") as sink:
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    return Proc(name, process, log)


def wait_for(what: str, check: Callable[[], bool], procs: list[Proc], timeout_s: float) -> None:
    """Poll `check` (connection errors count as not yet) until it holds, a process dies, or time runs out
    (`timeout_s` on a quiet machine, stretched on a busy one: tests/utils/speed.py)."""
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        for proc in procs:
            proc.check_alive()
        try:
            if check():
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name}\n{p.output()[-3000:]}" for p in procs)
            pytest.fail(f"{what}: not within {timeout_s:.0f} s\n{logs}")
        time.sleep(0.2)


# -- Prometheus' HTTP API --------------------------------------------------------------------------


@dataclass
class Prometheus:
    url: str
    service_url: str
    service: Proc
    server: Proc
    config: Path  # the copy of the scrape file it runs

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector: [{"metric": {labels}, "value": [t, "v"]}, ...]."""
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", f"{expr}: {r.text}"
        assert body["data"]["resultType"] == "vector", expr
        return list(body["data"]["result"])

    def values(self, expr: str, by: str) -> dict[str, float]:
        """{value of label `by`: sample} of an instant query."""
        samples = self.query(expr)
        result = {s["metric"].get(by, ""): float(s["value"][1]) for s in samples}
        assert len(result) == len(samples), f"{expr}: label {by} does not tell the series apart"
        return result

    def scalar(self, expr: str) -> float:
        """The single sample of a query; 0 when the result is empty (a series not yet created)."""
        result = self.query(expr)
        assert len(result) <= 1, f"{expr}: {result}"
        return float(result[0]["value"][1]) if result else 0.0

    def wait_for_scrape_after(self, t: float) -> None:
        """Until the service's latest sample was scraped after wall-clock time t."""
        wait_for(
            f"a scrape of the service after {t:.1f}",
            lambda: self.scalar('max(timestamp(up{job="rsa"}))') > t,
            [self.service, self.server],
            SCRAPE_WAIT_S,
        )


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    binary = need_tool("prometheus")
    work = tmp_path_factory.mktemp("prometheus")
    port, prom_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    env.update(
        {
            "RSA_HOST": "127.0.0.1",
            "RSA_PORT": str(port),
            "RSA_MODEL_REPOSITORY": str(ROOT / "model_repository"),
            # etth1-rsa alone: the repository's pretrained models (docs/pretrained.md) would add model
            # labels and info series that this module's traffic and checks (all etth1-rsa's) do not expect
            "RSA_MODELS": MODEL,
            "RSA_DEVICE": "auto",  # CUDA when this build offers it; a machine without a GPU falls back to CPU
            "RSA_INTRA_OP_THREADS": "1",
            "RSA_MAX_QUEUE_ROWS": str(MAX_QUEUE_ROWS),
            "RSA_MAX_BATCH_WAIT_MS": str(MAX_BATCH_WAIT_MS),
            "RSA_LOG_LEVEL": "info",
            "RSA_DRAIN_DELAY_S": "0",  # no load balancer to tell: stop at once
        }
    )
    service = start("service", [sys.executable, "-m", "app"], work / "service.log", env)
    procs = [service]
    try:
        service_url = f"http://127.0.0.1:{port}"
        wait_for(
            "service ready",
            lambda: httpx.get(f"{service_url}/readyz", timeout=1).status_code == 200,
            procs,
            START_TIMEOUT_S,
        )
        # The stack's scrape file, unchanged; only the targets file is the test's own.
        shutil.copyfile(PROMETHEUS_CONFIG, work / "prometheus.yml")
        (work / "targets").mkdir()
        (work / "targets" / "rsa.yml").write_text(f'- targets: ["127.0.0.1:{port}"]\n', encoding="utf-8")
        server = start(
            "prometheus",
            [
                binary,
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            work / "prometheus.log",
        )
        procs.append(server)
        prom = Prometheus(
            f"http://127.0.0.1:{prom_port}", service_url, service, server, work / "prometheus.yml"
        )
        wait_for(
            "Prometheus ready",
            lambda: httpx.get(f"{prom.url}/-/ready", timeout=1).status_code == 200,
            procs,
            START_TIMEOUT_S,
        )
        wait_for("target up", lambda: prom.scalar('up{job="rsa"}') == 1, procs, SCRAPE_WAIT_S)
        yield prom
    finally:
        for proc in reversed(procs):
            proc.stop()


# -- the traffic -----------------------------------------------------------------------------------


@dataclass
class Traffic:
    """What the client sent and got, and the counters as Prometheus saw them before the traffic."""

    codes: Counter[str] = field(default_factory=Counter)  # status -> responses, forecast endpoints
    by_endpoint: Counter[str] = field(default_factory=Counter)  # route template -> responses
    ok_by_version: Counter[str] = field(default_factory=Counter)
    rows_by_version: Counter[str] = field(default_factory=Counter)
    overloaded: int = 0
    unmatched: int = 0
    before: dict[str, dict[str, float]] = field(default_factory=dict)


# Counters read before and after the traffic: (query, label that tells its series apart).
COUNTERS = {
    "requests": (f"sum by (code) (rsa_requests_total{{{FORECAST_ENDPOINTS}}})", "code"),
    "ok_by_version": (
        f'sum by (version) (rsa_requests_total{{{FORECAST_ENDPOINTS}, code="200"}})',
        "version",
    ),
    "rejections": (f"sum by (reason) (rsa_request_rejections_total{{{FORECAST_ENDPOINTS}}})", "reason"),
    "unmatched": ('sum by (reason) (rsa_request_rejections_total{endpoint="unmatched"})', "reason"),
    "unmatched_requests": ('sum by (code) (rsa_requests_total{endpoint="unmatched"})', "code"),
    "rows": ("sum by (version) (rsa_rows_total)", "version"),
    "batch_rows": ("sum by (version) (rsa_batch_rows_sum)", "version"),
    "session_calls": ("sum by (version) (rsa_batch_rows_count)", "version"),
    "queue_waits": ("sum by (version) (rsa_queue_wait_seconds_count)", "version"),
    "by_endpoint": (f"sum by (endpoint) (rsa_requests_total{{{FORECAST_ENDPOINTS}}})", "endpoint"),
    "durations": (
        f"sum by (endpoint) (rsa_request_duration_seconds_count{{{FORECAST_ENDPOINTS}}})",
        "endpoint",
    ),
}


def good_body(n_series: int) -> dict[str, Any]:
    """The README's example as n series, without its `level`: version 1 has no prediction intervals."""
    [series] = EXAMPLE["series"]
    point = {k: v for k, v in EXAMPLE.items() if k != "level"}
    return {**point, "series": [{**series, "id": f"s{i}"} for i in range(n_series)]}


@pytest.fixture(scope="module")
def traffic(prometheus: Prometheus) -> Traffic:
    """Two rounds of the same mix, each followed by a scrape, all of it counted.

    Two rounds because a series first exported by the traffic (the first 503, say) is only a single
    sample after one round, and rate() over a single sample is empty: the dashboard shows traffic that
    lasts, and so does the test. The counters' totals are checked over both rounds together."""
    t = Traffic()
    # The latest scrape saw none of this traffic: its counters are the baseline.
    t.before = {name: prometheus.values(q, by) for name, (q, by) in COUNTERS.items()}
    latest, pinned = "/v1/models/{name}/forecast", "/v1/models/{name}/versions/{version}/forecast"
    model_url = f"{prometheus.service_url}/v1/models"
    lock = threading.Lock()  # `counter[k] += 1` is not atomic across the burst's threads
    with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=BURST)) as client:

        def send(endpoint: str, path: str, **kwargs: Any) -> httpx.Response:
            r = client.post(f"{model_url}{path}", **kwargs)
            with lock:
                t.codes[str(r.status_code)] += 1
                t.by_endpoint[endpoint] += 1
            return r

        def answered(r: httpx.Response, version: str, n_series: int) -> None:
            assert r.status_code == 200 and r.json()["version"] == int(version), r.text
            t.ok_by_version[version] += 1
            t.rows_by_version[version] += n_series

        def burst() -> int:
            """BURST concurrent requests of BURST_SERIES series against the latest version's small queue;
            the 503s."""
            barrier = threading.Barrier(BURST)

            def one(_: int) -> httpx.Response:
                barrier.wait(timeout=10)  # all threads post at once
                return send(latest, f"/{MODEL}/forecast", json=good_body(BURST_SERIES))

            with ThreadPoolExecutor(BURST) as pool:
                responses = list(pool.map(one, range(BURST)))
            for r in responses:
                if r.status_code == 200:
                    answered(r, LATEST, BURST_SERIES)
                else:
                    assert r.status_code == 503 and r.json()["error"]["code"] == "overloaded", r.text
            return sum(r.status_code == 503 for r in responses)

        for _ in range(ROUNDS):
            for _ in range(N_GOOD_LATEST):
                r = send(latest, f"/{MODEL}/forecast", json=good_body(SERIES_PER_GOOD))
                answered(r, LATEST, SERIES_PER_GOOD)
            for _ in range(N_GOOD_V1):  # version 1 has no seasonal cycle; `start` only dates the forecast
                r = send(pinned, f"/{MODEL}/versions/1/forecast", json=good_body(SERIES_PER_GOOD))
                answered(r, "1", SERIES_PER_GOOD)
            for _ in range(N_BAD_JSON):
                r = send(latest, f"/{MODEL}/forecast", content=b'{"series": [', headers=JSON_HEADERS)
                assert r.status_code == 400, r.text
            for _ in range(N_BAD_SHAPE):  # 5 rows where the model needs 96
                body = {"series": [{"id": "short", "values": [[1.0] * 7] * 5, "start": EXAMPLE_START}]}
                assert send(latest, f"/{MODEL}/forecast", json=body).status_code == 422
            for _ in range(N_UNKNOWN_MODEL):  # a made-up name, which must not become a label value
                assert send(latest, "/no-such-model/forecast", json=good_body(1)).status_code == 404
            for _ in range(N_UNKNOWN_VERSION):
                assert send(pinned, f"/{MODEL}/versions/9/forecast", json=good_body(1)).status_code == 404
            assert client.get(f"{prometheus.service_url}/v1/no/such/path").status_code == 404
            t.unmatched += 1
            # Bursts until one of them overloads the queue (bounded: MAX_BURSTS per round).
            overloaded = 0
            for _ in range(MAX_BURSTS):
                overloaded = burst()
                t.overloaded += overloaded
                if overloaded:
                    break
            assert overloaded, f"no 503 in {MAX_BURSTS} bursts of {BURST}: the overload was not caused"
            # The middleware counts a request just after its response is sent: leave it a moment.
            prometheus.wait_for_scrape_after(time.time() + 0.5)
    return t


def increase(prometheus: Prometheus, traffic: Traffic, name: str) -> dict[str, float]:
    """A counter's rise over the traffic, per label value (a series created by the traffic rose from 0)."""
    query, by = COUNTERS[name]
    after = prometheus.values(query, by)
    before = traffic.before[name]
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) != 0}


# -- the checks ------------------------------------------------------------------------------------


def test_the_scrape_file_is_the_stacks_own(prometheus: Prometheus) -> None:
    [job] = prometheus.query('up{job="rsa"}')
    assert job["metric"]["instance"] == prometheus.service_url.removeprefix("http://")
    assert prometheus.config.read_bytes() == PROMETHEUS_CONFIG.read_bytes()


def test_requests_counted_exactly_per_status_code(prometheus: Prometheus, traffic: Traffic) -> None:
    assert increase(prometheus, traffic, "requests") == {k: float(v) for k, v in traffic.codes.items()}
    assert increase(prometheus, traffic, "ok_by_version") == {
        k: float(v) for k, v in traffic.ok_by_version.items()
    }
    by_endpoint = {k: float(v) for k, v in traffic.by_endpoint.items()}
    assert increase(prometheus, traffic, "by_endpoint") == by_endpoint
    # Every forecast request is also timed, whatever its status.
    assert increase(prometheus, traffic, "durations") == by_endpoint
    assert increase(prometheus, traffic, "unmatched_requests") == {"404": float(traffic.unmatched)}


def test_rejections_by_reason(prometheus: Prometheus, traffic: Traffic) -> None:
    assert increase(prometheus, traffic, "rejections") == {
        "overloaded": float(traffic.overloaded),
        "invalid_input": float(ROUNDS * (N_BAD_JSON + N_BAD_SHAPE)),
        "not_found": float(ROUNDS * (N_UNKNOWN_MODEL + N_UNKNOWN_VERSION)),
    }
    assert increase(prometheus, traffic, "unmatched") == {"not_found": float(traffic.unmatched)}


def test_label_values_never_come_from_the_client(prometheus: Prometheus, traffic: Traffic) -> None:
    series = prometheus.query('{__name__=~"rsa_.*"}')
    assert {s["metric"].get("model", "") for s in series} <= {"", MODEL}
    assert {s["metric"].get("version", "") for s in series} <= {"", *VERSIONS}
    endpoints = {s["metric"]["endpoint"] for s in series if "endpoint" in s["metric"]}
    assert "unmatched" in endpoints and not any("no-such" in e or "/no/" in e for e in endpoints)


def test_rows_and_batches_add_up(prometheus: Prometheus, traffic: Traffic) -> None:
    rows = {k: float(v) for k, v in traffic.rows_by_version.items()}
    assert increase(prometheus, traffic, "rows") == rows
    assert increase(prometheus, traffic, "batch_rows") == rows  # the batch histogram's sum is the rows
    # One queue-wait observation per accepted request; session calls merge requests, so fewer or as many.
    assert increase(prometheus, traffic, "queue_waits") == {
        k: float(v) for k, v in traffic.ok_by_version.items()
    }
    calls = increase(prometheus, traffic, "session_calls")
    assert calls.keys() == rows.keys()
    assert all(1 <= calls[v] <= traffic.ok_by_version[v] for v in calls)
    # The burst was merged: the latest version ran fewer calls than it answered requests.
    assert calls[LATEST] < traffic.ok_by_version[LATEST]


def test_p99_latency_is_a_finite_number_of_seconds(prometheus: Prometheus, traffic: Traffic) -> None:
    p99 = prometheus.scalar(
        "histogram_quantile(0.99, sum by (le) (rate(rsa_request_duration_seconds_bucket[1m])))"
    )
    assert math.isfinite(p99) and 0 < p99 <= 30


def test_models_loaded_and_their_provider(prometheus: Prometheus, traffic: Traffic) -> None:
    info = prometheus.query("rsa_model_info")
    versions = httpx.get(f"{prometheus.service_url}/v1/models/{MODEL}", timeout=5).json()["versions"]
    providers = {str(v["version"]): v["provider"] for v in versions}
    assert {s["metric"]["version"]: s["metric"]["provider"] for s in info} == providers
    if shutil.which("nvidia-smi") is None:  # no GPU here: whatever RSA_DEVICE=auto tried, it is the CPU
        assert set(providers.values()) == {"CPUExecutionProvider"}
    for s in info:
        assert s["metric"]["model"] == MODEL and float(s["value"][1]) == 1
        assert s["metric"]["onnxruntime_version"] and int(s["metric"]["horizon"]) > 0
        manifest = json.loads(
            (ROOT / "model_repository" / MODEL / s["metric"]["version"] / "manifest.json").read_text()
        )
        assert int(s["metric"]["input_length"]) == manifest["input_length"]
    states = prometheus.query("rsa_model_load_state")
    by_state = {(s["metric"]["version"], s["metric"]["state"]): float(s["value"][1]) for s in states}
    assert by_state == {
        (v, st): float(st == "ready") for v in providers for st in ("loading", "ready", "failed", "unloading")
    }


# -- the dashboard ---------------------------------------------------------------------------------


def promql(expr: str, model: str = ".*") -> str:
    """A dashboard query as Grafana sends it, with `$model` set to `model` (".*" is the All value)."""
    expr = expr.replace("$__rate_interval", "1m").replace("$__interval", "15s").replace("$__range", "5m")
    expr = re.sub(r"\$\{model(?::\w+)?\}|\$model\b", model, expr)
    assert "$" not in expr, f"a variable this test does not know: {expr}"
    return expr


# Panels whose value is 0 once the traffic is over: nothing in flight, nothing queued, no failed calls.
ZERO_AT_REST = {"In-flight requests", "Queue depth", "Session failures"}


def is_gpu_query(expr: str) -> bool:
    return "rsa_gpu_memory_" in expr


def test_the_dashboard_has_gpu_queries() -> None:
    assert sum(is_gpu_query(e) for _, e in dashboard_queries()) == 2


@pytest.mark.parametrize(
    ("panel", "expr"),
    [pytest.param(panel, expr, id=f"{panel} #{i}") for i, (panel, expr) in enumerate(dashboard_queries())],
)
def test_dashboard_query_returns_data(
    prometheus: Prometheus, traffic: Traffic, panel: str, expr: str
) -> None:
    cuda = "CUDAExecutionProvider" in {s["metric"]["provider"] for s in prometheus.query("rsa_model_info")}
    for model in (".*", MODEL):  # All, and one model picked in the variable
        result = prometheus.query(promql(expr, model))
        if is_gpu_query(expr) and not cuda:
            # No GPU: the series are absent, not zero, so the panel says "No data".
            assert result == [], f"{panel}: {result}"
            continue
        assert result, f"{panel}: no data for {promql(expr, model)}"
        values = [float(s["value"][1]) for s in result]
        # The panel shows the traffic: a positive number (zero where zero is the healthy value at rest).
        shown = [v for v in values if math.isfinite(v) and (v >= 0 if panel in ZERO_AT_REST else v > 0)]
        assert shown, f"{panel}: {promql(expr, model)} gave {values}"


def test_gpu_series_are_absent_without_cuda(prometheus: Prometheus, traffic: Traffic) -> None:
    providers = {s["metric"]["provider"] for s in prometheus.query("rsa_model_info")}
    gpu = prometheus.query('{__name__=~"rsa_gpu_.*"}')
    if "CUDAExecutionProvider" in providers:
        assert gpu, "the CUDA provider runs but no GPU memory is exported"
    else:
        assert gpu == []


def test_model_variable_lists_the_served_models(prometheus: Prometheus, traffic: Traffic) -> None:
    [variable] = load_dashboard()["templating"]["list"]
    match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", variable["query"]["query"])
    assert match is not None, variable["query"]
    metric, label = match.groups()
    assert {s["metric"][label] for s in prometheus.query(metric)} == {MODEL}
