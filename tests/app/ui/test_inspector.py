"""The inspector page (app/ui, GET /ui) in headless Chromium against the real service on the shipped
model: the plots hold exactly the API's answer, API errors land at the field they name, the recurrence
view has one row per head, nothing leaves the loopback and the console stays clean. Each view is
saved as a screenshot under the test's tmp dir (and, with RSA_UI_SCREENSHOT_DIR set, as the small
palette PNGs the README shows: `RSA_UI_SCREENSHOT_DIR=docs/images python -m pytest tests/app/ui`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.app.live import LiveService
from tests.app.ui.conftest import ROOT, Session

EXAMPLE = json.loads((ROOT / "app" / "ui" / "examples" / "forecast_request.json").read_text())
MODEL, VERSION, L, H = "etth1-rsa", 5, 512, 96  # the shipped default
FAILED_LOAD = "Failed to load resource: the server responded with a status of 422"


def screenshot(locator: Any, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    locator.screenshot(path=str(path))
    assert path.stat().st_size > 10_000, path  # a picture, not a blank box
    published = os.environ.get("RSA_UI_SCREENSHOT_DIR")
    if published:
        from PIL import Image

        small = Image.open(path).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        small.save(Path(published) / f"ui-{name}.png", optimize=True)
    return path


def clean(session: Session, allowed: tuple[str, ...] = ()) -> None:
    """Nothing asked of another host; no console error but those `allowed` (by prefix)."""
    assert session.outside == [], session.outside
    errors = [e for e in session.console_errors if not e.startswith(allowed)]
    assert errors == [], errors


def api(service: LiveService, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{service.url}{path}", json=body, timeout=30)


@pytest.fixture(scope="module")
def submitted(open_page: Callable[[str], Session]) -> Iterator[Session]:
    """/ui, the shipped model chosen, the bundled example submitted, both views drawn."""
    session = open_page("/ui")
    page = session.page
    page.select_option("#model", MODEL)
    page.click("#load-example")
    session.wait("document.getElementById('data').value.length > 1000")
    page.click("#submit")
    session.wait("window.__rsaState.timings.forecast && window.__rsaState.timings.attention")
    yield session
    clean(session)


def test_the_model_panel_describes_the_default_version(submitted: Session) -> None:
    info = submitted.page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#model-info dd')]
               .map(dd => [dd.dataset.term, dd.textContent]))"""
    )
    assert submitted.page.eval_on_selector("#model-info", "e => e.dataset.kind") == "rem_readout"
    assert info["kind"].startswith("REM read-out")
    assert (info["input length L"], info["horizon H"]) == (str(L), str(H))
    assert info["channels"] == ", ".join(EXAMPLE["series"][0]["values"])
    assert info["calibrated levels"] == "50%, 80%, 90%, 95%, 99%"
    assert "seasonal cycle of 24 steps" in info["frequency"]
    assert info["heads"].startswith("87 in 1 layer(s)")


def test_forecast_plots_hold_the_apis_answer(
    submitted: Session, service: LiveService, tmp_path: Path
) -> None:
    page = submitted.page
    request = page.evaluate("() => window.__rsaState.forecast.request")
    series = EXAMPLE["series"][0]
    assert request == {
        "series": [{"values": series["values"], "id": series["id"], "start": series["start"]}],
        "horizon": H,
        "level": [80, 95],
    }
    shown = page.evaluate("() => window.__rsaState.forecast.response")
    answer = api(service, f"/v1/models/{MODEL}/versions/{VERSION}/forecast", request)
    assert answer.status_code == 200, answer.text
    (fc,) = answer.json()["forecasts"]
    (fc_shown,) = shown["forecasts"]
    for key in ("forecast", "lo-80", "hi-80", "lo-95", "hi-95"):
        np.testing.assert_allclose(fc_shown[key], fc[key], rtol=1e-6, atol=1e-6)  # the same call, again
    plots = page.evaluate(
        """() => window.__rsaState.plots.map(u => ({
            title: u.root.querySelector('.u-title').textContent,
            labels: u.series.map(s => s.label), data: u.data,
            bands: u.bands.map(b => b.series)}))"""
    )
    assert [p["title"].split(" ")[0] for p in plots] == fc["channels"]
    stamps = [datetime.fromisoformat(t).timestamp() for t in fc["timestamps"]]
    first = datetime.fromisoformat(series["start"] + "+00:00").timestamp()
    for c, plot in enumerate(plots):
        assert plot["labels"] == ["time (UTC)", "input", "forecast", "lo-95", "hi-95", "lo-80", "hi-80"]
        x, history, forecast, *bands = plot["data"]
        assert x == [first + 3600 * i for i in range(L)] + stamps  # real times: the window, then the answer's
        assert history[:L] == series["values"][fc["channels"][c]] and history[L:] == [None] * H
        assert forecast[:L] == [None] * L
        assert forecast[L:] == [row[c] for row in fc_shown["forecast"]]
        for label, values in zip(plot["labels"][3:], bands, strict=True):
            assert values[:L] == [None] * L
            assert values[L:] == [row[c] for row in fc_shown[label]], label
        assert plot["bands"] == [[4, 3], [6, 5]]  # hi-95 over lo-95, then hi-80 over lo-80
    screenshot(page.locator("#forecast-view"), tmp_path, "forecast")
    screenshot(page.locator("#inputs"), tmp_path, "inputs")


