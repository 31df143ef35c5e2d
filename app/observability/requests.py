"""The front end's request metrics (`RequestMetrics`) and the multiprocess files several front ends
share (`compact_dead_process`); app/observability/metrics.py is the overview."""

from __future__ import annotations

import asyncio
import fcntl
import glob
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.metrics import MetricWrapperBase

from app.core.context import RequestRecord
from app.engine.catalog import Catalog
from app.observability.base import DURATION_BUCKETS, PREFIX, new_registry

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

# The event-loop lag sampler's tick (`watch_loop_lag`) and buckets: a loop that answers in time shows under
# 5 ms; issue 46's stalls (a 48 MB answer encoded on the loop) were 0.1-0.7 s.
LOOP_TICK_S = 0.1
LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0)


async def watch_loop_lag(histogram: Histogram, tick_s: float = LOOP_TICK_S) -> None:
    """Sleep `tick_s` again and again, observing each time how much later than asked the loop woke this
    task (until cancelled): ten wake-ups a second, each about 4 µs of CPU (an observation 1 µs, a loop
    wake-up 3 µs: timed on the 2-core development machine, 2026-12-04)."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(tick_s)
        histogram.observe(max(loop.time() - start - tick_s, 0.0))


# The reasons a request for a loaded version can be refused with (not_found needs no version).
PRECREATED_REASONS = ("overloaded", "timeout", "invalid_input", "not_ready")
UNMATCHED = "unmatched"  # the endpoint label of a request no route matched
GRPC_SERVICE = "/inference.GRPCInferenceService/"  # the endpoint label of a gRPC call is its method path
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus-client's own variable
LOCK_FILE = ".lock"  # scrapes read the multiprocess files under a shared lock, compaction takes it whole


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
        self.registry = r = new_registry()
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
        self.loop_lag = Histogram(
            f"{PREFIX}_event_loop_lag_seconds",
            f"How late the front end's event loop ran a task that slept {LOOP_TICK_S:g} s, sampled every "
            "tick: the time every request on this front end waited behind work holding the loop.",
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
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

        with _files_locked(self.multiprocess_dir, fcntl.LOCK_SH):
            files = [f for f in glob.glob(str(self.multiprocess_dir / "*.db")) if _written(f)]
            collected = list(MultiProcessCollector.merge(files, accumulate=True))
        return [_without_gone(family, self._served) for family in collected]


def _written(path: str) -> bool:
    """Whether a multiprocess file holds its header. prometheus-client creates a file at 0 bytes, then
    sizes it (prometheus/client_python#1199): a front end creating its first series while another
    answered a scrape made that scrape a 500 (seen in tests/app/test_liveness.py, 2026-12-06), and a
    front end killed in that moment would leave a file that failed every scrape after it. Such a file
    holds no value yet; it is read as empty."""
    try:
        return os.path.getsize(path) >= 8  # the used-bytes integer and its padding
    except FileNotFoundError:
        return False


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
                if _written(str(source)):
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
