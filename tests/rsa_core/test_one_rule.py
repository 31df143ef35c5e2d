"""One implementation of each time and window rule (issue 44): the service, the batch scorer, the client
and the exporter step a forecast's timestamps, check a future table, cut right-aligned windows and read
naive local times by calling rsa_core's functions, not copies of them. Each path's name for the rule *is*
the core's object, and each path's own wrapper gives the core's instants on daylight-saving cases (no
copy left to compare)."""

from __future__ import annotations

import ast
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from rsa_client import forecast as client_forecast
from rsa_client import frames as rsa_client
from rsa_client import series as client_series

import app.artifacts.calendar
import app.artifacts.contract
import app.artifacts.readout.windows
import app.inference.refit
import app.protocols.oip_v2.handlers
import app.protocols.rsa_v1.codec
import app.protocols.timeseries.codec
import batch.forecaster
import batch.reading
import export.data.panels
import export.data.reading
import export.data.timestamps
import export.global_models.forecast
import export.global_models.graph
import export.global_models.hybrid
import rsa_core.calendar
import rsa_core.future
import rsa_core.steps
import rsa_core.wallclock
import rsa_core.windows
import rsa_core.written

BERLIN = "Europe/Berlin"
ROOT = Path(__file__).resolve().parents[2]

# (module, the name it calls the rule by, the core's object)
ONE_RULE = [
    (app.protocols.rsa_v1.codec, "forecast_timestamps", rsa_core.steps.forecast_timestamps),
    (app.protocols.oip_v2.handlers, "forecast_timestamps", rsa_core.steps.forecast_timestamps),
    (app.protocols.timeseries.codec, "forecast_timestamps", rsa_core.steps.forecast_timestamps),
    (app.artifacts.calendar, "CalendarStep", rsa_core.calendar.CalendarStep),
    (app.artifacts.calendar, "calendar_step", rsa_core.calendar.calendar_step),
    (app.artifacts.contract, "CALENDAR_FREQUENCY", rsa_core.calendar.CALENDAR_FREQUENCY),
    (batch.forecaster, "steps_after", rsa_core.steps.steps_after),
    (batch.forecaster, "future_rows_problem", rsa_core.future.future_rows_problem),
    (batch.reading, "localize", rsa_core.wallclock.localize),
    (rsa_client, "steps_after", rsa_core.steps.steps_after),
    (rsa_client, "shifted", rsa_core.steps.shifted),
    (rsa_client, "calendar_step", rsa_core.calendar.calendar_step),
    (client_series, "future_rows_problem", rsa_core.future.future_rows_problem),
    (rsa_client, "localize", rsa_core.wallclock.localize),
    (rsa_client, "_wall_clock", rsa_core.wallclock.localize),
    (export.global_models.forecast, "steps_after", rsa_core.steps.steps_after),
    (export.global_models.forecast, "calendar_step", rsa_core.calendar.calendar_step),
    (export.global_models.forecast, "future_rows_problem", rsa_core.future.future_rows_problem),
    (export.data.timestamps, "shifted", rsa_core.steps.shifted),
    (export.data.reading, "calendar_units", rsa_core.steps.calendar_units),  # days and months: wall clock
    (export.data.timestamps, "localize", rsa_core.wallclock.localize),
    (export.data.reading, "read_written", rsa_core.written.read_written),  # a file's text dates
    (export.data.panels, "read_written", rsa_core.written.read_written),
    (export.data.timestamps, "candidate_formats", rsa_core.written.candidate_formats),
    (rsa_client, "read_written", rsa_core.written.read_written),  # a frame's text dates
    (rsa_client, "has_offsets", rsa_core.written.has_offsets),
    (batch.reading, "read_written", rsa_core.written.read_written),  # a part's text times
    (rsa_client, "first_problem", rsa_core.written.first_problem),  # what is said of a date that fails
    (batch.reading, "first_problem", rsa_core.written.first_problem),
    (client_forecast, "_right_aligned", rsa_core.windows.right_aligned),
    (client_series, "_right_aligned", rsa_core.windows.right_aligned),
    (export.global_models.hybrid, "_tail_windows", rsa_core.windows.tail_windows),
    (export.global_models.graph, "tail_windows", rsa_core.windows.tail_windows),
    (app.inference.refit, "tail_windows", rsa_core.windows.tail_windows),
    (app.artifacts.readout.windows, "tail_windows", rsa_core.windows.tail_windows),
]


@pytest.mark.parametrize(
    ("module", "name", "core"), ONE_RULE, ids=[f"{m.__name__}.{n}" for m, n, _ in ONE_RULE]
)
def test_each_path_calls_the_cores_rule(module: Any, name: str, core: object) -> None:
    assert getattr(module, name) is core


def _service_instants(start: datetime, n: int, h: int, seconds: float, frequency: str | None) -> list[Any]:
    """What /v1 answers: forecast_timestamps from a start in the model's zone, as naive-UTC datetime64."""
    months = rsa_core.calendar.calendar_step(frequency)
    zone = start.tzinfo if months is None else None
    stamps = rsa_core.steps.forecast_timestamps(start, n, h, seconds, months, zone)  # type: ignore[arg-type]
    return [np.datetime64(t.astimezone(UTC).replace(tzinfo=None), "ns") for t in stamps]