def test_recurrence_view_has_one_row_per_head_sorted_by_weight(
    submitted: Session, service: LiveService, tmp_path: Path
) -> None:
    page = submitted.page
    request = page.evaluate("() => window.__rsaState.attention.request")
    assert request["channel"] == 6  # the dataset's target, OT, chosen by default
    answer = api(service, f"/v1/models/{MODEL}/versions/{VERSION}/attention", request).json()
    heads = answer["layers"][0]["heads"]
    rows = page.evaluate(
        """() => [...document.querySelectorAll('.layer[data-layer="0"] .head-row')].map(r => ({
            head: Number(r.dataset.head), label: r.querySelector('.head-label').innerText,
            canvases: [...r.querySelectorAll('canvas')].map(c => [c.dataset.matrix, c.width, c.height])}))"""
    )
    assert len(rows) == len(heads) == 87
    assert sorted(r["head"] for r in rows) == list(range(87))
    weights = {h["head"]: float(np.abs(np.asarray(h["matrices"]["mixed"])).sum()) for h in heads}
    order = [r["head"] for r in rows]
    shown = [weights[h] for h in order]
    assert np.all(np.diff(shown) <= 1e-9 * max(shown)), order  # heaviest first (ties in either order)
    for row in rows:
        head = heads[row["head"]]
        assert row["canvases"] == [["softmax", L, 1], ["rem", L, 1], ["mixed", L, 1]]
        assert f"#{head['head']}" in row["label"] and head["kind"] in row["label"]
    scales = page.evaluate("() => [...document.querySelectorAll('.scale')].map(s => s.innerText)")
    assert "sequential" in scales[0] and "percentile" in scales[0] and "diverging" in scales[1]
    assert page.locator(".gate-legend").count() == 1
    screenshot(page.locator("#recurrence-view"), tmp_path, "recurrence")
    # The Performance API's measures, as the page took them (reported, not asserted: tests never time).
    timings = page.evaluate("() => window.__rsaState.timings")
    measures = page.evaluate("() => performance.getEntriesByType('measure').map(m => m.name)")
    assert {"attention: parse", "attention: draw", "attention: page", "forecast: page"} <= set(measures)
    assert all(v > 0 for v in timings["attention"].values()), timings
    print(f"\ninspector timings, ms: {json.dumps(timings)}")


@pytest.fixture
def fresh(open_page: Callable[[str], Session]) -> Session:
    """A new page at /ui/etth1-rsa (the model chosen by the address) with the example loaded."""
    session = open_page(f"/ui/{MODEL}")
    assert session.page.input_value("#model") == MODEL
    session.page.click("#load-example")
    session.wait("document.getElementById('data').value.length > 1000")
    return session


def _csv(bad_row: int, bad_column: str) -> str:
    """The example as CSV with a date column, the cell at (bad_row, bad_column) a word."""
    columns = EXAMPLE["series"][0]["values"]
    names = list(columns)
    start = datetime.fromisoformat(EXAMPLE["series"][0]["start"])
    lines = [",".join(["date", *names])]
    for i in range(L):
        cells = ["abc" if (i, n) == (bad_row, bad_column) else repr(columns[n][i]) for n in names]
        lines.append(",".join([str(start + timedelta(hours=i)), *cells]))
    return "\n".join(lines)


