"""Seasonal-cycle phase (app/artifacts/cycle.py), its decoding rules and the sessions of a model with a cycle.

Expected phases come from calendar arithmetic on datetimes (UTC hour, days since 1970-01-01), not from
the microsecond arithmetic under test.
"""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from app.artifacts.cycle import (
    cycle_phase,
    step_microseconds,
    unix_microseconds,
    unix_seconds_phase,
    window_phase,
)
from app.artifacts.manifest import CycleSpec, Manifest, TensorSpec, load_manifest
from app.core.errors import InvalidInput
from app.engine.model import OnnxModel
from app.engine.providers import RuntimeOptions
from app.engine.session import SessionLoadError
from app.protocols.rsa_v1.codec import decode_series
from app.protocols.rsa_v1.schemas import SeriesInput
from tests.app.conftest import ort_forecast, ort_run

L, C = 8, 3
EPOCH_DAY = date(1970, 1, 1)  # a Thursday


def utc_naive(t: datetime) -> datetime:
    return t if t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)


def hour_of_day(t: datetime) -> int:
    return utc_naive(t).hour


def days_since_epoch(t: datetime) -> int:
    return (utc_naive(t).date() - EPOCH_DAY).days


def hour_of_week(t: datetime) -> int:
    return (days_since_epoch(t) * 24 + hour_of_day(t)) % 168


def random_times(n: int, seed: int) -> list[datetime]:
    rng = np.random.default_rng(seed)
    base = datetime(1900, 1, 1)
    seconds = rng.integers(0, 200 * 365 * 86_400, n)
    micros = rng.integers(0, 1_000_000, n)
    return [
        base + timedelta(seconds=int(s), microseconds=int(u)) for s, u in zip(seconds, micros, strict=True)
    ]


# -- the formula ---------------------------------------------------------------------------------


def test_phase_agrees_with_calendar_arithmetic() -> None:
    for t in random_times(2000, seed=1):
        assert cycle_phase(t, 24, 3600.0) == hour_of_day(t), t
        assert cycle_phase(t, 7, 86_400) == days_since_epoch(t) % 7, t
        assert cycle_phase(t, 168, 3600) == hour_of_week(t), t


def test_hour_boundaries_never_flip() -> None:
    on_the_hour = datetime(2018, 6, 1, 5)
    assert cycle_phase(on_the_hour, 24, 3600.0) == 5
    assert cycle_phase(on_the_hour - timedelta(microseconds=1), 24, 3600.0) == 4
    assert cycle_phase(datetime(1969, 12, 31, 23, 30), 24, 3600) == 23  # before the epoch: floor, not trunc
    # A float step that float division gets wrong: 0.3 / 0.1 == 2.9999999999999996.
    assert cycle_phase(datetime(1970, 1, 1, 0, 0, 0, 300_000), 10, 0.1) == 3
    assert step_microseconds(0.1) == 100_000 and step_microseconds(3600.0) == 3_600_000_000


def test_naive_is_utc_and_aware_is_converted() -> None:
    naive = datetime(2018, 6, 1, 3)
    assert unix_microseconds(naive) == unix_microseconds(naive.replace(tzinfo=UTC)) == 1_527_822_000_000_000
    plus2 = datetime(2018, 6, 1, 3, tzinfo=timezone(timedelta(hours=2)))
    minus530 = datetime(2018, 6, 1, 3, tzinfo=timezone(-timedelta(hours=5, minutes=30)))
    assert cycle_phase(plus2, 24, 3600) == 1
    assert cycle_phase(minus530, 24, 3600) == 8  # 08:30 UTC
    assert cycle_phase(plus2, 7, 86_400) == days_since_epoch(plus2) % 7


def test_calendar_ends_do_not_overflow() -> None:
    first = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))  # astimezone(UTC) would overflow
    last = datetime(9999, 12, 31, 23, tzinfo=timezone(-timedelta(hours=5)))
    assert cycle_phase(first, 24, 3600) == 19
    assert cycle_phase(last, 24, 3600) == 4


@pytest.mark.parametrize(("n", "period", "step"), [(8, 24, 3600), (13, 24, 3600.0), (30, 7, 86_400)])
def test_window_phase_is_the_phase_of_the_first_of_the_last_l_rows(n: int, period: int, step: float) -> None:
    start = datetime(2018, 6, 1, 21, tzinfo=timezone(timedelta(hours=2)))
    first_row = start + timedelta(seconds=step) * (n - L)
    assert window_phase(start, n, L, period, step) == cycle_phase(first_row, period, step)


@pytest.mark.parametrize("t", [0, 1, 3599, 1_700_003_600, -1, -86_401, -62_135_596_800])
@pytest.mark.parametrize(("period", "step"), [(24, 3600), (7, 86_400), (96, 900.0)])
def test_unix_seconds_phase_is_the_phase_of_that_time(t: int, period: int, step: float) -> None:
    # OIP v2's `start` (Unix seconds) and /v1's timestamps go through the one formula
    first_row = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=t)
    assert unix_seconds_phase(t, period, step) == cycle_phase(first_row, period, step)


