"""The metrics module on its own: buckets, hooks and the request record."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.context import close_record, note_error, note_model_version, open_record
from app.engine.types import BatchEvent
from app.observability.metrics import EngineMetrics, RequestMetrics, batch_buckets
from app.protocols.registry import protocol_of


@pytest.mark.parametrize(
    ("largest", "buckets"),
    [(1, (1,)), (2, (1, 2)), (256, (1, 2, 4, 8, 16, 32, 64, 128, 256)), (100, (1, 2, 4, 8, 16, 32, 64, 100))],
)
def test_batch_buckets_are_powers_of_two_up_to_the_largest_batch(
    largest: int, buckets: tuple[int, ...]
) -> None:
    assert batch_buckets(largest) == tuple(float(b) for b in buckets)


def _sample(metrics: EngineMetrics | RequestMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_version_events_count_rows_failures_and_not_shutdowns() -> None:
    metrics = EngineMetrics(max_batch_rows=8)
    observer = metrics.version("m", 3, "CPUExecutionProvider")
    for event in (BatchEvent(4, 0.5, "ok"), BatchEvent(2, 0.1, "failed"), BatchEvent(1, 0.1, "stopped")):
        observer.on_batch(event)
    observer.on_queue_wait(0.25)
    observer.on_retry("out_of_memory")
    labels = {"model": "m", "version": "3"}
    assert _sample(metrics, "rsa_rows_total", **labels) == 4
    assert _sample(metrics, "rsa_session_failures_total", **labels) == 1
    assert _sample(metrics, "rsa_batch_rows_count", **labels) == 3
    assert _sample(metrics, "rsa_batch_rows_sum", **labels) == 7
    run = {**labels, "provider": "CPUExecutionProvider"}
    assert _sample(metrics, "rsa_session_run_seconds_sum", **run) == pytest.approx(0.5 + 0.1 + 0.1)
    assert _sample(metrics, "rsa_queue_wait_seconds_sum", **labels) == pytest.approx(0.25)
    assert _sample(metrics, "rsa_queue_wait_seconds_bucket", le="0.25", **labels) == 1
    assert _sample(metrics, "rsa_session_retries_total", reason="out_of_memory", **labels) == 1
    metrics.forget("m", 3)  # every series of the version goes
    names = {s.name for f in metrics.registry.collect() for s in f.samples if s.labels.get("model") == "m"}
    assert names == set()


def test_request_record_is_per_request_and_noop_outside() -> None:
    note_model_version("m", 1)  # no request open: ignored, no error
    note_error("timeout")
    record, token = open_record()
    note_model_version("m", 2)
    note_error("overloaded")
    close_record(token)
    note_model_version("other", 7)  # after closing: does not touch the closed record
    assert (record.model, record.version, record.error_code) == ("m", "2", "overloaded")


def test_observe_request_maps_error_codes_to_reasons() -> None:
    metrics = RequestMetrics(protocol_of)
    record, token = open_record()
    close_record(token)
    for code, reason in [("malformed_json", "invalid_input"), ("model_not_ready", "not_ready"), (None, None)]:
        record.error_code = code
        metrics.observe_request("/x", record, 400, 0.001, probe=False)
        if reason is not None:
            assert (
                _sample(
                    metrics,
                    "rsa_request_rejections_total",
                    endpoint="/x",
                    protocol="",
                    model="",
                    version="",
                    reason=reason,
                )
                == 1
            )
    labels = {"endpoint": "/x", "protocol": "", "model": "", "version": ""}
    assert _sample(metrics, "rsa_requests_total", code="400", **labels) == 3


def test_observe_request_counts_every_time_and_times_no_probe() -> None:
    metrics = RequestMetrics(protocol_of)
    record, token = open_record()
    close_record(token)
    for _ in range(3):  # the label children are looked up once, then reused: every call still counts
        metrics.observe_request("/v1/models/{name}/forecast", record, 200, 0.002, probe=False)
        metrics.observe_request("/healthz", record, 200, 0.001, probe=True)
    forecast = {"endpoint": "/v1/models/{name}/forecast", "protocol": "rsa_v1", "model": "", "version": ""}
    health = {"endpoint": "/healthz", "protocol": "", "model": "", "version": ""}
    assert _sample(metrics, "rsa_requests_total", code="200", **forecast) == 3
    assert _sample(metrics, "rsa_requests_total", code="200", **health) == 3
    assert _sample(metrics, "rsa_request_duration_seconds_count", **forecast) == 3
    assert metrics.registry.get_sample_value("rsa_request_duration_seconds_count", health) is None  # none


def test_every_request_metric_carries_its_protocol() -> None:
    expected = {
        "/v1/models/{name}/forecast": "rsa_v1",
        "/v2/models/{name}/infer": "oip_v2",
        "/v2": "oip_v2",
        "/inference.GRPCInferenceService/ModelInfer": "oip_v2_grpc",
        "/v1/timeseries/forecast": "kserve_timeseries",
        "/healthz": "",
        "unmatched": "",
    }
    assert {endpoint: protocol_of(endpoint) for endpoint in expected} == expected


def test_forget_removes_every_request_series_of_a_version_and_only_its() -> None:
    metrics = RequestMetrics(protocol_of, model_endpoints=("/v1/models/{name}/forecast",))
    record, token = open_record()
    close_record(token)
    for version in ("1", "2"):
        record.model, record.version, record.error_code = "m", version, "model_not_ready"
        metrics.observe_request("/x", record, 503, 0.001, probe=False)

    def series(version: str) -> set[str]:
        return {
            s.name
            for f in metrics.registry.collect()
            for s in f.samples
            if s.labels.get("model") == "m" and s.labels.get("version") == version
        }

    assert "rsa_requests_total" in series("1") and "rsa_request_rejections_total" in series("1")
    metrics.forget("m", "1")
    assert series("1") == set()
    assert "rsa_requests_total" in series("2") and "rsa_request_duration_seconds_count" in series("2")


def test_a_multiprocess_file_still_at_zero_bytes_reads_as_empty(tmp_path: Path) -> None:
    """prometheus-client creates a front end's file at 0 bytes, then sizes it (client_python#1199): a scrape
    in between answered 500, and compacting a front end killed then failed. Both read it as empty."""
    from prometheus_client.mmap_dict import MmapedDict, mmap_key

    from app.observability.requests import compact_dead_process

    key = mmap_key("rsa_requests_total", "rsa_requests_total", ["endpoint"], ["/healthz"], "Requests.")
    written = MmapedDict(str(tmp_path / "counter_111.db"))
    written.write_value(key, 3.0, 0.0)
    written.close()
    (tmp_path / "counter_222.db").touch()  # a front end's file between its creation and its sizing
    metrics = RequestMetrics(protocol_of, multiprocess_dir=tmp_path)
    samples = {s.name: s.value for f in metrics.families() for s in f.samples}
    assert samples == {"rsa_requests_total": 3.0}
    assert compact_dead_process(tmp_path, 222) == 1 and not (tmp_path / "counter_222.db").exists()
    assert compact_dead_process(tmp_path, 111) == 1  # the count kept in the archive
    samples = {s.name: s.value for f in metrics.families() for s in f.samples}
    assert samples == {"rsa_requests_total": 3.0}
