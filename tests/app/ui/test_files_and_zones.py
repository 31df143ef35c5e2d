"""The inspector reads a dropped file by the trainer's rules (export/data/reading.py): rows in time
order, a repeated timestamp refused at the data field before any request, and times without an offset
read in the model's zone (manifest `timezone`), the charts on that zone's clock with its offsets. The
model is the shipped one, copied with `timezone: Europe/Berlin` written into its manifest as
`--timezone` writes it (top level and `dataset`), so that the service reads naive starts there too."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.app.live import LiveService, live_service
from tests.app.ui.conftest import ROOT, Session

EXAMPLE = json.loads((ROOT / "app" / "ui" / "examples" / "forecast_request.json").read_text())
MODEL, VERSION, L, H = "etth1-rsa", 5, 512, 96
ZONE = "Europe/Berlin"
# The window's last row is 2023-10-27 07:00 local: the 96 hours after it cross the autumn change
# (29 October, 03:00 CEST -> 02:00 CET), none of the window does.
FIRST = datetime(2023, 10, 6, 0, 0)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    repo = tmp_path_factory.mktemp("zoned-repo")
    shutil.copytree(ROOT / "model_repository" / MODEL / str(VERSION), repo / MODEL / str(VERSION))
    path = repo / MODEL / str(VERSION) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["timezone"] = ZONE
    manifest["dataset"]["timezone"] = ZONE
    path.write_text(json.dumps(manifest, indent=2))
    log = tmp_path_factory.mktemp("ui-zoned") / "service.log"
    with live_service(repo, log, RSA_DEVICE="cpu", RSA_DRAIN_DELAY_S="0") as live:
        yield live


def csv_rows(order: list[int]) -> tuple[str, list[str]]:
    """The example's window as a CSV with naive local times, its rows written in `order`."""
    values = EXAMPLE["series"][0]["values"]
    names = list(values)
    stamps = [(FIRST + timedelta(hours=i)).strftime("%Y-%m-%d %H:%M:%S") for i in range(L)]
    lines = [",".join(["date", *names])]
    lines += [",".join([stamps[i], *(repr(values[n][i]) for n in names)]) for i in order]
    return "\n".join(lines) + "\n", stamps


def drop(session: Session, tmp_path: Path, text: str) -> None:
    path = tmp_path / "data.csv"
    path.write_text(text)
    session.page.set_input_files("#file", str(path))
    session.wait(
        "document.getElementById('data-summary').textContent !== '' || "
        "document.querySelector('[data-error-for=\"data\"]').textContent !== ''"
    )


def test_an_unsorted_local_file_is_sorted_and_read_in_the_models_zone(
    open_page: object, service: LiveService, tmp_path: Path
) -> None:
    session = open_page("/ui")  # type: ignore[operator]
    page = session.page
    info = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#model-info dd')]
               .map(dd => [dd.dataset.term, dd.textContent]))"""
    )
    assert info["time zone"].startswith(f"{ZONE}: times without an offset")
    # Every tenth row moved to the end, as a careless export might write them.
    order = [i for i in range(L) if i % 10] + [i for i in range(L) if i % 10 == 0]
    text, stamps = csv_rows(order)
    drop(session, tmp_path, text)
    summary = page.inner_text("#data-summary")
    assert "rows sorted by time" in summary, summary
    assert page.input_value("#start") == stamps[0].replace(" ", "T")
    page.click("#submit")
    session.wait("window.__rsaState.timings.forecast")
    request = page.evaluate("() => window.__rsaState.forecast.request")
    (series,) = request["series"]
    assert series["start"] == "2023-10-06T00:00:00"  # naive: the service reads it in the model's zone
    assert series["values"] == EXAMPLE["series"][0]["values"]  # the file's rows back in time order
    (fc,) = page.evaluate("() => window.__rsaState.forecast.response")["forecasts"]
    again = httpx.post(
        f"{service.url}/v1/models/{MODEL}/versions/{VERSION}/forecast", json=request, timeout=30
    )
    assert again.json()["forecasts"][0]["timestamps"] == fc["timestamps"]
    zone = ZoneInfo(ZONE)
    first = FIRST.replace(tzinfo=zone).timestamp()
    assert fc["timestamps"][0] == "2023-10-27T08:00:00+02:00"
    assert "2023-10-29T02:00:00+02:00" in fc["timestamps"] and "2023-10-29T02:00:00+01:00" in fc["timestamps"]
    plots = page.evaluate(
        "() => window.__rsaState.plots.map(u => ({labels: u.series.map(s => s.label), x: u.data[0]}))"
    )
    stamps_s = [datetime.fromisoformat(t).timestamp() for t in fc["timestamps"]]
    for plot in plots:
        assert plot["labels"][0] == f"time ({ZONE})"
        assert plot["x"] == [first + 3600 * i for i in range(L)] + stamps_s  # hourly instants, no gap
    shown = page.evaluate(
        f"() => window.__rsaUi.formatTime(window.__rsaState.plots[0].data[0][{L + 43}], '{ZONE}')"
    )
    assert shown == "2023-10-29 02:00 +01:00"  # the repeat's second reading, on the zone's clock
    assert session.outside == [] and session.console_errors == []


def test_a_repeated_timestamp_is_refused_before_any_request(open_page: object, tmp_path: Path) -> None:
    session = open_page("/ui")  # type: ignore[operator]
    page = session.page
    order = list(range(L))
    order[200] = 199  # line 202 (header is line 1) repeats line 201's time and values
    text, stamps = csv_rows(order)
    drop(session, tmp_path, text)
    error = page.inner_text('[data-error-for="data"]')
    assert error == (
        f"line 202, column 'date': duplicate timestamp {stamps[199]} (same as line 201); "
        "each row needs its own time, as in training"
    )
    page.click("#submit")
    session.wait("document.querySelector('[data-error-for=\"data\"]').textContent !== ''")
    assert page.inner_text('[data-error-for="data"]') == error
    assert [r.url for r in session.requests if r.method == "POST"] == []  # nothing was asked
    assert session.outside == [] and session.console_errors == []
