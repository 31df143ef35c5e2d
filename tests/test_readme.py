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
        bands = [k for k in b if k.startswith(("lo-", "hi-", "q-"))]  # the prediction intervals shown
        assert bands and bands == [k for k in a if k.startswith(("lo-", "hi-", "q-"))]
        for k in bands:
            np.testing.assert_allclose(a[k], b[k], atol=1e-4)


def test_bring_your_own_csv_walkthrough_works_as_printed(tmp_path: Path) -> None:
    """Every command of the walk-through, as printed (its folders moved under tmp_path), then its curl
    request against the exported model."""
    import shlex
    import subprocess
    import sys

    block = next(b for b in blocks("bash") if "export.example_data" in b)
    commands = [line.split("  #")[0].strip() for line in block.replace("\\\n", " ").splitlines()]

    def here(text: str) -> str:  # the walk-through's two folders, wherever they appear as words
        return re.sub(r"(?<![\w./-])(runs|my_models)\b", lambda m: f"{tmp_path}/{m[1]}", text)

    curl = next(c for c in commands if c.startswith("curl"))
    for command in commands:
        if not command.startswith(".venv/bin/python"):
            continue  # the server runs in-process below; curl's request is sent to it
        argv = shlex.split(here(command).replace(".venv/bin/python", sys.executable, 1))
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
        if "export.train" in command:
            assert "data: 5 missing value(s) filled (linear)" in proc.stdout, proc.stdout
    path = re.search(r"127\.0\.0\.1:8000(\S+)", curl).group(1)
    body = json.loads(Path(here(re.search(r"-d @(\S+)", curl).group(1))).read_text())
    with running_client(make_settings(tmp_path / "my_models")) as client:
        r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    forecast = r.json()["forecasts"][0]
    assert forecast["channels"] == ["load_mw", "temp_c"] and len(forecast["forecast"]) == 24
    assert forecast["timestamps"][0] == "2023-05-23T09:00:00+02:00"  # the hour after the last row sent
