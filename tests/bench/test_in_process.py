"""bench/harness/in_process.py: the in-process service's readiness wait returns once /readyz is 200 and
stops, naming the last answer, where it never is (a bench no longer polls forever)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bench.harness.in_process import wait_ready


@dataclass
class Answer:
    status_code: int
    text: str = ""


@dataclass
class Probes:
    """A client whose /readyz answers 503 `busy` times, then 200 (never, with busy None)."""

    busy: int | None
    calls: list[str] = field(default_factory=list)

    def get(self, url: str) -> Answer:
        self.calls.append(url)
        if self.busy is not None and len(self.calls) > self.busy:
            return Answer(200)
        return Answer(503, '{"ready": false, "models": {"m": "failed: not an ONNX graph"}}')


def test_the_wait_returns_once_the_service_is_ready() -> None:
    client = Probes(busy=3)
    wait_ready(client, timeout_s=60, poll_s=0.001)
    assert client.calls == ["/readyz"] * 4


def test_a_service_that_never_gets_ready_stops_the_wait_with_its_answer() -> None:
    client = Probes(busy=None)
    with pytest.raises(RuntimeError, match=r"not ready within 0.05 s: GET /readyz 503 .*not an ONNX graph"):
        wait_ready(client, timeout_s=0.05, poll_s=0.01)
    assert 1 <= len(client.calls) <= 0.05 / 0.01 + 1  # bounded in count as in time