def test_api_errors_are_shown_at_the_field_they_name(
    fresh: Session, service: LiveService, tmp_path: Path
) -> None:
    page = fresh.page
    url = f"/v1/models/{MODEL}/versions/{VERSION}/forecast"

    def submit_and_read(slot: str) -> tuple[str, str | None, dict[str, Any]]:
        page.click("#submit")
        box = f'[data-error-for="{slot}"]'
        fresh.wait(f"document.querySelector('{box}').textContent !== ''")
        request = page.evaluate("() => window.__rsaState.input")
        return page.inner_text(box), page.get_attribute(box, "data-field"), request

    page.fill("#horizon", "500")  # beyond the model's 96
    text, field, _ = submit_and_read("horizon")
    body = {"series": [EXAMPLE["series"][0]], "horizon": 500, "level": [80, 95]}
    error = api(service, url, body).json()["error"]
    assert (text, field) == (error["message"], error["field"]) == (text, "horizon")
    assert page.get_attribute("#horizon", "aria-invalid") == "true"

    page.fill("#horizon", "24")
    page.fill("#data", _csv(bad_row=3, bad_column="OT"))  # a CSV with a word where a number belongs
    page.fill("#start", "2018-01-26T16:00:00")
    text, field, parsed = submit_and_read("data")
    body = {"series": [{"values": parsed["values"], "start": parsed["start"]}], "horizon": 24}
    error = api(service, url, body).json()["error"]
    assert (text, field) == (error["message"], error["field"]) == (text, "series[0].values.OT[3]")
    assert page.inner_text('[data-error-for="horizon"]') == ""  # the earlier error is gone
    screenshot(page.locator("#data-panel"), tmp_path, "error")

    page.fill("#data", _csv(bad_row=-1, bad_column=""))
    page.fill("#start", "")  # the model has a daily cycle: start is required
    text, field, _ = submit_and_read("start")
    assert field == "series[0].start" and "required" in text
    clean(fresh, allowed=(FAILED_LOAD,))  # the browser logs each 422 it was answered; nothing else


def test_the_key_is_sent_and_kept_in_memory_only(fresh: Session) -> None:
    page = fresh.page
    page.fill("#api-key", "not-a-real-key")
    page.press("#api-key", "Enter")
    fresh.wait("[...document.querySelectorAll('#model option')].length > 0")
    fresh.wait("window.__rsaState.key === 'not-a-real-key'")
    page.click("#submit")
    fresh.wait("window.__rsaState.timings.forecast && window.__rsaState.timings.attention")
    api_calls = [r for r in fresh.requests if "/v1/" in r.url]
    keyed = [r for r in api_calls if r.headers.get("authorization") == "Bearer not-a-real-key"]
    assert {r.url.rsplit("/", 1)[-1] for r in keyed} >= {"models", "forecast", "attention"}
    stored = page.evaluate(
        "() => [JSON.stringify(localStorage), JSON.stringify(sessionStorage), document.cookie, location.href]"
    )
    assert not any("not-a-real-key" in s for s in stored), stored
    clean(fresh)


def test_a_request_off_the_loopback_is_caught(open_page: Callable[[str], Session]) -> None:
    """The guard the other tests rely on: a request to another host is recorded and refused."""
    session = open_page("/ui")
    with pytest.raises(Exception, match="net::ERR_FAILED"):
        session.page.goto("http://192.0.2.1/ui")  # TEST-NET-1: never routable
    assert session.outside == ["http://192.0.2.1/ui"]


def test_render_bench_runs_on_the_page(submitted: Session, service: LiveService) -> None:
    """bench.ui_render's rounds, one of each, so that it does not rot (no timing asserted)."""
    from bench.ui_render import compare, pydantic_answer, report

    request = submitted.page.evaluate("() => window.__rsaState.attention.request")
    now = api(service, f"/v1/models/{MODEL}/versions/{VERSION}/attention", request).content
    times = compare(submitted.page, now, rounds=1)
    sizes = {"orjson": len(now), "pydantic": len(pydantic_answer(json.loads(now)))}
    lines = report(times, sizes).splitlines()
    assert [line.split()[0] for line in lines] == ["answer", "orjson", "pydantic"]
    assert all(len(v) == 1 and v[0] > 0 for measures in times.values() for v in measures.values())
    assert sizes["orjson"] < sizes["pydantic"]
