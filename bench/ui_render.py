"""The inspector page's attention view (app/ui) in headless Chromium, as the page itself measures it
(Performance API), with the default model's answer (36 heads × 3 rows of 512) encoded as the service
encodes it now (orjson, each weight's float32 shortest form) and as the pydantic encoder did (17
digits), side by side in one run:

    .venv/bin/python -m bench.ui_render [--rounds 15]

Starts `python -m app` on the shipped model repository (CPU) and the system Chromium through Playwright
(`executable_path`, never a downloaded browser), submits the bundled example, then asks for the
attention again once per round (as choosing a channel does), answered from the harness with the
service's bytes ("orjson") or with the same answer as `bench.attention_encoding.pydantic_json` writes
it ("pydantic"), so that only the encoding differs; the rounds alternate. Prints the median of each
measure over the rounds, in ms:
- parse: the body read and `JSON.parse`d (`response.json()`);
- draw: the rows, heatmaps and scales built, until the next painted frame;
- page: both (what the 300 ms target of the page is about), and its ratio to pydantic's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench.attention_encoding import document_of, pydantic_json
from bench.harness.servers import local_server

REPO = Path(__file__).resolve().parents[1]
MEASURES = ("parse", "draw", "page")


def pydantic_answer(answer: dict[str, Any]) -> bytes:
    """The bytes the pydantic encoder wrote for this (orjson-encoded, parsed) answer: the same float32
    weights, widened."""
    return pydantic_json(document_of(answer))


def compare(page: Any, now: bytes, rounds: int) -> dict[str, dict[str, list[float]]]:
    """`rounds` of each encoding on a page that has drawn an attention answer: the page's measures.
    `now` is the service's answer to the page's attention request; both encodings are answered from
    here, so that only their bytes differ."""
    request = page.evaluate("() => window.__rsaState.attention.request")
    bodies = {"orjson": now, "pydantic": pydantic_answer(json.loads(now))}
    mode = {"now": "orjson"}

    def answer(route: Any) -> None:
        route.fulfill(status=200, content_type="application/json", body=bodies[mode["now"]])

    page.route("**/attention", answer)
    times: dict[str, dict[str, list[float]]] = {k: {m: [] for m in MEASURES} for k in ("orjson", "pydantic")}
    try:
        for _ in range(rounds):
            for encoding in ("orjson", "pydantic"):
                mode["now"] = encoding
                page.evaluate("() => { window.__rsaState.timings.attention = null; }")
                page.dispatch_event("#channel", "change")
                deadline = time.monotonic() + 30
                while (timing := page.evaluate("() => window.__rsaState.timings.attention")) is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError("the page drew no attention answer in 30 s")
                    time.sleep(0.01)
                assert page.evaluate("() => window.__rsaState.attention.request") == request
                for m in MEASURES:
                    times[encoding][m].append(timing[m])
    finally:
        page.unroute("**/attention", answer)
    return times


def report(times: dict[str, dict[str, list[float]]], size: dict[str, int]) -> str:
    """One line per encoding: bytes, the median of each measure, and `page` over pydantic's."""
    base = statistics.median(times["pydantic"]["page"])
    header = f"{'answer':<10}{'bytes':>10}" + "".join(f"{m + ' ms':>10}" for m in MEASURES) + f"{'ratio':>8}"
    lines = [header]
    for encoding, measures in times.items():
        cells = "".join(f"{statistics.median(measures[m]):>10.1f}" for m in MEASURES)
        ratio = statistics.median(measures["page"]) / base
        lines.append(f"{encoding:<10}{size[encoding]:>10}{cells}{ratio:>8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium is not installed (scripts/ci-tools.sh installs it as root)")
    from playwright.sync_api import sync_playwright

    with local_server({"RSA_DEVICE": "cpu", "RSA_INTRA_OP_THREADS": "1"}) as live:
        url = live.url
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/ui/etth1-rsa")
            page.click("#load-example")
            page.click("#submit")
            deadline = time.monotonic() + 30
            while not page.evaluate("() => window.__rsaState.timings.attention"):
                if time.monotonic() > deadline:
                    raise SystemExit("the page drew no attention answer in 30 s")
                time.sleep(0.05)
            request = page.evaluate("() => window.__rsaState.attention.request")
            now = httpx.post(f"{url}/v1/models/etth1-rsa/attention", json=request, timeout=30).content
            answer = json.loads(now)
            sizes = {"orjson": len(now), "pydantic": len(pydantic_answer(answer))}
            times = compare(page, now, args.rounds)
            version = browser.version
            browser.close()
    heads = sum(len(layer["heads"]) for layer in answer["layers"])
    print(
        f"etth1-rsa v{answer['version']}: {heads} heads, query {answer['query']}, "
        f"L={answer['input_length']}; Chromium {version}, {args.rounds} rounds of each, alternating"
    )
    print(report(times, sizes))


if __name__ == "__main__":
    main()
