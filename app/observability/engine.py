"""The engine's metrics: session calls and queues fed by the batchers' and runners' hooks
(`EngineMetrics`, `VersionMetrics`), the versions' state and GPU memory read at scrape time (`GpuMemory`);
app/observability/metrics.py is the overview."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, TypeVar

from prometheus_client import (
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase

from app.engine.catalog import LOAD_STATES
from app.engine.types import BatchEvent, EngineSnapshot
from app.observability.base import DURATION_BUCKETS, PREFIX, new_registry

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=MetricWrapperBase)


def batch_buckets(max_batch_rows: int) -> tuple[float, ...]:
    """1, 2, 4, ... up to the largest batch (itself the last bucket when not a power of two)."""
    buckets = [1]
    while buckets[-1] < max_batch_rows:
        buckets.append(min(buckets[-1] * 2, max_batch_rows))
    return tuple(float(b) for b in buckets)


class EngineMetrics:
    """Session calls and queues, fed by the batchers' and runners' hooks, and the versions' state read at
    scrape time; on a registry of their own (one per engine, so tests can build many)."""

    def __init__(self, max_batch_rows: int, gpu: GpuMemory | None = None) -> None:
        self.registry = r = new_registry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.gpu = gpu or GpuMemory()
        self.queue_wait = self._per_version(
            Histogram,
            "queue_wait_seconds",
            "Time a request's rows waited in the batcher queue before their first session call.",
            buckets=DURATION_BUCKETS,
        )
        self.session_run = self._per_version(
            Histogram,
            "session_run_seconds",
            "One ONNX Runtime session call (a merged batch), by execution provider.",
            "provider",
            buckets=DURATION_BUCKETS,
        )
        self.batch_rows = self._per_version(
            Histogram, "batch_rows", "Rows (series) per session call.", buckets=batch_buckets(max_batch_rows)
        )
        self.rows = self._per_version(
            Counter, "rows", "Rows (series) forecast: sent to a session call that succeeded."
        )
        self.session_failures = self._per_version(
            Counter,
            "session_failures",
            "Session calls that raised (each fails the requests in its batch: 500, or 503 for a device "
            "fault).",
        )
        self.session_retries = self._per_version(
            Counter,
            "session_retries",
            "Session calls retried in two halves, by reason (out_of_memory: the device ran out of memory).",
            "reason",
        )
        # Every label set of each version's series: (model, version) -> (metric, labels)
        self._series: dict[tuple[str, str], set[tuple[MetricWrapperBase, tuple[str, ...]]]] = {}

    def _per_version(self, kind: type[M], name: str, documentation: str, *labels: str, **options: Any) -> M:
        """A family with a series per model version (and `labels`), on the engine's registry."""
        labelnames = ["model", "version", *labels]
        return kind(f"{PREFIX}_{name}", documentation, labelnames, registry=self.registry, **options)

    def version(self, model: str, version: int, provider: str) -> VersionMetrics:
        """One version's observer (app/engine/types.py's VersionObserver), label children bound once."""
        v = str(version)
        series = self._series.setdefault((model, v), set())
        return VersionMetrics(self, model, v, provider, series)

    def forget(self, model: str, version: int) -> None:
        """Remove every series of an unloaded version."""
        for metric, labels in self._series.pop((model, str(version)), set()):
            metric.remove(*labels)

    def families(self, snapshot: EngineSnapshot) -> list[Metric]:
        """Everything the engine exports now: its registry, then the versions' state."""
        return [*self.registry.collect(), *_state(snapshot, self.gpu)]


