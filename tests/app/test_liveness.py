"""Engine liveness and the service's processes (RSA_WORKERS=2), as the probe of issue 32 ran them: real
processes on loopback, bounded loops.

- `kill -9` of the engine with 16 forecasts in flight: every one is answered 503 with Retry-After, none
  500, none reset; the service still ends non-zero.
- `SIGSTOP` of the engine: readiness turns 503, /metrics and /v1/models answer, forecasts in flight and
  new ones get 503; after SIGCONT the service serves again.
- `kill -9` of a front end: its parse worker and multiprocessing's resource tracker die with it, and
  nothing of the service is left once it stops.

The machine running these is shared, so the targets (503 within 2 s of the engine's death, readiness
within 3 s of its stop) are printed, measured; the assertions are hang guards, several times looser.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.app.live import live_service
from tests.app.processes import children, engine, exited, front_ends, tree

L, C = 8, 3  # the toy model
FORECAST = "/v1/models/toy/versions/2/forecast"
CLIENTS = 16
HANG_GUARD_S = 15.0  # far above the targets; only a front end that never notices fails it
# Requests wait in the batcher for company this long, so that all of them are in flight when the engine
# is killed or stopped (inline calls off: an idle version would answer a lone request at once).
BATCH_WAIT = {"RSA_MAX_BATCH_WAIT_MS": "8000", "RSA_INLINE_MAX_ROWS": "0"}


@pytest.fixture(scope="module")
def repository(toy_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("liveness_repository")
    shutil.copytree(toy_repository / "toy", repo / "toy")
    return repo


def _until(predicate: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Seconds until `predicate()` held (polled every 20 ms); AssertionError after `timeout_s`."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"no {what} within {timeout_s:g}s")
        time.sleep(0.02)
    return time.monotonic() - started


def _queued_rows(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "rsa_queue_rows"
    )


@dataclass
class Outcome:
    status: int | None = None  # None: no HTTP answer
    error: str | None = None  # the transport error instead
    code: str | None = None  # the error body's code
    retry_after: str | None = None
    ended: float = 0.0  # time.monotonic() when the answer (or the error) came


def _forecast(url: str, outcome: Outcome, timeout_s: float = 30.0) -> None:
    body = {"series": [{"values": [[0.5] * C] * L}]}
    try:
        with httpx.Client(base_url=url, timeout=timeout_s) as http:  # a connection of its own
            response = http.post(FORECAST, json=body)
        outcome.status = response.status_code
        outcome.retry_after = response.headers.get("retry-after")
        if response.status_code != 200:
            outcome.code = response.json()["error"]["code"]
    except httpx.TransportError as exc:
        outcome.error = type(exc).__name__
    outcome.ended = time.monotonic()


def _in_flight(url: str, n: int) -> tuple[list[Outcome], list[threading.Thread]]:
    """`n` forecasts sent at once, each on its own connection, waiting in the engine's batcher."""
    outcomes = [Outcome() for _ in range(n)]
    threads = [threading.Thread(target=_forecast, args=(url, o), daemon=True) for o in outcomes]
    for thread in threads:
        thread.start()
    _until(lambda: _queued_rows(url) >= n, HANG_GUARD_S, f"{n} forecasts queued in the engine")
    return outcomes, threads


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(HANG_GUARD_S)
        assert not thread.is_alive(), "a request still hangs"


@pytest.fixture
def stopped_engine() -> Iterator[list[int]]:
    """Engines the test stopped (SIGSTOP): continued and left to the service's stop, whatever happens."""
    stopped: list[int] = []
    yield stopped
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def test_a_killed_engine_answers_every_request_in_flight_503_fast(repository: Path, tmp_path: Path) -> None:
    with live_service(repository, tmp_path / "service.log", RSA_WORKERS="2", **BATCH_WAIT) as service:
        outcomes, threads = _in_flight(service.url, CLIENTS)
        os.kill(engine(service), signal.SIGKILL)
        killed = time.monotonic()
        late = [Outcome() for _ in range(8)]  # new requests right after the death
        for outcome in late:
            _forecast(service.url, outcome, timeout_s=HANG_GUARD_S)
        _join(threads)
        code = service.process.wait(timeout=HANG_GUARD_S)
        took = [o.ended - killed for o in outcomes]
        print(
            f"engine kill -9: {CLIENTS} requests in flight answered "
            f"{sorted({(o.status, o.code) for o in outcomes}, key=str)} within {max(took):.3f}s "
            f"(median {sorted(took)[len(took) // 2]:.3f}s); new requests: "
            f"{[o.status or o.error for o in late]}; the service exited {code}"
        )
        log = service.output()
        for outcome in outcomes:
            assert (outcome.status, outcome.code) == (503, "model_not_ready"), (outcome, log[-3000:])
            assert outcome.retry_after is not None
        assert max(took) < HANG_GUARD_S
        for outcome in late:  # a 503 while the front ends stop, or no connection once they have
            assert outcome.status in (None, 503), outcome
        assert code != 0
        assert "the engine process closed its socket" in log


