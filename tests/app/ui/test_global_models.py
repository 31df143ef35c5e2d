"""The inspector page on a hybrid and a global RSA-Transformer (issue 48), each trained and exported in
the test (tests/utils/panel.py's hybrid on M3 monthly series; the shops transformer of
tests/app/protocols/rsa_v1/test_global_attention.py): a hybrid's recurrence view shows its lag weights,
each term's share and its members' weights; a transformer's, its heads' matrices over its L + H tokens.
What the page draws is /v1 attention's answer for the series its forecast sent."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.app.live import LiveService, live_service
from tests.app.protocols.rsa_v1.test_global_attention import _shops_model
from tests.app.ui.conftest import Session
from tests.app.ui.test_inspector import clean, screenshot
from tests.utils.panel import NAME, publish, store, unseen


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    """One repository: the hybrid (`stores`) and the global transformer (`shops`)."""
    folder = tmp_path_factory.mktemp("ui-global")
    (folder / "hybrid").mkdir()
    repo, _ = publish(folder / "hybrid", local=True)
    (folder / "transformer").mkdir()
    shops, _ = _shops_model(folder / "transformer", network=True)
    shutil.copytree(shops / "shops", repo / "shops")
    with live_service(repo, folder / "service.log", RSA_DEVICE="cpu") as live:
        yield live


def submit(session: Session, tmp_path: Path, csv: str) -> dict[str, Any]:
    path = tmp_path / "series.csv"
    path.write_text(csv)
    session.page.set_input_files("#file", str(path))
    session.wait("document.getElementById('data-summary').textContent !== ''")
    session.page.click("#submit")
    session.wait("window.__rsaState.timings.forecast && window.__rsaState.timings.attention")
    return session.page.evaluate("() => window.__rsaState.attention")


def test_a_hybrids_members_and_shares_are_drawn(open_page: Any, service: LiveService, tmp_path: Path) -> None:
    session = open_page(f"/ui/{NAME}")
    start, _ = unseen()["store_new"]
    values = store(99, 72)  # long enough for the local models (min_values: 36 or 48 months)
    months = [f"{2021 + (2 + i) // 12}-{(2 + i) % 12 + 1:02d}-01" for i in range(len(values))]
    assert months[0] == start
    csv = "ds,y\n" + "".join(f"{d},{v}\n" for d, v in zip(months, values, strict=True))
    shown = submit(session, tmp_path, csv)
    answer = httpx.post(f"{service.url}/v1/models/{NAME}/attention", json=shown["request"], timeout=30)
    assert answer.status_code == 200 and shown["response"] == answer.json()
    hybrid = answer.json()["hybrid"]
    rows = session.page.evaluate(
        """() => [...document.querySelectorAll('#hybrid-members tr')].slice(1).map(tr =>
               [...tr.querySelectorAll('td')].slice(0, 2).map(td => td.textContent))"""
    )
    assert [r[0] for r in rows] == [m["name"] for m in hybrid["members"]] + ["forecast"]
    said = f"the local models decompose this series by {hybrid['season']} steps"
    assert hybrid["season"] == 12 and session.page.locator("h3", has_text=said).count() == 1
    assert session.page.locator("#kernel-shares .share-row").count() == (
        len(answer.json()["readout"]["kernels"]) + 3
    )
    screenshot(session.page.locator("#recurrence-view"), tmp_path, "global-hybrid")
    clean(session)


def test_a_global_transformers_heads_are_drawn(open_page: Any, service: LiveService, tmp_path: Path) -> None:
    from tests.export.test_covariates_served import DAYS, H, write_shops

    session = open_page("/ui/shops")
    s = write_shops(tmp_path / "shops.csv", n=8)["shop_0"]
    n = DAYS - H
    lines = ["ds,y,promo,size"]
    for k in range(n + H):
        y = repr(float(s["y"][k])) if k < n else ""
        lines.append(f"{s['stamps'][k].date().isoformat()},{y},{int(s['promo'][k])},{s['size']}")
    shown = submit(session, tmp_path, "\n".join(lines) + "\n")
    answer = shown["response"]
    heads = answer["layers"][0]["heads"]
    tokens = len(heads[0]["matrices"]["mixed"])
    assert tokens == answer["input_length"] + H
    canvases = session.page.evaluate(
        """() => [...document.querySelectorAll('.layer .head-row canvas')].map(c => [c.width, c.height])"""
    )
    assert canvases and all(c == [tokens, tokens] for c in canvases)
    clean(session)
