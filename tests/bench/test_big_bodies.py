"""bench.big_bodies' smoke form: every route that takes a body gets one (a few MB here), each answered, and
/healthz probed from a process of its own while it is in flight (the 0.2 s target is the bench's report,
never a verdict here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import big_bodies


def test_smoke_run_sends_every_route_a_big_body_and_probes_healthz_meanwhile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert big_bodies.main(["--smoke", "--json", str(tmp_path / "run.json")]) == 0
    report = json.loads((tmp_path / "run.json").read_text())
    routes = report["routes"]
    assert set(routes) == {
        "forecast",
        "cross_validation",
        "detect_anomalies",
        "attention",
        "fit_forecast",
        "oip_v2_infer",
        "kserve_timeseries",
    }
    for name, (row,) in routes.items():
        # A request of the route's own shape: answered, or refused by a limit once parsed (a fit of a
        # hundred 2,000-value series may be estimated past RSA_MAX_FIT_SECONDS on a busy machine).
        assert row["status"] in (200, 422), (name, row)
        assert row["body_mb"] >= 3.5 and row["healthz_all_200"], (name, row)
        assert row["loop_lag_bucket_s"] > 0, (name, row)  # the service's sampler ticked meanwhile
    assert "while a 4 MB body is in flight" in capsys.readouterr().out
