"""The inspector's covariate block on a covariate model trained and exported in the test (the
`write_shops` panel of tests/export/test_covariates_served.py: future `promo`, past `footfall`, static
`size`, calendar `dayofweek`): the block lists what the model reads; a dropped CSV's columns and its rows
after the target's last value become the request's `past`, `static` and `future`; a typed future field
does the same; what is missing is said at the block before any request."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from export.panel import cli
from tests.app.live import LiveService, live_service
from tests.app.ui.conftest import Session
from tests.app.ui.test_inspector import screenshot
from tests.export.test_covariates_served import H, write_shops

NAME, N = "shops", 60  # 60 days of history sent


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The shops panel written, a covariate model trained on it and exported: (repository, shops)."""
    folder = tmp_path_factory.mktemp("ui-covariates")
    shops = write_shops(folder / "shops.csv")
    data = str(folder / "shops.csv")
    runner = CliRunner()
    options = ["--future", "promo", "--past", "footfall", "--static", "size", "--calendar", "dayofweek"]
    train = runner.invoke(
        cli,
        [
            "train",
            "--data",
            data,
            "--horizon",
            str(H),
            "--input-periods",
            "4",
            *options,
            "--out",
            str(folder / "run"),
        ],
    )
    assert train.exit_code == 0, train.output
    repo = folder / "repo"
    args = ["export", "--model", str(folder / "run" / "model.json"), "--name", NAME]
    export = runner.invoke(cli, [*args, "--repository", str(repo), "--data", data])
    assert export.exit_code == 0, export.output
    return repo, shops