def test_a_stopped_engine_turns_readiness_503_and_metrics_answer(
    repository: Path, tmp_path: Path, stopped_engine: list[int]
) -> None:
    with live_service(repository, tmp_path / "service.log", RSA_WORKERS="2", **BATCH_WAIT) as service:
        url = service.url
        outcomes, threads = _in_flight(url, 4)
        engine_pid = engine(service)
        os.kill(engine_pid, signal.SIGSTOP)
        stopped_engine.append(engine_pid)
        stopped = time.monotonic()
        scrape = httpx.get(f"{url}/metrics", timeout=HANG_GUARD_S)  # before the heartbeat has told
        metrics_s = time.monotonic() - stopped
        ready_s = metrics_s + _until(
            lambda: httpx.get(f"{url}/readyz", timeout=HANG_GUARD_S).status_code == 503,
            HANG_GUARD_S,
            "readiness 503",
        )
        _join(threads)
        answered_s = max(o.ended for o in outcomes) - stopped
        started = time.monotonic()
        scrape_after = httpx.get(f"{url}/metrics", timeout=HANG_GUARD_S)
        models = httpx.get(f"{url}/v1/models", timeout=HANG_GUARD_S)
        late = Outcome()
        _forecast(url, late, timeout_s=HANG_GUARD_S)
        after_s = time.monotonic() - started
        print(
            f"engine SIGSTOP: first /metrics {metrics_s:.3f}s, readiness 503 after {ready_s:.3f}s, "
            f"requests in flight answered {sorted({(o.status, o.code) for o in outcomes}, key=str)} "
            f"within {answered_s:.3f}s; then /metrics + /v1/models + a forecast in {after_s:.3f}s"
        )
        assert scrape.status_code == 200 and metrics_s < HANG_GUARD_S
        assert scrape_after.status_code == 200
        assert "rsa_engine_up 0.0" in scrape_after.text
        assert "rsa_service_resident_memory_bytes" in scrape_after.text
        body = httpx.get(f"{url}/readyz", timeout=HANG_GUARD_S).json()
        assert any("not answered" in e for m in body["models"] for e in m["errors"]), body
        assert models.status_code == 200 and [m["name"] for m in models.json()["models"]] == ["toy"]
        for outcome in [*outcomes, late]:
            assert (outcome.status, outcome.code) == (503, "model_not_ready"), outcome
            assert outcome.retry_after is not None
        assert service.process.poll() is None  # a stopped engine is not a dead one

        os.kill(engine_pid, signal.SIGCONT)
        back_s = _until(
            lambda: httpx.get(f"{url}/readyz", timeout=HANG_GUARD_S).status_code == 200,
            HANG_GUARD_S,
            "readiness 200 after SIGCONT",
        )
        print(f"engine SIGCONT: readiness 200 again after {back_s:.3f}s")
        _forecast(url, again := Outcome())
        assert again.status == 200, again
        assert "rsa_engine_up 1.0" in httpx.get(f"{url}/metrics", timeout=HANG_GUARD_S).text


def test_a_killed_front_end_leaves_no_child_behind(repository: Path, tmp_path: Path) -> None:
    with live_service(repository, tmp_path / "service.log", RSA_WORKERS="2") as service:
        root = service.process.pid
        fronts = front_ends(service)
        assert len(fronts) == 2
        # each front end's parse worker and resource tracker (started with it)
        _until(lambda: all(len(children(f)) >= 2 for f in fronts), HANG_GUARD_S, "the parse workers")
        victim = fronts[0]
        orphans = [pid for pid, _ in children(victim)]
        os.kill(victim, signal.SIGKILL)
        gone_s = _until(lambda: all(map(exited, orphans)), HANG_GUARD_S, "children gone")
        print(f"front end kill -9: its {len(orphans)} children gone after {gone_s:.3f}s")
        _until(
            lambda: len(front_ends(service)) == 2 and victim not in front_ends(service),
            30,
            "a new front end",
        )
        # started (its parse worker spawned in its lifespan), so that it drains on SIGTERM
        _until(lambda: all(len(children(f)) >= 2 for f in front_ends(service)), 30, "its parse worker")
        everything = tree(root)
        assert service.stop() == 0
    left = [pid for pid in [*everything, *orphans] if not exited(pid)]
    assert not left, [(pid, Path(f"/proc/{pid}/cmdline").read_bytes()) for pid in left]
