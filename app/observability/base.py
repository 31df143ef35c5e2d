"""What every metric family of the service shares: the name prefix, the duration buckets, a registry
of its own (app/observability/metrics.py says which families there are and where they come from)."""

from __future__ import annotations

import prometheus_client
from prometheus_client import CollectorRegistry

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


def new_registry() -> CollectorRegistry:
    # `_created` series double the number of series and nothing on our dashboards reads them.
    prometheus_client.disable_created_metrics()
    return CollectorRegistry()
