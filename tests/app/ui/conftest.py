"""The inspector page in a real headless Chromium: Debian's `chromium` (scripts/ci-tools.sh installs it)
driven by Playwright for Python through `executable_path`, never a downloaded browser. One service
(`python -m app` on the shipped model repository, CPU) and one browser per module; each page runs in a
context whose every request is checked to stay on the loopback, and whose console must stay free of
errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.app.live import LiveService, live_service
from tests.deploy.conftest import need_tool

ROOT = Path(__file__).resolve().parents[3]
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    log = tmp_path_factory.mktemp("ui-service") / "service.log"
    # No drain delay: nothing balances load onto this process, and its teardown should not wait.
    with live_service(ROOT / "model_repository", log, RSA_DEVICE="cpu") as live:
        yield live


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = need_tool("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True)
        yield launched
        launched.close()


@dataclass
class Session:
    """A page, with what it asked for off the loopback and what its console said."""

    page: Any
    outside: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)

    def wait(self, expression: str, timeout_s: float = 20.0) -> Any:
        """Poll a JavaScript expression until it is truthy. (Playwright's wait_for_function evaluates
        a string with eval, which the page's Content-Security-Policy rightly refuses.)"""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.page.evaluate(f"() => {expression}")
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s}s waiting for {expression}")
            time.sleep(0.03)


def _guard(outside: list[str]) -> Callable[[Any], None]:
    def route(route: Any) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob") or parts.hostname in LOOPBACK:
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    return route


@pytest.fixture(scope="module")
def open_page(browser: Any, service: LiveService) -> Iterator[Callable[[str], Session]]:
    """Opens `service.url + path` in a fresh context (1280 wide) and returns its Session; each
    context is closed after the module."""
    contexts: list[Any] = []

    def open_(path: str) -> Session:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        session = Session(context.new_page())
        context.route("**/*", _guard(session.outside))
        session.page.on(
            "console", lambda m: session.console_errors.append(m.text) if m.type == "error" else None
        )
        session.page.on("pageerror", lambda e: session.console_errors.append(f"page error: {e}"))
        session.page.on("request", lambda r: session.requests.append(r))
        session.page.goto(f"{service.url}{path}")
        session.wait("window.__rsaState && window.__rsaState.version")
        return session

    yield open_
    for context in contexts:
        context.close()
