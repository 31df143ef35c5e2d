"""Every Prometheus object of the service, in one place (names, labels, buckets, help text).

Two sides, as the service has two (app/engine/api.py):
- `RequestMetrics`, the front end's: every request by endpoint, protocol, model, version and status, its
  duration, the requests in flight and the refusals. The HTTP middleware (`app.api.middleware`) and the
  gRPC server report each request; the inference service notes which model version it resolved to and
  the error rendering notes the error code, through the request record (`app.core.context`).
- `EngineMetrics`, the engine's: session calls, rows per call, queue waits, failures and retries (the
  batchers' and runners' hooks), and at scrape time the state of every version (load state, model info,
  queued rows, backlog seconds) and GPU memory (NVML, only where the CUDA provider is in use), plus the
  engine process's standard process metrics.

`/metrics` on a front end renders both (`render`): its request metrics and the engine's families. With one
process (the default) both live in it. With several front ends (RSA_WORKERS > 1) each front end's request
metrics are written by prometheus-client's multiprocess mode to files shared by all of them (the
supervisor's PROMETHEUS_MULTIPROC_DIR) and summed at scrape time, and the engine's families come from the
engine process; nothing is counted twice (each family has one source), and the counts of a front end that
died are folded into an archive file by the supervisor (`compact_dead_process`), not lost.

Memory of the whole service (`service_memory`, read by the front end that answers the scrape, from /proc):
`rsa_process_resident_memory_bytes{role, pid}` for every process of the service (the supervisor, the
engine, each front end, each front end's parse worker and multiprocessing's resource tracker; with one
process, that process as `frontend` and its children) and `rsa_service_resident_memory_bytes`, their sum.
The standard `process_*` families describe one process: the engine's with RSA_WORKERS > 1, so memory
alerts and dashboards read the `rsa_` families. With RSA_WORKERS > 1 a front end also says whether the
engine answers its heartbeat (`rsa_engine_up`, built in app/engine/client.py).

Every request metric carries the protocol it came by, named by the protocol registry
(app/protocols/registry.py, `Registry.protocol_of`, handed to `RequestMetrics`): `rsa_v1`, `oip_v2`
(REST), `oip_v2_grpc`, `kserve_timeseries`, or "" for the service's own probes, metrics and docs.

Label values never come from the client: `model` and `version` are set only once the catalog knows them,
so requests for made-up model names cannot grow the number of series; the series of a version that is no
longer served are dropped (`forget`, and at scrape time for the multiprocess files).
"""

from __future__ import annotations

import fcntl
import glob
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

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
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from app.core.context import RequestRecord
from app.engine.catalog import LOAD_STATES, Catalog
from app.engine.types import BatchEvent, EngineSnapshot

logger = logging.getLogger(__name__)

PREFIX = "rsa"
M = TypeVar("M", bound=MetricWrapperBase)

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
UNMATCHED = "unmatched"  # the endpoint label of a request no route matched
GRPC_SERVICE = "/inference.GRPCInferenceService/"  # the endpoint label of a gRPC call is its method path
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus-client's own variable
LOCK_FILE = ".lock"  # scrapes read the multiprocess files under a shared lock, compaction takes it whole


def batch_buckets(max_batch_rows: int) -> tuple[float, ...]:
    """1, 2, 4, ... up to the largest batch (itself the last bucket when not a power of two)."""
    buckets = [1]
    while buckets[-1] < max_batch_rows:
        buckets.append(min(buckets[-1] * 2, max_batch_rows))
    return tuple(float(b) for b in buckets)


def _registry() -> CollectorRegistry:
    # `_created` series double the number of series and nothing on our dashboards reads them.
    prometheus_client.disable_created_metrics()
    return CollectorRegistry()


# -- the front end's side --------------------------------------------------------------------------------


