"""Every Prometheus object of the service, in one place (names, labels, buckets, help text).

Fed from three sides, none of which imports prometheus-client itself:
- the HTTP middleware (`app.api.middleware.RequestMiddleware`) opens a `RequestRecord` per request and
  reports its endpoint, status and duration; the inference service notes which model version the request
  resolved to and the error rendering notes the error code, both through the record;
- the batchers call the per-version hooks from `batcher_hooks()` for every session call and request;
- `ServiceCollector` reads the model registry at scrape time (load state, model info, queued rows, GPU
  memory), so those values are exact and cost nothing between scrapes.

Every request metric carries the protocol it came by (`protocol_of`): `rsa_v1`, `oip_v2` (REST),
`oip_v2_grpc`, `kserve_timeseries`, or "" for the service's own probes, metrics and docs.

Label values never come from the client: `model` and `version` are set only once the registry knows
them, so requests for made-up model names cannot grow the number of series.

One process per container: the service runs one uvicorn process (`python -m app`), so there is no
multiprocess aggregation to do; scale with replicas and let Prometheus sum over instances.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import onnxruntime as ort
import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from app.core.context import RequestRecord
from app.core.errors import ModelNotReady
from app.inference.batching import Batch, WorkItem

if TYPE_CHECKING:
    from app.inference.registry import ModelRegistry

logger = logging.getLogger(__name__)

PREFIX = "rsa"

# Seconds, from about half a millisecond (a warm CPU session call of a small model) to the longest
# request timeout anyone should configure.
DURATION_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

# Error codes of the error body -> the `reason` label of the rejection counter.
REJECTION_REASONS = {
    "overloaded": "overloaded",
    "timeout": "timeout",
    "invalid_input": "invalid_input",
    "no_calibrated_intervals": "invalid_input",
    "interval_not_calibrated": "invalid_input",
    "malformed_json": "invalid_input",
    "payload_too_large": "invalid_input",
    "bad_request": "invalid_input",
    "method_not_allowed": "invalid_input",
    "unsupported_media_type": "invalid_input",
    "non_finite_result": "non_finite_result",
    "device_error": "device_error",
    "device_out_of_memory": "device_error",
    "model_not_ready": "not_ready",
    "model_not_found": "not_found",
    "version_not_found": "not_found",
    "not_found": "not_found",
    "unauthenticated": "unauthorized",
    "forbidden": "unauthorized",
}

# The reasons a request for a loaded version can be refused with (not_found needs no version).
PRECREATED_REASONS = ("overloaded", "timeout", "invalid_input", "not_ready")
LOAD_STATES = ("loading", "ready", "failed")
CUDA_PROVIDER = "CUDAExecutionProvider"
UNMATCHED = "unmatched"  # the endpoint label of a request no route matched
GRPC_SERVICE = "/inference.GRPCInferenceService/"  # the endpoint label of a gRPC call is its method path


def protocol_of(endpoint: str) -> str:
    """The protocol label of an endpoint (a route template or a gRPC method path)."""
    if endpoint.startswith(GRPC_SERVICE):
        return "oip_v2_grpc"
    if endpoint == "/v2" or endpoint.startswith("/v2/"):
        return "oip_v2"
    if endpoint.startswith("/v1/timeseries/"):
        return "kserve_timeseries"
    if endpoint.startswith("/v1/"):
        return "rsa_v1"
    return ""


# -- the metrics -----------------------------------------------------------------------------------


class Metrics:
    """The service's metrics on a registry of their own (one per app, so tests can build many apps)."""

    def __init__(self, max_batch_rows: int, model_endpoints: tuple[str, ...] = ()) -> None:
        # Route templates of the model endpoints: a loaded version's rejection series start at 0 on
        # each, because rate() cannot see the increment that creates a series (a short overload would
        # never show on a dashboard).
        self.model_endpoints = model_endpoints
        # `_created` series double the number of series and nothing on our dashboards reads them.
        prometheus_client.disable_created_metrics()
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        r = self.registry
        request_labels = ["endpoint", "protocol", "model", "version"]
        self.requests = Counter(
            f"{PREFIX}_requests",
            "Requests answered, by endpoint (route template or gRPC method), protocol, model, version and "
            "status code (HTTP status, or the gRPC status name).",
            [*request_labels, "code"],
            registry=r,
        )
        self.request_duration = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Whole request as the server sees it (body parsing, queue, session, encoding), in seconds.",
            request_labels,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        # Each request's label children, looked up once per label set: `labels()` takes a lock and
        # builds its key on every call, a few microseconds of every request. Bounded as the series are
        # (route templates, served versions, status codes).
        self._request_children: dict[tuple[object, ...], tuple[Counter, Histogram | None]] = {}
        self.in_flight = Gauge(
            f"{PREFIX}_requests_in_flight",
            "Requests (HTTP and gRPC) being handled now (health, readiness and metrics probes excluded).",
            registry=r,
        )
        self.rejections = Counter(
            f"{PREFIX}_request_rejections",
            "Requests refused, by reason: overloaded, timeout, invalid_input, non_finite_result, not_ready, "
            "not_found, unauthorized, device_error.",
            [*request_labels, "reason"],
            registry=r,
        )
        self.queue_wait = Histogram(
            f"{PREFIX}_queue_wait_seconds",
            "Time a request's rows waited in the batcher queue before their first session call.",
            ["model", "version"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.session_run = Histogram(
            f"{PREFIX}_session_run_seconds",
            "One ONNX Runtime session call (a merged batch), by execution provider.",
            ["model", "version", "provider"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.batch_rows = Histogram(
            f"{PREFIX}_batch_rows",
            "Rows (series) per session call.",
            ["model", "version"],
            buckets=batch_buckets(max_batch_rows),
            registry=r,
        )
        self.rows = Counter(
            f"{PREFIX}_rows",
            "Rows (series) forecast: sent to a session call that succeeded.",
            ["model", "version"],
            registry=r,
        )
        self.session_failures = Counter(
            f"{PREFIX}_session_failures",
            "Session calls that raised (each fails the requests in its batch: 500, or 503 for a device "
            "fault).",
            ["model", "version"],
            registry=r,
        )
        self.session_retries = Counter(
            f"{PREFIX}_session_retries",
            "Session calls retried in two halves, by reason (out_of_memory: the device ran out of memory).",
            ["model", "version", "reason"],
            registry=r,
        )

    def watch(self, registry: ModelRegistry, gpu: GpuMemory | None = None) -> None:
        """Export the registry's load state, model info and queues (and GPU memory) at scrape time."""
        self.registry.register(ServiceCollector(registry, gpu or GpuMemory()))

    # -- hooks ---------------------------------------------------------------------------------
    def observe_request(
        self, endpoint: str, record: RequestRecord, status: int | str, seconds: float, probe: bool
    ) -> None:
        key = (endpoint, record.model, record.version, status, probe)
        children = self._request_children.get(key)
        if children is None:
            labels = (endpoint, protocol_of(endpoint), record.model, record.version)
            # A probe has no duration series at all (not even an empty one).
            duration = None if probe else self.request_duration.labels(*labels)
            children = self.requests.labels(*labels, str(status)), duration
            self._request_children[key] = children
        count, duration = children
        count.inc()
        if duration is not None:
            duration.observe(seconds)
        reason = REJECTION_REASONS.get(record.error_code or "")
        if reason is not None:
            labels = (endpoint, protocol_of(endpoint), record.model, record.version)
            self.rejections.labels(*labels, reason).inc()

    def batcher_hooks(
        self, model: str, version: int, provider: str
    ) -> tuple[Callable[[Batch], None], Callable[[WorkItem], None], Callable[[str], None]]:
        """The batcher's `on_batch` and `on_item` callbacks and the runner's `on_retry` for one version,
        label children bound once."""
        v = str(version)
        for endpoint in self.model_endpoints:
            for reason in PRECREATED_REASONS:
                self.rejections.labels(endpoint, protocol_of(endpoint), model, v, reason)
        run = self.session_run.labels(model, v, provider)
        rows = self.batch_rows.labels(model, v)
        done = self.rows.labels(model, v)
        failures = self.session_failures.labels(model, v)
        wait = self.queue_wait.labels(model, v)

        def on_batch(batch: Batch) -> None:
            if batch.run_s is not None:
                run.observe(batch.run_s)
            rows.observe(batch.rows)
            if batch.error is None:
                done.inc(batch.rows)
            elif not isinstance(batch.error, ModelNotReady):  # cancelled by shutdown: not a failure
                failures.inc()

        def on_item(item: WorkItem) -> None:
            if item.queue_wait_s is not None:
                wait.observe(item.queue_wait_s)

        def on_retry(reason: str) -> None:
            self.session_retries.labels(model, v, reason).inc()

        return on_batch, on_item, on_retry

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition in the format the scraper asked for (OpenMetrics or Prometheus text)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


def batch_buckets(max_batch_rows: int) -> tuple[float, ...]:
    """1, 2, 4, ... up to the largest batch (itself the last bucket when not a power of two)."""
    buckets = [1]
    while buckets[-1] < max_batch_rows:
        buckets.append(min(buckets[-1] * 2, max_batch_rows))
    return tuple(float(b) for b in buckets)


# -- scrape-time state -----------------------------------------------------------------------------


class GpuMemory:
    """Memory used and total of CUDA devices, read with NVML (nvidia-ml-py) when a scrape asks.

    NVML is initialised on first use only, so a CPU host never loads it; if it cannot start (no
    driver), the service logs it once and exports no GPU series at all: absent, not zero.
    NVML counts devices in PCI bus order; the image sets CUDA_DEVICE_ORDER=PCI_BUS_ID so that the CUDA
    device id the sessions use is the same index.
    """

    def __init__(self) -> None:
        self._nvml: Any = None
        self._failed = False

    def read(self, devices: set[int]) -> Iterator[tuple[int, int, int]]:
        """(device, used bytes, total bytes) for each device NVML can read."""
        nvml = self._load()
        if nvml is None:
            return
        for device in sorted(devices):
            try:
                info = nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(device))
            except Exception as exc:  # NVMLError subclasses; a scrape must never fail for this
                logger.warning("NVML cannot read device %d: %s", device, exc)
                continue
            yield device, int(info.used), int(info.total)

    def _load(self) -> Any:
        if self._nvml is None and not self._failed:
            try:
                import pynvml  # nvidia-ml-py; only imported where the CUDA provider is in use

                pynvml.nvmlInit()
                self._nvml = pynvml
            except Exception as exc:
                self._failed = True
                logger.warning("GPU memory metrics unavailable: NVML did not start (%s)", exc)
        return self._nvml


class ServiceCollector(Collector):
    """Load state and info per model version, queued rows, and GPU memory where CUDA is in use."""

    def __init__(self, registry: ModelRegistry, gpu: GpuMemory) -> None:
        self._registry = registry
        self._gpu = gpu

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            f"{PREFIX}_model_load_state",
            "Load state of each model version: 1 for its current state (loading, ready, failed), else 0.",
            labels=["model", "version", "state"],
        )
        info = InfoMetricFamily(
            f"{PREFIX}_model",
            "One series per loaded model version: the execution provider in use, onnxruntime version, "
            "input length and horizon.",
            labels=["model", "version"],
        )
        queued = GaugeMetricFamily(
            f"{PREFIX}_queue_rows",
            "Rows (series) waiting in the batcher queue of each model version.",
            labels=["model", "version"],
        )
        backlog = GaugeMetricFamily(
            f"{PREFIX}_backlog_seconds",
            "Seconds of session time the rows queued and running for each model version need, at its "
            "measured drain rate: what scaling replicas on load should read.",
            labels=["model", "version"],
        )
        cuda_devices: set[int] = set()
        if self._registry.error:  # the repository itself is unusable: nothing can load
            state.add_metric(["", "", "failed"], 1)
        for served in self._registry.models.values():
            if served.error and not served.versions:  # a model folder with no usable version
                state.add_metric([served.name, "", "failed"], 1)
            for mv in served.versions.values():
                v = str(mv.version)
                for s in LOAD_STATES:
                    state.add_metric([served.name, v, s], 1 if mv.state == s else 0)
                if mv.state != "ready" or mv.model is None or mv.manifest is None or mv.batcher is None:
                    continue
                provider = mv.model.provider
                info.add_metric(
                    [served.name, v],
                    {
                        "provider": provider,
                        "onnxruntime_version": ort.__version__,
                        "input_length": str(mv.manifest.input_length),
                        "horizon": str(mv.manifest.horizon),
                    },
                )
                queued.add_metric([served.name, v], mv.batcher.queued_rows)
                backlog.add_metric([served.name, v], mv.batcher.backlog_s)
                if provider == CUDA_PROVIDER:
                    cuda_devices.add(mv.model.options.cuda_device_id)
        yield state
        yield info
        yield queued
        yield backlog
        if cuda_devices:
            yield from self._gpu_metrics(cuda_devices)

    def _gpu_metrics(self, devices: set[int]) -> Iterator[Metric]:
        used = GaugeMetricFamily(
            f"{PREFIX}_gpu_memory_used_bytes", "GPU memory in use on the device (NVML).", labels=["device"]
        )
        total = GaugeMetricFamily(
            f"{PREFIX}_gpu_memory_total_bytes", "GPU memory of the device (NVML).", labels=["device"]
        )
        readings = list(self._gpu.read(devices))
        if not readings:
            return
        for device, used_bytes, total_bytes in readings:
            used.add_metric([str(device)], used_bytes)
            total.add_metric([str(device)], total_bytes)
        yield used
        yield total
