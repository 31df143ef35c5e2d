"""The CUDA capture gate: a capture waits for the CUDA calls in flight and holds new ones back until it
ends; the capturing thread's own calls go through. Events only: no verdict depends on timing."""

from __future__ import annotations

import threading

import pytest

from app.engine.gate import CaptureGate, cuda_call
from app.engine.providers import CPU

PATIENCE_S = 30.0  # how long a test waits for something that must happen (generous: a shared machine)
GLANCE_S = 0.2  # how long it looks for something that must not happen (a slow machine cannot fake it)


def test_a_capture_holds_other_calls_back_and_lets_its_own_through() -> None:
    gate = CaptureGate()
    entered, release = threading.Event(), threading.Event()

    def call() -> None:
        with gate.call():
            entered.set()

    with gate.capture():
        with gate.call():  # the capturing thread's own runs
            pass
        other = threading.Thread(target=call)
        other.start()
        assert not entered.wait(GLANCE_S)  # held back while the capture runs
    assert entered.wait(PATIENCE_S)
    other.join(PATIENCE_S)

    in_call, captured = threading.Event(), threading.Event()

    def capture() -> None:
        with gate.capture():
            captured.set()

    def long_call() -> None:
        with gate.call():
            in_call.set()
            release.wait(PATIENCE_S)

    caller = threading.Thread(target=long_call)
    caller.start()
    assert in_call.wait(PATIENCE_S)
    capturer = threading.Thread(target=capture)
    capturer.start()
    assert not captured.wait(GLANCE_S)  # waits for the call in flight
    release.set()
    assert captured.wait(PATIENCE_S)
    caller.join(PATIENCE_S)
    capturer.join(PATIENCE_S)


def test_the_cpu_provider_never_takes_the_gate() -> None:
    from app.engine.gate import CUDA_GATE

    done = threading.Event()

    def cpu_call() -> None:
        with cuda_call(CPU):
            done.set()

    with CUDA_GATE.capture():
        worker = threading.Thread(target=cpu_call)
        worker.start()
        assert done.wait(PATIENCE_S)
    worker.join(PATIENCE_S)


def test_a_call_within_a_call_never_waits_for_a_capture() -> None:
    """A thread inside call() that enters call() again (a session made while a runner holds the gate)
    passes even while a capture waits: waiting there would deadlock, the capture waiting for it."""
    gate = CaptureGate()
    outer_in, nested_done, capture_in = threading.Event(), threading.Event(), threading.Event()
    proceed = threading.Event()

    def caller() -> None:
        with gate.call():
            outer_in.set()
            proceed.wait(PATIENCE_S)
            with gate.call():
                nested_done.set()

    def capture() -> None:
        with gate.capture():
            capture_in.set()

    first = threading.Thread(target=caller)
    first.start()
    assert outer_in.wait(PATIENCE_S)
    capturer = threading.Thread(target=capture)
    capturer.start()
    assert not capture_in.wait(GLANCE_S)  # the capture waits for the call in flight
    proceed.set()
    assert nested_done.wait(PATIENCE_S) and capture_in.wait(PATIENCE_S)
    first.join(PATIENCE_S)
    capturer.join(PATIENCE_S)


def test_a_capture_inside_a_call_of_the_same_thread_is_refused() -> None:
    gate = CaptureGate()
    with (
        gate.call(),
        pytest.raises(RuntimeError, match="cannot start inside a CUDA call"),
        gate.capture(),
    ):
        pass
    with gate.capture():  # and the gate is free afterwards
        pass