CASES = [
    # (last value's time, frequency, seconds): hourly across the spring and the autumn change in
    # Berlin, quarter-hourly inside the repeat, and quarterly months on the 1st and on the last day (UTC)
    (datetime(2023, 3, 25, 23, 0, tzinfo=ZoneInfo(BERLIN)), "1h", 3600.0),
    (datetime(2023, 10, 28, 23, 0, tzinfo=ZoneInfo(BERLIN)), "1h", 3600.0),
    (datetime(2023, 10, 29, 2, 15, fold=1, tzinfo=ZoneInfo(BERLIN)), "15min", 900.0),
    (datetime(2019, 10, 1, tzinfo=UTC), "3MS", 0.0),
    (datetime(2019, 11, 30, 6, 0, tzinfo=UTC), "3ME", 0.0),
]


@pytest.mark.parametrize(("last", "frequency", "seconds"), CASES)
def test_the_service_the_batch_scorer_the_client_and_the_exporter_step_alike(
    last: datetime, frequency: str, seconds: float
) -> None:
    """Each path's own stepping function, given the last value's time, answers the instants /v1 gives for
    a series whose last value is then (start = that time, n_values = 1 ... the next H)."""
    H = 6
    want = _service_instants(last, 1, H, seconds, frequency)
    months = rsa_core.calendar.calendar_step(frequency)
    utc = np.datetime64(last.astimezone(UTC).replace(tzinfo=None), "us")
    # batch: a Forecaster's _steps_after reads only its manifest
    manifest = SimpleNamespace(frequency_seconds=seconds or 1.0, calendar=months, zone=None)
    scorer = SimpleNamespace(manifest=manifest)
    micros = batch.forecaster.Forecaster._steps_after(scorer, np.array([utc.astype(np.int64)]), H)  # type: ignore[arg-type]
    assert list(micros[0].astype("datetime64[us]").astype("datetime64[ns]")) == want
    # client: the steps after each series' last row (Unix seconds), and a short window's start stepped back
    spec: Any = SimpleNamespace(frequency=frequency, frequency_seconds=seconds or None, input_length=4)
    seconds_since_epoch = np.array([int(last.timestamp())])
    assert list(rsa_client._future(spec, seconds_since_epoch, H)[0]) == want
    starts = rsa_client._window_starts(spec, seconds_since_epoch, np.array([0]), np.array([1]))
    back = datetime.fromtimestamp(int(starts[0]), UTC)
    assert _service_instants(back, spec.input_length, 1, seconds, frequency) == [want[0]]  # /v1 from start
    # export: the horizon after a series' last timestamp (UTC instants)
    assert (
        list(export.global_models.forecast.horizon(np.array([utc], "datetime64[ns]"), frequency, H)) == want
    )


def test_the_batch_scorer_and_the_client_read_naive_times_as_the_exporter() -> None:
    """Two series of naive Berlin times through the autumn repeat (and one in the spring gap refused):
    the batch scorer's table reader, the client's frame reader and the exporter's rule give one reading."""
    walls = [
        "2023-10-29 01:30",
        "2023-10-29 02:00",
        "2023-10-29 02:30",
        "2023-10-29 02:00",
        "2023-10-29 02:30",
    ]
    ids = ["a"] * 5 + ["b"] * 2
    naive = pd.to_datetime([*walls, "2023-10-29 02:00", "2023-10-29 02:30"])
    starts = np.array([True, False, False, False, False, True, False])
    want, skipped = rsa_core.wallclock.localize(naive.to_numpy(), BERLIN, starts)
    assert not skipped.any()
    got_batch = batch.reading._utc_micros(
        pa.chunked_array([pa.array(naive)]), BERLIN, pa.chunked_array([ids])
    )
    assert list(got_batch.astype("datetime64[us]").astype("datetime64[ns]")) == list(want)
    aware = rsa_client._aware(pd.Series(naive, name="ds"), BERLIN, np.array(ids))
    got_client = aware.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy().astype("datetime64[ns]")
    assert list(got_client) == list(want)
    gap = pd.to_datetime(["2023-03-26 01:00", "2023-03-26 02:30"])
    with pytest.raises(ValueError, match="does not exist in Europe/Berlin"):
        batch.reading._utc_micros(pa.chunked_array([pa.array(gap)]), BERLIN)
    with pytest.raises(ValueError, match="does not exist in Europe/Berlin"):
        rsa_client._aware(pd.Series(gap, name="ds"), BERLIN)


def test_the_service_loads_the_core_without_pandas() -> None:
    """The serving image has no pandas: the service's app loads rsa_core's standard-library modules and
    never rsa_core.wallclock (pandas' zone database), which only the exporter, batch and client read."""
    code = (
        "import sys, app.main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rsa_core', 'pandas', 'torch')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    loaded = ast.literal_eval(out.stdout.strip())
    assert "rsa_core.steps" in loaded and "rsa_core.calendar" in loaded
    assert not [m for m in loaded if m == "rsa_core.wallclock" or m.split(".")[0] in ("pandas", "torch")]
