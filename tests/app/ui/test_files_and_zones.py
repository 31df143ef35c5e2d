"""The inspector reads a dropped file by the trainer's rules (export/data/reading.py): rows in time
order, a repeated timestamp refused at the data field before any request, and times without an offset
read in the model's zone (manifest `timezone`), the charts on that zone's clock with its offsets. The
model is the shipped one, copied with `timezone: Europe/Berlin` written into its manifest as
`--timezone` writes it (top level and `dataset`), so that the service reads naive starts there too."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import numpy as np
import pytest

from rsa_core.wallclock import localize
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
    with live_service(repo, log, RSA_DEVICE="cpu") as live:
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


# A window of naive Berlin hours that runs through the autumn change: 2023-10-29 02:00 appears twice, in
# summer time (+02:00) and then in winter time (+01:00), as a local export writes it.
AUTUMN = datetime(2023, 10, 20, 0, 0, tzinfo=ZoneInfo(ZONE))


def autumn_rows(change: Callable[[list[str]], None] | None = None) -> tuple[str, list[str]]:
    """The example's window as a CSV of naive local times over the autumn change; `change` edits the
    time cells (file order) before they are written."""
    values = EXAMPLE["series"][0]["values"]
    names = list(values)
    utc = AUTUMN.astimezone(ZoneInfo("UTC"))
    stamps = [
        (utc + timedelta(hours=i)).astimezone(ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M:%S") for i in range(L)
    ]
    cells = list(stamps)
    if change is not None:
        change(cells)
    lines = [",".join(["date", *names])]
    lines += [",".join([cells[i], *(repr(values[n][i]) for n in names)]) for i in range(L)]
    return "\n".join(lines) + "\n", stamps


def test_the_autumn_repeat_of_a_zoned_model_is_read_as_the_trainer_reads_it(
    open_page: object, service: LiveService, tmp_path: Path
) -> None:
    """The repeated hour is summer time the first time, winter time the second (the trainer's rule,
    `rsa_core.wallclock.localize`, which the page's script is checked against here): no duplicate, the
    rows one hour apart, nothing moved."""
    text, stamps = autumn_rows()
    assert stamps.count("2023-10-29 02:00:00") == 2  # the file does repeat the naive time
    session = open_page("/ui")  # type: ignore[operator]
    page = session.page
    drop(session, tmp_path, text)
    assert page.inner_text('[data-error-for="data"]') == ""
    summary = page.inner_text("#data-summary")
    assert "sorted" not in summary and "first time 2023-10-20T00:00:00" in summary, summary
    page.click("#submit")
    session.wait("window.__rsaState.timings.forecast")
    request = page.evaluate("() => window.__rsaState.forecast.request")
    (series,) = request["series"]
    assert series["start"] == "2023-10-20T00:00:00" and series["values"] == EXAMPLE["series"][0]["values"]
    first = AUTUMN.timestamp()
    x = page.evaluate("() => window.__rsaState.plots[0].data[0]")
    assert x[:L] == [first + 3600 * i for i in range(L)]  # hourly instants through the change, no gap
    # the page's reading of the naive times is the Python rule's (the one the client and the batch use)
    utc, skipped = localize(np.array(stamps, "datetime64[ns]"), ZONE)
    assert not skipped.any() and x[:L] == (utc.astype("datetime64[s]").astype(np.int64)).tolist()
    fold = stamps.index("2023-10-29 02:00:00")
    shown = [page.evaluate(f"() => window.__rsaUi.formatTime({x[k]}, '{ZONE}')") for k in (fold, fold + 1)]
    assert shown == ["2023-10-29 02:00 +02:00", "2023-10-29 02:00 +01:00"]
    assert session.outside == [] and session.console_errors == []


def _third(cells: list[str]) -> None:
    """The repeated hour written a third time (over the next row): a genuine repeat."""
    k = cells.index("2023-10-29 02:00:00")
    cells[k + 2] = cells[k]


def _gap(cells: list[str]) -> None:
    cells[5] = "2023-03-26 02:30:00"  # the spring change skips 02:00 to 03:00 in Berlin


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            _third,
            "line {line}, column 'date': duplicate timestamp 2023-10-29 02:00:00 (same as line {same}); "
            "each row needs its own time, as in training",
        ),
        (
            _gap,
            "line 7, column 'date': 2023-03-26 02:30:00 does not exist in Europe/Berlin: the clocks skip it "
            "(daylight saving)",
        ),
    ],
)
def test_a_repeat_beyond_the_fold_or_a_skipped_time_is_refused_naming_the_line(
    open_page: object, service: LiveService, tmp_path: Path, change: Callable[[list[str]], None], error: str
) -> None:
    text, stamps = autumn_rows(change)
    fold = stamps.index("2023-10-29 02:00:00")  # file line = index + 2 (the header is line 1)
    session = open_page("/ui")  # type: ignore[operator]
    page = session.page
    drop(session, tmp_path, text)
    assert page.inner_text('[data-error-for="data"]') == error.format(line=fold + 4, same=fold + 3)
    assert [r.url for r in session.requests if r.method == "POST"] == []  # nothing was asked
    assert session.outside == [] and session.console_errors == []


# (zone, frequency, seconds, the stamp stepped from as the zone's wall clock): the page's stepper, which
# times a window's rows, against rsa_core.steps across Berlin's and New York's changes (issue 44/46
# follow-up: a zoned model's days and months on the wall clock, hours on the instant, no zone unchanged)
STEPS = [
    ("Europe/Berlin", "1D", 86400, datetime(2023, 3, 24)),
    ("Europe/Berlin", "1D", 86400, datetime(2023, 3, 24, 2, 30)),  # 26 March 02:30 is skipped
    ("America/New_York", "1D", 86400, datetime(2023, 11, 3, 1, 30)),  # 5 November 01:30 repeats
    ("Europe/Berlin", "7D", 7 * 86400, datetime(2023, 10, 15)),
    ("Europe/Berlin", "1MS", 30 * 86400, datetime(2023, 9, 1)),
    ("America/New_York", "3ME", 91 * 86400, datetime(2022, 12, 31)),
    ("Europe/Berlin", "1h", 3600, datetime(2023, 10, 29, 0)),
    (None, "1D", 86400, datetime(2023, 3, 25, 23)),
    (None, "1MS", 30 * 86400, datetime(2023, 1, 1)),
]


@pytest.mark.parametrize(("zone", "frequency", "seconds", "wall"), STEPS)
def test_the_pages_steps_are_the_services(
    open_page: object, zone: str | None, frequency: str, seconds: int, wall: datetime
) -> None:
    from datetime import UTC

    from rsa_core.calendar import calendar_step
    from rsa_core.steps import shifted

    session = open_page("/ui")  # type: ignore[operator]
    t0 = int(wall.replace(tzinfo=ZoneInfo(zone) if zone else UTC).timestamp())
    ks = list(range(-3, 8))
    version = {"frequency": frequency, "frequency_seconds": seconds, "timezone": zone}
    got = session.page.evaluate(
        "([v, t0, ks]) => { const step = window.__rsaUi.stepper(v); return ks.map((k) => step(t0, k)); }",
        [version, t0, ks],
    )
    months = calendar_step(frequency)
    want = shifted(np.array([t0], "datetime64[s]"), ks, seconds, months, ZoneInfo(zone) if zone else None)
    assert got == want[0].astype(np.int64).tolist()
    assert session.console_errors == []