# -- decoding ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hourly(cycle_repository: Path) -> Manifest:
    return load_manifest(cycle_repository / "hourly" / "1" / "manifest.json")


def test_decoding_gives_the_window_its_phase(hourly: Manifest) -> None:
    values = np.ones((L + 5, C)).tolist()
    decoded = decode_series(SeriesInput(values=values, start=datetime(2018, 6, 1, 3)), hourly, "s", 100)
    assert decoded.phase == 8  # the window starts 5 hours after the first value
    plain = hourly.model_copy(update={"cycle": None})
    assert decode_series(SeriesInput(values=values), plain, "s", 100).phase is None


def test_decoding_without_start_names_the_field(hourly: Manifest) -> None:
    with pytest.raises(InvalidInput) as info:
        decode_series(SeriesInput(values=np.ones((L, C)).tolist()), hourly, "series[3]", 100)
    assert info.value.field == "series[3].start"
    assert "required by this model" in info.value.message
    assert "period 24 steps of 3600 s" in info.value.message


# -- sessions ------------------------------------------------------------------------------------


def _model(folder: Path, manifest: Manifest | None = None) -> OnnxModel:
    model = OnnxModel(
        folder, manifest or load_manifest(folder / "manifest.json"), RuntimeOptions(device="cpu")
    )
    model.load()
    return model


def test_cycle_model_feeds_phase_to_both_sessions(cycle_repository: Path) -> None:
    folder = cycle_repository / "hourly" / "1"
    model = _model(folder)
    model.warmup()
    x = np.random.default_rng(0).normal(0, 1, (4, L, C)).astype(np.float32)
    phases = np.array([0, 5, 23, 5])
    np.testing.assert_allclose(
        model.run_forecast(model.feed(x, phases)), ort_forecast(folder / "model.onnx", x, phases), atol=1e-5
    )
    result = model.inspect_feed(model.feed(x, phases))
    ref = ort_run(folder / "inspect.onnx", x, None, phases)
    for got, want in zip((result.forecast, result.softmax, result.rem, result.mixed), ref, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)
    # The toy really uses the phase: one step off changes the forecast.
    assert not np.allclose(
        model.run_forecast(model.feed(x, phases)),
        model.run_forecast(model.feed(x, (phases + 1) % 24)),
        atol=1e-3,
    )


def test_feed_has_phase_exactly_when_the_model_has_a_cycle(cycle_repository: Path) -> None:
    x = np.zeros((2, L, C), np.float32)
    cyclic = _model(cycle_repository / "hourly" / "1")
    assert set(cyclic.feed(x, np.array([1, 2]))) == {"window", "phase"}
    assert cyclic.feed(x, np.array([1, 2]))["phase"].dtype == np.int64
    with pytest.raises(ValueError, match="needs phases"):
        cyclic.feed(x)
    with pytest.raises(ValueError, match="phases for 2 windows"):
        cyclic.feed(x, np.array([1]))
    plain = _model(cycle_repository / "plain" / "1")
    assert set(plain.feed(x)) == {"window"}
    with pytest.raises(ValueError, match="no cycle"):
        plain.feed(x, np.array([1, 2]))


def test_graph_and_manifest_must_agree_on_phase(cycle_repository: Path, tmp_path: Path) -> None:
    cyclic_folder = tmp_path / "cyclic"
    plain_folder = tmp_path / "plain"
    shutil.copytree(cycle_repository / "hourly" / "1", cyclic_folder)
    shutil.copytree(cycle_repository / "plain" / "1", plain_folder)
    cyclic = load_manifest(cyclic_folder / "manifest.json")
    plain = load_manifest(plain_folder / "manifest.json")
    # Unvalidated copies: the manifests are self-consistent, only the graphs disagree with them.
    said_plain = cyclic.model_copy(update={"cycle": None, "inputs": cyclic.inputs[:1]})
    with pytest.raises(SessionLoadError, match=r"expected inputs \['window'\]"):
        _model(cyclic_folder, said_plain)
    phase = TensorSpec(name="phase", dtype="int64", shape=("batch",))
    said_cyclic = plain.model_copy(
        update={"cycle": CycleSpec(period=24, step_seconds=3600), "inputs": (*plain.inputs, phase)}
    )
    with pytest.raises(SessionLoadError, match=r"expected inputs \['window', 'phase'\]"):
        _model(plain_folder, said_cyclic)


def test_a_zoned_model_places_windows_by_local_wall_clock_time() -> None:
    # 09:00 in Berlin is 08:00 UTC in January and 07:00 UTC in July: one local phase, two UTC phases.
    winter = datetime(2024, 1, 15, 8, tzinfo=UTC)
    summer = datetime(2024, 7, 15, 7, tzinfo=UTC)
    assert [cycle_phase(t, 24, 3600.0) for t in (winter, summer)] == [8, 7]
    assert [cycle_phase(t, 24, 3600.0, "Europe/Berlin") for t in (winter, summer)] == [9, 9]
    seconds = int(summer.timestamp())
    assert unix_seconds_phase(seconds, 24, 3600.0, "Europe/Berlin") == 9
    assert window_phase(summer - timedelta(hours=2), 5, 3, 24, 3600.0, "Europe/Berlin") == 9
