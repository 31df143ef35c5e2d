"""Reading the service's /metrics the way Prometheus does (prometheus-client's own parser)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: httpx.Client) -> Samples:
    """Every sample of one scrape: a TestClient's app, or a live service through an httpx.Client."""
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample with exactly these labels; 0 when absent (a counter child not created yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every sample of `name` whose labels include these."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)