@pytest.fixture(scope="module")
def shops(trained: tuple[Path, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return trained[1]


@pytest.fixture(scope="module")
def service(
    trained: tuple[Path, dict[str, dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveService]:
    log = tmp_path_factory.mktemp("ui-covariates-log") / "service.log"
    with live_service(trained[0], log, RSA_DEVICE="cpu", RSA_DRAIN_DELAY_S="0") as live:
        yield live


def shop_csv(
    s: dict[str, Any], future_rows: int, columns: tuple[str, ...] = ("promo", "footfall", "size")
) -> str:
    """Shop `s`'s first N days as a CSV, then `future_rows` rows with the target empty."""
    lines = [",".join(["ds", "y", *columns])]
    for k in range(N + future_rows):
        cells = {
            "promo": str(int(s["promo"][k])),
            "footfall": repr(float(s["footfall"][k])),
            "size": s["size"],
        }
        y = repr(float(s["y"][k])) if k < N else ""
        lines.append(",".join([s["stamps"][k].date().isoformat(), y, *(cells[c] for c in columns)]))
    return "\n".join(lines) + "\n"


def drop(session: Session, tmp_path: Path, text: str) -> None:
    path = tmp_path / "shop.csv"
    path.write_text(text)
    session.page.set_input_files("#file", str(path))
    session.wait("document.getElementById('data-summary').textContent !== ''")


def expected_series(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "values": s["y"][:N].tolist(),
        "start": s["stamps"][0].date().isoformat(),
        "past": {"footfall": s["footfall"][:N].tolist()},
        "static": {"size": s["size"]},
        "future": {"promo": s["promo"][N : N + H].tolist()},
    }


@pytest.fixture()
def page_for(open_page: Callable[[str], Session]) -> Iterator[Session]:
    session = open_page(f"/ui/{NAME}")
    yield session
    assert session.outside == [] and session.console_errors == []


def test_the_block_lists_the_models_covariates(page_for: Session) -> None:
    page = page_for.page
    assert page.is_visible("#covariates")
    rows = page.evaluate(
        """() => [...document.querySelectorAll('#covariate-table tbody tr')].map(tr =>
               [...tr.querySelectorAll('td')].slice(0, 4).map(td => td.textContent))"""
    )
    assert sorted(rows) == sorted(
        [
            ["promo", "future", "float", "yes"],
            ["footfall", "past", "float", "no"],
            ["size", "static", "category: big, small", "no"],
            ["dayofweek", "calendar", "derived", "yes"],
        ]
    )
    assert page.is_visible("#future-promo")
    kind = page.inner_text('#model-info dd[data-term="kind"]')
    assert kind.startswith("global REM read-out") and "no attention" in kind
    assert page.locator('#model-info dd[data-term="heads"]').count() == 0


def test_csv_columns_and_rows_after_the_target_are_sent_and_plotted(
    page_for: Session, service: LiveService, shops: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    page, s = page_for.page, shops["shop_3"]
    drop(page_for, tmp_path, shop_csv(s, future_rows=H))
    page.click("#submit")
    page_for.wait("window.__rsaState.timings.forecast")
    request = page.evaluate("() => window.__rsaState.forecast.request")
    assert request["series"] == [expected_series(s)]
    assert page.evaluate("() => window.__rsaState.attention") is None  # a global model has none
    again = httpx.post(f"{service.url}/v1/models/{NAME}/forecast", json=request, timeout=30)
    assert again.status_code == 200, again.text
    (fc,) = again.json()["forecasts"]
    ((x, history, forecast, *_),) = page.evaluate("() => window.__rsaState.plots.map(u => u.data)")
    L = len(history) - H
    stamps = [datetime.fromisoformat(t).timestamp() for t in fc["timestamps"]]
    assert (
        x[L:] == stamps
        and stamps[0] == datetime.fromisoformat(f"{s['stamps'][N].date()}T00:00:00+00:00").timestamp()
    )
    assert history[:L] == s["y"][N - L : N].tolist()
    assert forecast[L:] == [row[0] for row in fc["forecast"]]
    # Without the promotions the same call forecasts differently: the future covariate is read.
    flat = json.loads(json.dumps(request))
    flat["series"][0]["future"]["promo"] = [0.0] * H
    other = httpx.post(f"{service.url}/v1/models/{NAME}/forecast", json=flat, timeout=30).json()
    assert other["forecasts"][0]["forecast"] != fc["forecast"]


def test_a_typed_future_field_is_sent(
    page_for: Session, shops: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    page, s = page_for.page, shops["shop_5"]
    drop(page_for, tmp_path, shop_csv(s, future_rows=0))
    page.fill("#future-promo", ", ".join(str(int(v)) for v in s["promo"][N : N + H]))
    page.click("#submit")
    page_for.wait("window.__rsaState.timings.forecast")
    assert page.evaluate("() => window.__rsaState.forecast.request")["series"] == [expected_series(s)]
    screenshot(page.locator("#inputs"), tmp_path, "covariates")


def test_missing_covariates_are_said_on_the_page_before_any_request(
    page_for: Session, shops: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    page, s = page_for.page, shops["shop_1"]
    drop(page_for, tmp_path, shop_csv(s, future_rows=2, columns=("promo", "size")))
    page.click("#submit")
    box = '[data-error-for="covariates"]'
    page_for.wait(f"document.querySelector('{box}').textContent !== ''")
    assert page.inner_text(box) == (
        "past covariate footfall: the data has no column footfall (one value per target value); "
        f"future covariate promo: needs {H} values, one per horizon step; 2 in 2 CSV rows after the last y "
        f"value: type {H} in its field or add {H} CSV rows after the last y value"
    )
    page.fill("#future-promo", "1, 0, x")
    page.click("#submit")
    page_for.wait(f"document.querySelector('{box}').textContent.includes('\"x\" is not a number')")
    assert [r.url for r in page_for.requests if r.method == "POST"] == []


def test_the_services_covariate_error_lands_at_the_block(
    open_page: Callable[[str], Session], shops: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    session = open_page(f"/ui/{NAME}")
    page, s = session.page, shops["shop_2"]
    text = shop_csv(s, future_rows=H).replace(f",{s['size']}\n", ",huge\n")  # not a training category
    drop(session, tmp_path, text)
    page.click("#submit")
    box = '[data-error-for="covariates"]'
    session.wait(f"document.querySelector('{box}').textContent !== ''")
    assert page.get_attribute(box, "data-field") == "series[0].static.size"
    assert "training categories" in page.inner_text(box)
    assert page.inner_text('[data-error-for="data"]') == ""
    failed = "Failed to load resource: the server responded with a status of 422"
    assert session.outside == [] and [e for e in session.console_errors if not e.startswith(failed)] == []
