"""`rsa_event_loop_lag_seconds`: how late the front end's event loop runs, sampled by a task of the
service's lifespan (issue 46: a request holding the loop stalls every other one; this is how an operator
sees it)."""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.app.conftest import make_settings, running_client


def _lag_buckets(text: str) -> dict[float, float]:
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "rsa_event_loop_lag_seconds"]
    return {float(s.labels["le"]): s.value for s in family.samples if s.name.endswith("_bucket")}


def _late(buckets: dict[float, float]) -> float:
    """Ticks more than 0.2 s late."""
    return buckets[float("inf")] - buckets[0.2]


def test_a_loop_held_for_a_third_of_a_second_shows_in_the_lag_histogram(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository)) as client:
        before = _lag_buckets(client.get("/metrics").text)
        client.portal.call(time.sleep, 0.35)  # type: ignore[union-attr]  # on the loop's own thread
        deadline = time.monotonic() + 30
        while True:  # the sampler observes its late tick once the loop runs again
            after = _lag_buckets(client.get("/metrics").text)
            if _late(after) > _late(before):
                break
            assert time.monotonic() < deadline, (before, after)
            time.sleep(0.05)
    assert after[float("inf")] > before[float("inf")]  # it samples all along