class RequestMetrics:
    """Requests as one front end answers them. `multiprocess_dir`: the directory prometheus-client's
    multiprocess mode writes to (set in this process's environment before prometheus-client was
    imported: the supervisor does); then `families` reads every front end's files."""

    def __init__(
        self,
        protocol_of: Callable[[str], str],
        model_endpoints: tuple[str, ...] = (),
        multiprocess_dir: Path | None = None,
    ) -> None:
        self.protocol_of = protocol_of  # an endpoint label -> its protocol label
        # Route templates of the model endpoints: a loaded version's rejection series start at 0 on
        # each, because rate() cannot see the increment that creates a series (a short overload would
        # never show on a dashboard).
        self.model_endpoints = model_endpoints
        self.multiprocess_dir = multiprocess_dir
        self.registry = r = _registry()
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
            multiprocess_mode="livesum",  # several front ends: the sum over the live ones
        )
        self.rejections = Counter(
            f"{PREFIX}_request_rejections",
            "Requests refused, by reason: overloaded, timeout, invalid_input, non_finite_result, not_ready, "
            "not_found, unauthorized, device_error.",
            [*request_labels, "reason"],
            registry=r,
        )
        self._served: set[tuple[str, str]] = set()  # (model, version) of the catalog's versions
        # Every label set made for a (model, version), for `forget` (prometheus-client lists its children
        # only in a private attribute).
        self._series: dict[tuple[str, str], set[tuple[MetricWrapperBase, tuple[str, ...]]]] = {}

    def _note(self, metric: MetricWrapperBase, labels: tuple[str, ...]) -> None:
        self._series.setdefault((labels[2], labels[3]), set()).add((metric, labels))

    def observe_request(
        self, endpoint: str, record: RequestRecord, status: int | str, seconds: float, probe: bool
    ) -> None:
        key = (endpoint, record.model, record.version, status, probe)
        children = self._request_children.get(key)
        if children is None:
            labels = (endpoint, self.protocol_of(endpoint), record.model, record.version)
            # A probe has no duration series at all (not even an empty one).
            duration = None if probe else self.request_duration.labels(*labels)
            children = self.requests.labels(*labels, str(status)), duration
            self._request_children[key] = children
            self._note(self.requests, (*labels, str(status)))
            if not probe:
                self._note(self.request_duration, labels)
        count, duration = children
        count.inc()
        if duration is not None:
            duration.observe(seconds)
        reason = REJECTION_REASONS.get(record.error_code or "")
        if reason is not None:
            rejected = (endpoint, self.protocol_of(endpoint), record.model, record.version, reason)
            self.rejections.labels(*rejected).inc()
            self._note(self.rejections, rejected)

    def on_catalog(self, catalog: Catalog) -> None:
        """A new catalog: rejection series at 0 for every ready version on every model endpoint; the series
        of versions no longer served are removed."""
        served = {(v.name, str(v.version)) for v in catalog.versions()}
        for model, version in self._served - served:
            self.forget(model, version)
        for entry in catalog.versions():
            if entry.ready:
                for endpoint in self.model_endpoints:
                    for reason in PRECREATED_REASONS:
                        labels = (
                            endpoint,
                            self.protocol_of(endpoint),
                            entry.name,
                            str(entry.version),
                            reason,
                        )
                        self.rejections.labels(*labels)
                        self._note(self.rejections, labels)
        self._served = served

    def forget(self, model: str, version: str) -> None:
        """Remove every series of a version that is no longer served."""
        gone = [key for key in self._request_children if key[1] == model and key[2] == version]
        for key in gone:
            del self._request_children[key]
        for metric, labels in self._series.pop((model, version), set()):
            metric.remove(*labels)

    def families(self) -> list[Metric]:
        """The request metrics now: this process's, or every front end's files in multiprocess mode,
        without the series of versions the catalog no longer serves."""
        if self.multiprocess_dir is None:
            return list(self.registry.collect())
        from prometheus_client.multiprocess import MultiProcessCollector

        scrape = CollectorRegistry()
        with _files_locked(self.multiprocess_dir, fcntl.LOCK_SH):
            MultiProcessCollector(scrape, str(self.multiprocess_dir))
            collected = list(scrape.collect())
        return [_without_gone(family, self._served) for family in collected]


def _without_gone(family: Metric, served: set[tuple[str, str]]) -> Metric:
    """`family` without the samples of a (model, version) that is not served (version "" always stays)."""
    kept = [
        s
        for s in family.samples
        if not s.labels.get("version") or (s.labels.get("model", ""), s.labels["version"]) in served
    ]
    if len(kept) == len(family.samples):
        return family
    copy = Metric(family.name, family.documentation, family.type, family.unit)
    copy.samples = kept
    return copy