class VersionMetrics:
    """One version's batcher and runner events, on label children bound once. `series`: every label set
    it creates, for `EngineMetrics.forget`."""

    def __init__(
        self,
        metrics: EngineMetrics,
        model: str,
        v: str,
        provider: str,
        series: set[tuple[MetricWrapperBase, tuple[str, ...]]],
    ) -> None:
        self._metrics, self._model, self._v, self._series = metrics, model, v, series
        self._run = self._child(metrics.session_run, model, v, provider)
        self._rows = self._child(metrics.batch_rows, model, v)
        self._done = self._child(metrics.rows, model, v)
        self._failures = self._child(metrics.session_failures, model, v)
        self._wait = self._child(metrics.queue_wait, model, v)

    def _child(self, metric: M, *labels: str) -> M:
        self._series.add((metric, labels))
        return metric.labels(*labels)

    def on_batch(self, event: BatchEvent) -> None:
        self._run.observe(event.run_s)
        self._rows.observe(event.rows)
        if event.outcome == "ok":
            self._done.inc(event.rows)
        elif event.outcome == "failed":  # cancelled by shutdown: not a failure
            self._failures.inc()

    def on_queue_wait(self, seconds: float) -> None:
        self._wait.observe(seconds)

    def on_retry(self, reason: str) -> None:
        self._child(self._metrics.session_retries, self._model, self._v, reason).inc()


def _per_version(name: str, documentation: str, *labels: str) -> GaugeMetricFamily:
    """A gauge family of one series per model version (and `labels`), read at scrape time."""
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, labels=["model", "version", *labels])


def _state(snapshot: EngineSnapshot, gpu: GpuMemory) -> Iterator[Metric]:
    state = _per_version(
        "model_load_state",
        "Load state of each model version: 1 for its current state (loading, ready, failed, unloading), "
        "else 0.",
        "state",
    )
    info = InfoMetricFamily(
        f"{PREFIX}_model",
        "One series per loaded model version: the execution provider in use, onnxruntime version, "
        "input length and horizon.",
        labels=["model", "version"],
    )
    queued = _per_version("queue_rows", "Rows (series) waiting in the batcher queue of each model version.")
    backlog = _per_version(
        "backlog_seconds",
        "Seconds of session time every row admitted to each model version and not yet answered needs "
        "(queued, running, or reserved by a request still being read), at its measured drain rate: what "
        "scaling replicas on load should read.",
    )
    cuda_devices: set[int] = set()
    if snapshot.error:  # the repository itself is unusable: nothing can load
        state.add_metric(["", "", "failed"], 1)
    for model in snapshot.models:
        if model.error and not model.versions:  # a model folder with no usable version
            state.add_metric([model.name, "", "failed"], 1)
        for sv in model.versions:
            v = str(sv.version)
            for s in LOAD_STATES:
                state.add_metric([model.name, v, s], 1 if sv.state == s else 0)
            serving = sv.serving
            if serving is None:
                continue
            info.add_metric(
                [model.name, v],
                {
                    "provider": serving.provider,
                    "onnxruntime_version": snapshot.runtime_version,
                    "input_length": str(serving.input_length),
                    "horizon": str(serving.horizon),
                },
            )
            queued.add_metric([model.name, v], serving.queued_rows)
            backlog.add_metric([model.name, v], serving.backlog_s)
            if serving.cuda_device_id is not None:
                cuda_devices.add(serving.cuda_device_id)
    yield state
    yield info
    yield queued
    yield backlog
    if cuda_devices:
        yield from _gpu_metrics(gpu, cuda_devices)


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


def _gpu_metrics(gpu: GpuMemory, devices: set[int]) -> Iterator[Metric]:
    used = GaugeMetricFamily(
        f"{PREFIX}_gpu_memory_used_bytes", "GPU memory in use on the device (NVML).", labels=["device"]
    )
    total = GaugeMetricFamily(
        f"{PREFIX}_gpu_memory_total_bytes", "GPU memory of the device (NVML).", labels=["device"]
    )
    readings = list(gpu.read(devices))
    if not readings:
        return
    for device, used_bytes, total_bytes in readings:
        used.add_metric([str(device)], used_bytes)
        total.add_metric([str(device)], total_bytes)
    yield used
    yield total
