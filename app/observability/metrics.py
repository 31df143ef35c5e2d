"""Every Prometheus object of the service, in one place (names, labels, buckets, help text).

Two sides, as the service has two (app/engine/api.py):
- `RequestMetrics`, the front end's: every request by endpoint, protocol, model, version and status, its
  duration, the requests in flight and the refusals, and how late its event loop runs (`watch_loop_lag`,
  a task of the front end's lifespan). The HTTP middleware (`app.api.middleware`) and the
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

The families live in a module per side: app/observability/requests.py (the front end's), engine.py
(the engine's), processes.py (the service's memory), base.py (the prefix, buckets and registries they
share); this module renders them (`render`) and is where every caller imports them from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from app.observability.base import DURATION_BUCKETS, PREFIX
from app.observability.engine import EngineMetrics, GpuMemory, VersionMetrics, batch_buckets
from app.observability.processes import ServiceProcess, service_memory, service_processes
from app.observability.requests import (
    GRPC_SERVICE,
    MULTIPROC_ENV,
    PRECREATED_REASONS,
    REJECTION_REASONS,
    UNMATCHED,
    RequestMetrics,
    compact_dead_process,
    watch_loop_lag,
)

__all__ = [
    "DURATION_BUCKETS",
    "GRPC_SERVICE",
    "MULTIPROC_ENV",
    "PRECREATED_REASONS",
    "PREFIX",
    "REJECTION_REASONS",
    "UNMATCHED",
    "EngineMetrics",
    "GpuMemory",
    "RequestMetrics",
    "ServiceProcess",
    "VersionMetrics",
    "batch_buckets",
    "compact_dead_process",
    "render",
    "service_memory",
    "service_processes",
    "watch_loop_lag",
]


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
