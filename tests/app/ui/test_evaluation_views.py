"""The inspector's backtest and anomalies views (app/ui/evaluation.js) in headless Chromium against the
real service on the shipped model: each plot holds exactly the API's answer for the request the page
sent, the metrics shown are the answer's, an API error lands in the panel naming its field, nothing
leaves the loopback and the console stays clean. Screenshots as tests/app/ui/test_inspector.py takes
them (`RSA_UI_SCREENSHOT_DIR=docs/images` publishes ui-backtest.png and ui-anomalies.png)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.app.live import LiveService
from tests.app.ui.conftest import ROOT, Session
from tests.app.ui.test_inspector import api, clean, screenshot

EXAMPLE = json.loads((ROOT / "app" / "ui" / "examples" / "backtest_request.json").read_text())
MODEL, VERSION = "etth1-rsa", 5
FAILED_LOAD = "Failed to load resource: the server responded with a status of 422"


@pytest.fixture(scope="module")
def page_with_history(open_page: Callable[[str], Session]) -> Iterator[Session]:
    session = open_page("/ui")
    page = session.page
    page.select_option("#model", MODEL)
    page.click("#load-history")
    session.wait("document.getElementById('data').value.length > 100000")
    yield session


def test_the_backtest_view_draws_each_cutoffs_forecast_over_the_actuals(
    page_with_history: Session, service: LiveService, tmp_path: Path
) -> None:
    session = page_with_history
    page = session.page
    page.click("#run-backtest")
    session.wait("window.__rsaState.backtest && window.__rsaState.evaluationPlots.length")
    request = page.evaluate("() => window.__rsaState.backtest.request")
    series = EXAMPLE["series"][0]
    assert request["series"] == [{"values": series["values"], "id": series["id"], "start": series["start"]}]
    assert (request["horizon"], request["n_windows"], request["step_size"]) == (24, 8, 24)
    answer = api(service, f"/v1/models/{MODEL}/versions/{VERSION}/cross_validation", request)
    assert answer.status_code == 200, answer.text
    want = answer.json()
    shown = page.evaluate("() => window.__rsaState.backtest.response")
    assert shown["metrics"] == want["metrics"]
    terms = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#backtest-metrics dd')]
               .map(dd => [dd.dataset.term, dd.textContent]))"""
    )
    assert float(terms["MAE"]) == pytest.approx(want["metrics"]["mae"], rel=1e-3)  # 4 digits shown
    plots = page.evaluate(
        """() => window.__rsaState.evaluationPlots
             .map(u => ({labels: u.series.map(s => s.label), data: u.data}))"""
    )
    windows = want["series"][0]["windows"]
    assert len(plots) == len(want["channels"])
    first = windows[0]["cutoff"] - 24
    for c, (name, plot) in enumerate(zip(want["channels"], plots, strict=True)):
        x, actual, *lines = plot["data"]
        assert len(x) == len(actual) == len(series["values"][name]) - first
        assert actual == series["values"][name][first:]
        assert plot["labels"][1] == "actual" and plot["labels"][2] == f"cutoff {windows[0]['cutoff']}"
        for j, w in enumerate(windows):
            line, lo, hi = lines[3 * j : 3 * j + 3]
            at = w["cutoff"] - first
            assert line[at : at + 24] == [row[c] for row in shown["series"][0]["windows"][j]["forecast"]]
            assert [v for v in line if v is not None] == line[at : at + 24]
            assert lo[at : at + 24] == [row[c] for row in shown["series"][0]["windows"][j]["lo-80"]]
            assert hi[at : at + 24] == [row[c] for row in shown["series"][0]["windows"][j]["hi-80"]]
    screenshot(page.locator("#backtest-view"), tmp_path, "backtest")
    clean(session)


def test_the_anomalies_view_marks_the_flagged_values(
    page_with_history: Session, service: LiveService, tmp_path: Path
) -> None:
    session = page_with_history
    page = session.page
    page.fill("#anomaly-last", "72")
    # A spike in OT 30 rows before the end, written into the data field as a user would edit it.
    page.evaluate(
        """() => { const area = document.getElementById('data'); const doc = JSON.parse(area.value);
                   const ot = doc.series[0].values.OT; ot[ot.length - 30] += 15;
                   area.value = JSON.stringify(doc); }"""
    )
    page.click("#run-anomalies")
    session.wait("window.__rsaState.anomalies && document.getElementById('anomalies-charts').children.length")
    request = page.evaluate("() => window.__rsaState.anomalies.request")
    assert (request["level"], request["last"]) == (99, 72)
    answer = api(service, f"/v1/models/{MODEL}/versions/{VERSION}/detect_anomalies", request)
    assert answer.status_code == 200, answer.text
    result = answer.json()["series"][0]
    shown = page.evaluate("() => window.__rsaState.anomalies.response")["series"][0]
    assert shown["anomaly"] == result["anomaly"] and shown["index"] == result["index"]
    plots = page.evaluate(
        """() => window.__rsaState.evaluationPlots
             .filter(u => u.root.closest('#anomalies-charts'))
             .map(u => ({labels: u.series.map(s => s.label), data: u.data}))"""
    )
    for c, plot in enumerate(plots):
        assert plot["labels"][1:] == ["actual", "forecast", "lo-99", "hi-99", "anomaly"]
        _, actual, forecast, lo, hi, flagged = plot["data"]
        assert actual == [row[c] for row in shown["actual"]]
        assert forecast == [row[c] for row in shown["forecast"]]
        assert (lo, hi) == ([row[c] for row in shown["lo"]], [row[c] for row in shown["hi"]])
        assert flagged == [a if f[c] else None for a, f in zip(actual, shown["anomaly"], strict=True)]
    spike = shown["index"].index(len(EXAMPLE["series"][0]["values"]["OT"]) - 30)
    assert shown["anomaly"][spike][6] and plots[6]["data"][5][spike] is not None
    summary = page.text_content("#anomalies-summary")
    assert summary.startswith(f"{result['anomalies']} of {72 * 7} values flagged at level 99%")
    screenshot(page.locator("#anomalies-view"), tmp_path, "anomalies")
    clean(session)


def test_an_error_names_its_field_in_the_panel(page_with_history: Session) -> None:
    session = page_with_history
    page = session.page
    page.fill("#n-windows", "500")
    page.click("#run-backtest")
    session.wait("document.querySelector('[data-error-for=evaluation]').textContent")
    box = page.locator("[data-error-for=evaluation]")
    assert box.get_attribute("data-field") == "n_windows"
    assert box.text_content().startswith("n_windows: n_windows = 500")
    page.fill("#n-windows", "8")
    clean(session, allowed=(FAILED_LOAD,))