@contextmanager
def _files_locked(directory: Path, mode: int) -> Iterator[None]:
    with (directory / LOCK_FILE).open("a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def compact_dead_process(directory: Path, pid: int) -> int:
    """Fold a dead front end's multiprocess files into archive files, so that its counts stay (never
    lost) and its files do not pile up over restarts; its live gauges (in flight) are simply removed.
    Under the exclusive lock, so that no scrape sees a count twice or not at all. Returns the files
    removed. (prometheus-client's own `mark_process_dead` only removes the live gauge files.)"""
    from prometheus_client.mmap_dict import MmapedDict

    removed = 0
    with _files_locked(directory, fcntl.LOCK_EX):
        for path in glob.glob(str(directory / f"*_{pid}.db")):
            kind = Path(path).name.split("_")[0]
            if kind == "gauge":  # gauge_livesum_<pid>.db and the like: the values of a live process only
                os.unlink(path)
                removed += 1
                continue
            archive = directory / f"{kind}_archive.db"
            totals: dict[str, tuple[float, float]] = {}
            for source in (archive, Path(path)):
                if source.exists():
                    for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(str(source)):
                        before = totals.get(key, (0.0, 0.0))
                        totals[key] = (before[0] + value, max(before[1], timestamp))
            staging = directory / f"{kind}_archive.tmp"  # not *.db: no scrape reads it half written
            staging.unlink(missing_ok=True)
            merged = MmapedDict(str(staging))
            for key, (value, timestamp) in totals.items():
                merged.write_value(key, value, timestamp)
            merged.close()
            os.replace(staging, archive)
            os.unlink(path)
            removed += 1
    return removed


# -- the engine's side -----------------------------------------------------------------------------------


class EngineMetrics:
    """Session calls and queues, fed by the batchers' and runners' hooks, and the versions' state read at
    scrape time; on a registry of their own (one per engine, so tests can build many)."""

    def __init__(self, max_batch_rows: int, gpu: GpuMemory | None = None) -> None:
        self.registry = r = _registry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.gpu = gpu or GpuMemory()
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
        # Every label set of each version's series: (model, version) -> (metric, labels)
        self._series: dict[tuple[str, str], set[tuple[MetricWrapperBase, tuple[str, ...]]]] = {}

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


def _state(snapshot: EngineSnapshot, gpu: GpuMemory) -> Iterator[Metric]:
    state = GaugeMetricFamily(
        f"{PREFIX}_model_load_state",
        "Load state of each model version: 1 for its current state (loading, ready, failed, unloading), "
        "else 0.",
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
        "Seconds of session time every row admitted to each model version and not yet answered needs "
        "(queued, running, or reserved by a request still being read), at its measured drain rate: what "
        "scaling replicas on load should read.",
        labels=["model", "version"],
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


# -- the service's processes -----------------------------------------------------------------------------

PROC = Path("/proc")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class ServiceProcess:
    pid: int
    role: str  # supervisor, engine, frontend, parse, resource_tracker, other
    resident_bytes: int


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # gone meanwhile, or not Linux
        return None


def _children(pid: int) -> list[int]:
    """A process's children: the kernel's list per thread where it has one, else a scan of /proc."""
    listed = glob.glob(str(PROC / str(pid) / "task" / "*" / "children"))
    if listed:
        return [int(c) for path in listed for c in (_read(Path(path)) or "").split()]
    found = []
    for stat in glob.glob(str(PROC / "[0-9]*" / "stat")):
        text = _read(Path(stat))
        # the parent pid is the 2nd field after the command, which is in parentheses and may hold spaces
        if text is not None and int(text.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(Path(stat).parent.name))
    return found


def _role(pid: int, root: int, supervised: bool, parent: int) -> str:
    if pid == root:
        return "supervisor" if supervised else "frontend"
    argv = (_read(PROC / str(pid) / "cmdline") or "").split("\0")
    command = " ".join(argv)
    if "app.engine" in argv:
        return "engine"
    if "multiprocessing.resource_tracker" in command:
        return "resource_tracker"
    if "multiprocessing.spawn" in command:  # the parse worker (app/core/offload.py)
        return "parse"
    if parent == root and "app" in argv:
        return "frontend"
    return "other"


def service_processes(root: int, supervised: bool) -> list[ServiceProcess]:
    """`root` (the supervisor with RSA_WORKERS > 1, else the service's one process) and every process
    under it, each with its role and resident memory (/proc; none where there is no /proc)."""
    found: list[ServiceProcess] = []
    todo = [(root, 0)]
    while todo:
        pid, parent = todo.pop()
        statm = _read(PROC / str(pid) / "statm")
        if statm is None:
            continue
        found.append(
            ServiceProcess(pid, _role(pid, root, supervised, parent), int(statm.split()[1]) * PAGE_BYTES)
        )
        todo.extend((child, pid) for child in _children(pid))
    return found


def service_memory(supervisor: int | None) -> list[Metric]:
    """Resident memory of every process of the service, by role and pid, and in total: the processes
    under `supervisor` (RSA_WORKERS > 1), else under this one."""
    processes = service_processes(supervisor or os.getpid(), supervised=supervisor is not None)
    if not processes:
        return []
    each = GaugeMetricFamily(
        f"{PREFIX}_process_resident_memory_bytes",
        "Resident memory of each process of the service, by role (supervisor, engine, frontend, parse, "
        "resource_tracker, other) and pid.",
        labels=["role", "pid"],
    )
    for process in sorted(processes, key=lambda p: (p.role, p.pid)):
        each.add_metric([process.role, str(process.pid)], process.resident_bytes)
    total = GaugeMetricFamily(
        f"{PREFIX}_service_resident_memory_bytes",
        "Resident memory of the whole service: the sum over its processes "
        "(rsa_process_resident_memory_bytes).",
        value=sum(p.resident_bytes for p in processes),
    )
    return [each, total]


# -- the exposition --------------------------------------------------------------------------------------


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def render(families: Iterable[Metric], accept: str | None) -> tuple[bytes, str]:
    """The families in the format the scraper asked for (OpenMetrics or Prometheus text)."""
    scrape = CollectorRegistry()
    scrape.register(_Families(families))
    encoder, content_type = choose_encoder(accept or "")
    return encoder(scrape), content_type
