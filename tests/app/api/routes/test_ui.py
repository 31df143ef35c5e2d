"""GET /ui and /ui/{model}: the inspector page and its assets, served by the app itself (no CDN), open
when API keys are set while the data calls it makes are not. The page in a browser: tests/app/ui."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.api.routes.ui import CONTENT_SECURITY_POLICY, UI_DIR
from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[4]
ASSETS = {
    "app.js": "javascript",
    "evaluation.js": "javascript",
    "style.css": "text/css",
    "vendor/uplot/uPlot.iife.min.js": "javascript",
    "vendor/uplot/uPlot.min.css": "text/css",
    "examples/forecast_request.json": "application/json",
}


def test_page_and_assets_are_served_from_the_package(client: TestClient) -> None:
    for path in ("/ui", "/ui/toy"):
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), path
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert (
            "connect-src 'self'" in CONTENT_SECURITY_POLICY and "script-src 'self'" in CONTENT_SECURITY_POLICY
        )
    sources = re.findall(r"""(?:src|href)=["']([^"']+)""", page.text)
    static = [
        "vendor/uplot/uPlot.min.css",
        "style.css",
        "vendor/uplot/uPlot.iife.min.js",
        "app.js",
        "evaluation.js",
    ]
    assert sorted(sources) == sorted(["data:,", *(f"/ui/static/{s}" for s in static)])
    for asset, kind in ASSETS.items():
        r = client.get(f"/ui/static/{asset}")
        assert r.status_code == 200 and kind in r.headers["content-type"], asset
        assert r.content == (UI_DIR / asset).read_bytes()
    assert client.get("/ui/static/nope.js").status_code == 404
    assert not any(path.startswith("/ui") for path in client.get("/openapi.json").json()["paths"])


def test_vendored_uplot_is_the_pinned_release_with_its_licence() -> None:
    vendor = UI_DIR / "vendor" / "uplot"
    pinned = re.search(r"uPlot (\d+\.\d+\.\d+)", (vendor / "README.md").read_text())
    assert pinned
    version = pinned.group(1)
    assert (
        (vendor / "uPlot.iife.min.js")
        .read_text()
        .startswith(f"/*! https://github.com/leeoniya/uPlot (v{version}) */")
    )
    assert "MIT License" in (vendor / "LICENSE").read_text()
    assert f"uPlot {version}" in (UI_DIR / "index.html").read_text()
    for text in (UI_DIR / "app.js").read_text(), (UI_DIR / "index.html").read_text():
        assert not re.search(r"https?://", text)  # no other host named anywhere in the page


def test_the_bundled_example_is_the_readmes(client: TestClient) -> None:
    readme_example = ROOT / "docs" / "examples" / "forecast_request.json"
    assert readme_example.read_bytes() == client.get("/ui/static/examples/forecast_request.json").content


def test_page_is_open_with_api_keys_but_its_data_calls_are_not(toy_repository: Path) -> None:
    settings = make_settings(toy_repository, api_keys=[SecretStr("k")])
    with running_client(settings) as client:
        assert client.get("/ui").status_code == 200
        assert client.get("/ui/toy").status_code == 200
        assert client.get("/ui/static/app.js").status_code == 200
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers={"Authorization": "Bearer k"}).status_code == 200
