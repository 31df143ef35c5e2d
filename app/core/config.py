"""Service settings, read from `RSA_*` environment variables.

Built on demand by the cached `get_settings()`; nothing here runs at import time.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[2]
# Where KServe's storage initializer puts the storageUri of an InferenceService (its
# DefaultModelLocalMountPath); for a custom container it also rewrites STORAGE_URI to this path.
KSERVE_MODEL_DIR = Path("/mnt/models")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity; the count of the host where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


Device = Literal["auto", "cpu", "cuda"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class Settings(BaseSettings):
    """Every knob of the service. `app/README.md` documents each one; keep the two in step."""

    model_config = SettingsConfigDict(env_prefix="RSA_", env_ignore_empty=True, extra="ignore")

    # Where the models live and which of them to load (empty = every model found).
    model_repository: Path = REPO_ROOT / "model_repository"
    models: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # KServe's variable, not ours: set (a custom-container InferenceService), the model repository is
    # KSERVE_MODEL_DIR, where KServe downloaded it. It wins over RSA_MODEL_REPOSITORY, which the image
    # sets to /models: as a mere default it would never apply there.
    storage_uri: str | None = Field(default=None, validation_alias="STORAGE_URI")

    # ONNX Runtime.
    device: Device = "auto"  # auto: CUDA when this onnxruntime build offers it, else CPU
    cuda_device_id: int = Field(default=0, ge=0)
    gpu_mem_limit_bytes: int | None = Field(default=None, gt=0)  # None: no limit (ORT default)
    intra_op_threads: int | None = Field(default=None, ge=1)  # None: len(os.sched_getaffinity(0))
    # CPU provider: session calls of at most this many rows run on a single-threaded instance of the
    # graph (intra-op threads cost more CPU than they save on small calls; app/engine/session.py),
    # up to `single_thread_calls` of them at once per version, each keeping one core busy (as Triton's
    # instance count; app/engine/batching/). 64, not 16: at concurrency 64 two single-threaded
    # calls side by side did 899-997 req/s where 16 did 725-836 (same run; bench/serving.py's load).
    # 0: one instance only, one call at a time.
    single_thread_max_rows: int = Field(default=64, ge=0)
    single_thread_calls: int | None = Field(default=None, ge=1)  # None: one per CPU this process may use
    # CUDA provider. TF32 matmuls: off, so that a GPU computes what the exporter verified (with TF32 on,
    # the default model's forecasts moved 0.147 raw, 0.033 of a channel's std, on an H100; docs/gpu.md).
    cuda_tf32: bool = False
    # Inputs and outputs in device buffers bound per batch bucket (IOBinding), rows padded to the bucket;
    # false, the default: plain session.run from numpy, 5-21% fewer ms per call at every batch size from
    # 1 to 256 rows on an H200 (bench.runners, 2026-12-04, every shipped version).
    cuda_io_binding: bool = False
    # One CUDA graph per batch bucket, captured at load and replayed, on the bound runner whatever
    # cuda_io_binding says (a graph ONNX Runtime cannot capture whole runs without). Off by default: on the
    # H200 graphs took 1.4-1.7x fewer ms than plain calls at 1 row, 1.1-1.8x at 8, 2-6% more at 64-256 rows
    # on v4-v5.
    cuda_graphs: bool = False
    # Batch buckets of the CUDA runner (rows per call padded up to one); empty: 1, 2, 4, ... up to the
    # version's rows per call. Comma-separated in the environment.
    batch_buckets: Annotated[list[int], NoDecode] = Field(default_factory=list)

    # Dynamic batching (per model version).
    max_batch_rows: int = Field(default=256, ge=1)  # series per session call, not requests
    # Attention memory one session call may form, in MiB: a version's rows per call are also capped at
    # this over its attention bytes per series (the manifest's attn_softmax shape), so a long window does
    # not take the host down: a full-attention L = 720 model forms 55 MiB per series, 14 GiB for 256.
    # The default keeps every shipped model at max_batch_rows (1 MiB per series at L = 96) and caps that
    # one at 4 rows, where a CPU loses nothing (per-series cost is flat in the rows; BENCHMARKS.md §4);
    # raise it on a GPU with memory to spare.
    call_attention_mib: float = Field(default=256.0, gt=0)
    # How long the first queued series waits for company while the session is free. 0 (as Triton's
    # default queue delay): an idle version runs a request at once, and requests that arrive while a
    # call runs still go together into the next one. A lone request paid the whole wait (2 ms: c=1
    # throughput halved, measured); a wait pays only where a bigger batch is nearly free (a GPU).
    max_batch_wait_ms: float = Field(default=0.0, ge=0)
    # Seconds a version must be idle before its session gives back what big batches grew (its CPU arena
    # and glibc's free pages): kept while requests keep coming, returned when they stop.
    memory_release_idle_s: float = Field(default=1.0, ge=0)
    # A request of at most this many series that finds its version idle, with no other request in
    # flight, runs the session on the event loop at once, without the thread hops of a batch
    # (app/engine/batching/). 0: never.
    inline_max_rows: int = Field(default=1, ge=0)
    max_queue_rows: int = Field(default=16384, ge=1)  # queued series before requests get 503
    request_timeout_s: float = Field(default=30.0, gt=0)  # queue + session time before a 504
    retry_after_s: int = Field(default=1, ge=0)  # Retry-After header on 503 responses
    # Evaluation work (cross_validation's and detect_anomalies' windows) per version: its own queue, run
    # after waiting forecasts in calls of at most `evaluation_call_rows` rows (app/engine/batching/), and at
    # most `max_evaluations_in_flight` such requests waiting or running (503 above), so that backtests
    # cannot starve the version's forecasts (issue 46, item 5; results/fairness.json).
    max_evaluations_in_flight: int = Field(default=2, ge=1)
    evaluation_call_rows: int = Field(default=64, ge=1)

    # Attention inspection runs outside the batcher: bound the calls in flight (503 above).
    max_attention_in_flight: int = Field(default=8, ge=1)
    # Numbers one attention answer may carry (layers x heads x matrices x L x L), checked before the
    # session runs: 4 million is about 80 MB of JSON.
    max_attention_values: int = Field(default=4_000_000, ge=1)

    # Request limits.
    max_series_per_request: int = Field(default=1024, ge=1)
    max_history_length: int = Field(default=100_000, ge=1)  # points per series
    # Missing values (null, NaN) a series' window may hold, as a share of its L x C values: filled by the
    # model's training rule and counted in the answer; above this share, 422 (docs/service.md).
    max_missing_share: float = Field(default=0.2, ge=0.0, le=1.0)
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1)  # 413 above this
    # A global read-out fitted on request (POST /v1/models/{m}/fit_forecast, docs/service.md): series per
    # request, values per series and values in all, and the seconds one fit may take (checked between
    # batches of windows: past it the fit stops and answers 422 naming this setting). It runs in a worker
    # thread, so the event loop keeps serving while it fits.
    max_fit_series: int = Field(default=256, ge=1)
    max_fit_history: int = Field(default=20_000, ge=1)
    max_fit_values: int = Field(default=1_000_000, ge=1)
    max_fit_seconds: float = Field(default=10.0, gt=0)
    # Fits (and publishes) at once, 503 above: by default one per CPU this process may use, each fit in a
    # worker process at a lower priority (app/inference/fit_pool.py). 4 on 2 cores let no maximal fit
    # finish under 8 clients (issue 46, item 6): each had half a core for a budget set for a whole one.
    max_fits_in_flight: int = Field(default_factory=usable_cpus, ge=1)
    # Publishing a refit (fit_forecast's `publish`; app/inference/publishing.py): the versions a model keeps
    # on disk (a publish past it removes the oldest, never one the service holds: 409 naming them), the
    # model folders a publish may bring the repository to (409 above), the bytes one published version may
    # write (422 above). Together they bound what publishing can put on disk: folders x versions x bytes.
    max_model_versions: int = Field(default=16, ge=1)
    max_model_folders: int = Field(default=256, ge=1)
    max_publish_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    # Forecast bodies of at least this many bytes are parsed in a worker process, off the event loop
    # (app/core/offload.py); 0: no worker, every body parsed on the loop.
    parse_process_min_bytes: int = Field(default=1024 * 1024, ge=0)

    log_level: LogLevel = "INFO"
    access_log: bool = False  # uvicorn's line per request (RSA_ACCESS_LOG); the metrics count every request

    # Access: API keys (bearer tokens), comma-separated and/or one per line in a file (a mounted secret).
    # Any key configured: every endpoint but /healthz, /readyz and /metrics needs one.
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    api_keys_file: Path | None = None

    # The server process (`python -m app`): where it listens and how long in-flight requests may take
    # to finish after SIGTERM before the process exits anyway (keep it below the orchestrator's grace
    # period: compose's stop_grace_period, Kubernetes' terminationGracePeriodSeconds).
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    graceful_shutdown_s: float = Field(default=20.0, gt=0)
    # On SIGTERM, readiness answers 503 and responses say `Connection: close` for this long before the
    # server stops accepting connections: time for load balancers to take the replica out.
    drain_delay_s: float = Field(default=5.0, ge=0)
    # What clients can hold (app/core/connections.py): requests in flight at once (503 above) and open
    # connections (past it, the one waiting longest without a request in flight is closed); how long an
    # idle keep-alive connection stays open; how long a request's headers may take to arrive (from the
    # connection, or the request's first byte); the least average rate of a body, judged once its grace
    # period has passed (0: none). Slow clients are closed with 408, never hold what others need.
    max_connections: int = Field(default=1024, ge=1)
    keep_alive_s: float = Field(default=5.0, gt=0)
    header_timeout_s: float = Field(default=10.0, gt=0)
    body_min_bytes_s: float = Field(default=1024.0, ge=0)  # bytes a second, on average
    body_grace_s: float = Field(default=5.0, gt=0)

    # The model repository while serving, as Triton's --model-control-mode: `none` loads what is there at
    # start and nothing after; `poll` rescans every `poll_s` (new versions loaded beside the served ones,
    # removed ones unloaded, each model's version_policy.json applied); `explicit` loads at start, then only
    # the repository API (POST /v2/repository/models/{m}/load and /unload) loads and unloads.
    model_control: Literal["none", "poll", "explicit"] = "none"
    poll_s: float = Field(default=15.0, gt=0)
    # Model versions held at once (loading or ready, every model together): a load (start-up, poll or the
    # repository API) that would hold more is refused whole, 409 naming this setting. A version of the
    # shipped L = 96 model holds about 115 MiB (20 copies: +2.3 GiB); 32 of them, or a handful of long-
    # window ones, leave a 24 GiB host room to spare.
    max_loaded_versions: int = Field(default=32, ge=1)
    # How long one load may take (reading and checking a model's folder and files, creating and warming
    # up its sessions), and an explicit load call in all: past it the load fails with this reason (the
    # file read or session creation that hung is left to finish in its own thread and is freed then).
    load_timeout_s: float = Field(default=120.0, gt=0)

    # Processes: RSA_WORKERS front ends (HTTP and gRPC: parsing, validation, encoding), each on its own
    # SO_REUSEPORT socket, feeding one engine process (sessions, queues, batching, admission) through
    # `engine_address`. 1: one process does everything (the default: one process per container, scaled
    # by replicas). The supervisor sets RSA_ENGINE_ADDRESS for its front ends; nobody else needs to.
    workers: int = Field(default=1, ge=1, le=256)
    engine_address: str | None = None
    # A front end's private Unix socket, where the supervisor pings it, and the supervisor's pid, the root
    # of the service's processes for the memory metrics (both set by the supervisor).
    control_socket: Path | None = None
    supervisor_pid: int | None = None
    # A front end pings the engine process every `engine_heartbeat_s`; a ping left unanswered for
    # `engine_heartbeat_timeout_s` (a stopped or stuck engine), or its socket closing (a dead one), makes
    # the engine unavailable to that front end: requests in flight and new ones get 503 with Retry-After
    # and readiness turns 503, until the engine answers again (app/engine/client.py).
    engine_heartbeat_s: float = Field(default=0.5, gt=0)
    engine_heartbeat_timeout_s: float = Field(default=2.0, gt=0)

    # The Open Inference Protocol v2 gRPC service (app/protocols/oip_v2/grpc_server.py), in this process
    # beside HTTP, on RSA_HOST. Unset: no gRPC server (the image sets 8001, Triton's port). Off by default so
    # that every process a test or a benchmark starts does not compete for one fixed port.
    grpc_port: int | None = Field(default=None, ge=1, le=65535)
    # Calls at once on one gRPC connection (HTTP/2 max_concurrent_streams; gRPC's own default is unbounded).
    # The whole server takes at most RSA_MAX_CONNECTIONS calls at once, messages up to RSA_MAX_BODY_BYTES.
    grpc_max_streams: int = Field(default=100, ge=1)

    @model_validator(mode="after")
    def _models_from_kserve_storage(self) -> Settings:
        if self.storage_uri:
            self.model_repository = KSERVE_MODEL_DIR
        return self

    @field_validator("models", "batch_buckets", "api_keys", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        """A list setting from the environment comma-separated (`RSA_MODELS=a,b`, blanks ignored), as
        well as a real list."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("batch_buckets")
    @classmethod
    def _positive_buckets(cls, value: list[int]) -> list[int]:
        if any(rows < 1 for rows in value):
            raise ValueError(f"batch buckets are row counts of at least 1, got {value}")
        return sorted(set(value))

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings()
