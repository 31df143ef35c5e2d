"""The README's examples work as printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_models_example_runs():
    code = next(b for b in blocks("python") if "build_rem" in b)
    assert len(code.strip().splitlines()) <= 6
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert tuple(scope["P"].shape) == (8, 8)
    assert tuple(scope["y"].shape) == (4, 24, 7)
    assert tuple(scope["attn"]["mixed"].shape) == (4, 7, 1, 4, 96, 96)


def test_curl_example_answer_is_what_the_service_says():
    curl = next(b for b in blocks("bash") if "curl" in b)
    request_file = re.search(r"-d @(\S+)", curl).group(1)
    path = re.search(r"127\.0\.0\.1:8000(\S+)", curl).group(1)
    printed = json.loads(next(b for b in blocks("json") if '"forecasts"' in b))
    body = json.loads((ROOT / request_file).read_text())
    with running_client(make_settings(ROOT / "model_repository")) as client:
        r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert {k: v for k, v in got.items() if k != "forecasts"} == {
        k: v for k, v in printed.items() if k != "forecasts"
    }
    for a, b in zip(got["forecasts"], printed["forecasts"], strict=True):
        assert (a["id"], a["channels"], a["timestamps"]) == (b["id"], b["channels"], b["timestamps"])
        np.testing.assert_allclose(a["forecast"], b["forecast"], atol=1e-4)
