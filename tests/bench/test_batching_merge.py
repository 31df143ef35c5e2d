"""bench.batching_merge against a service started here, a few requests, every answer checked, so that it
does not rot. No timing is asserted, nor how many requests were merged."""

from __future__ import annotations

import pytest

from bench import batching_merge
from bench.harness.servers import local_server


def test_requests_are_sent_checked_and_the_session_calls_counted(capsys: pytest.CaptureFixture[str]) -> None:
    with local_server({"RSA_MODELS": "etth1-rsa"}) as live:
        code = batching_merge.main(["--url", live.url, "--requests", "24", "--clients", "4"])
    out = capsys.readouterr().out
    assert code == 0 and live.exit_code == 0, out
    assert "24 requests from 4 clients" in out and ", 0 errors" in out, out
    assert "requests merged per call" in out and "latency ms: p50" in out, out
