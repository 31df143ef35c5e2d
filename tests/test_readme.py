"""The README's examples, and those of the guide pages its tour links (docs/service.md, models.md,
training.md, export.md), work as printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
GUIDE = README + "".join(
    (ROOT / "docs" / page).read_text() for page in ("service.md", "models.md", "training.md", "export.md")
)


def blocks(lang: str, text: str = GUIDE) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_models_example_runs():
    code = next(b for b in blocks("python") if "build_rem" in b)
    assert len(code.strip().splitlines()) <= 6
    scope: dict = {}
    exec(compile(code, "docs/models.md", "exec"), scope)
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


def test_the_training_set_up_command_is_the_setup_script_and_installs_cpu_torch() -> None:
    """The third command: `bash scripts/setup.sh user` (the user set: train's, Ray and the client), which
    asks PyTorch's CPU index for the pinned torch before the requirements (scripts/setup.sh dev, which the
    test command runs, does the same)."""
    assert "bash scripts/setup.sh user" in blocks("bash", README)[2]
    script = (ROOT / "scripts" / "setup.sh").read_text()
    assert "https://download.pytorch.org/whl/cpu" in script and "--no-deps" in script
    assert "torch==2.13.0" in (ROOT / "requirements" / "train.txt").read_text()


def test_the_sales_example_trains_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    """The own-data summary printed in docs/training.md is what the sales command prints (its timing aside):
    the units, the naive references, the windows, what was kept, the input-length search."""
    import shlex
    import subprocess
    import sys

    from export.example_data import write_sales

    write_sales(tmp_path / "runs" / "example")
    command = next(b for b in blocks("bash") if "runs/example/sales.csv" in b).replace("\\\n", " ").strip()
    command = re.sub(r"(?<![\w./-])runs\b", f"{tmp_path}/runs", command)
    argv = shlex.split(command.replace(".venv/bin/python", sys.executable, 1))
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = next(b for b in blocks("text") if "test MSE" in b)
    untimed = re.compile(r" \(\d+ epoch\(s\), \d+ s/epoch, [\d.]+ min\)")
    got = [untimed.sub("", line) for line in proc.stdout.splitlines()]
    for line in printed.splitlines():
        assert untimed.sub("", line) in got, (line, proc.stdout)
    for note in (
        "dates read day-first (%d/%m/%Y): '13/01/2021' (line 13)",
        "5 missing step(s) of 1D inserted",
    ):
        assert note in proc.stdout and note in GUIDE.replace("\n", " ")


def test_the_which_config_table_is_the_recipes_report() -> None:
    from export.recipes import table
    from export.reports import RecipesRun, read_report

    report = read_report(ROOT / "results" / "own-data" / "report.json", RecipesRun)
    assert "\n".join(table(report)) in GUIDE


def test_the_attention_example_is_the_curl_in_the_readme() -> None:
    """The curl sends docs/examples/attention_request.json to the shipped model (rendered and checked in
    tests/app/protocols/rsa_v1/test_plotting.py), and the sample it shows exists."""
    curl = next(b for b in blocks("bash") if "/attention" in b)
    assert "-d @docs/examples/attention_request.json" in curl and "/v1/models/etth1-rsa/attention" in curl
    assert (ROOT / "docs" / "images" / "attention-etth1-rsa-v5.png").is_file()
    body = json.loads((ROOT / "docs" / "examples" / "attention_request.json").read_text())
    assert isinstance(body["series"], dict) and body["format"] == "png"


def test_the_panel_walkthrough_serves_an_unseen_series_as_printed(tmp_path: Path) -> None:
    """docs/panels.md's commands as printed (folders under tmp_path), its curl request to the exported
    global model, and the answer it prints: ids, timestamps from each series' own start, the first
    values; the values against GlobalModel.forecast."""
    import shlex
    import subprocess
    import sys

    from export.global_models.model import GlobalModel

    page = (ROOT / "docs" / "panels.md").read_text()
    block = next(b for b in blocks("bash", page) if "export.panel export" in b)
    commands = [line.split("  #")[0].strip() for line in block.replace("\\\n", " ").splitlines()]

    def here(text: str) -> str:
        return re.sub(r"(?<![\w./-])(runs|my_models)\b", lambda m: f"{tmp_path}/{m[1]}", text)

    for command in commands:
        if not command.startswith(".venv/bin/python"):
            continue  # the server runs in-process below; curl's request is sent to it
        argv = shlex.split(here(command).replace(".venv/bin/python", sys.executable, 1))
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
        if "export.panel train" in command:
            assert "20 series (1MS), L = 24, min history 12" in proc.stdout, proc.stdout
        if "export.panel export" in command:
            said = "intervals at [50.0, 80.0, 90.0, 95.0, 99.0] from 80 rolling windows over the last 16"
            assert said in proc.stdout and said in " ".join(page.split()), proc.stdout
            said = "[99.0] extrapolated from 95%"
            assert said in proc.stdout and said in " ".join(page.split()), proc.stdout
    curl = next(c for c in commands if c.startswith("curl"))
    path = re.search(r"127\.0\.0\.1:8000(\S+)", curl).group(1)
    body = json.loads(Path(here(re.search(r"-d @(\S+)", curl).group(1))).read_text())
    printed_request = json.loads(next(b for b in blocks("json", page) if '"horizon"' in b))
    for sent, shown in zip(body["series"], printed_request["series"], strict=True):
        assert (sent["id"], sent["start"], sent["values"][:2]) == (
            shown["id"],
            shown["start"],
            shown["values"][:2],
        )
    with running_client(make_settings(tmp_path / "my_models")) as client:
        r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    printed = json.loads(next(b for b in blocks("json", page) if '"forecasts"' in b))
    model = GlobalModel.load(tmp_path / "runs" / "stores" / "model.json")
    want = model.forecast([np.array(s["values"]) for s in body["series"]])
    for got, shown, w in zip(r.json()["forecasts"], printed["forecasts"], want, strict=True):
        assert got["id"] == shown["id"] and got["timestamps"][:2] == shown["timestamps"][:2]
        assert len(got["timestamps"]) == 12 and got["timestamps"][-1] == "2024-12-01T00:00:00Z"
        np.testing.assert_allclose(got["forecast"][:2], shown["forecast"][:2], rtol=1e-5)
        np.testing.assert_allclose(np.array(got["forecast"])[:, 0], w, rtol=1e-4)


def test_the_fit_on_request_example_runs_as_printed(tmp_path: Path) -> None:
    """The README's fit_forecast example on a fresh clone (issue 45, item 11): its curl request and its
    client line read tracked files only, against a service process serving the shipped
    pretrained-monthly model; both answer the same forecasts, with the 80% and 95% intervals asked."""
    import shutil

    import httpx
    import pandas as pd
    from rsa_client import Client

    from tests.app.live import live_service

    example = README[README.index("## A read-out fitted on your series") :]
    curl = next(b for b in blocks("bash", example) if "fit_forecast" in b)
    line = next(b for b in blocks("python", example) if "fit_forecast" in b).strip()
    path = re.search(r"127\.0\.0\.1:8000(\S+)", curl).group(1)
    name = path.split("/")[3]
    shutil.copytree(ROOT / "model_repository" / name, tmp_path / "repo" / name)  # the shipped model
    request = ROOT / re.search(r"-d @(\S+)", curl).group(1)
    with live_service(tmp_path / "repo", tmp_path / "service.log") as service:
        r = httpx.post(
            f"{service.url}{path}",
            content=request.read_bytes(),
            timeout=60,
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["fit"]["levels"] == [80.0, 95.0] and not answer["fit"]["no_interval"], answer["fit"]
        code = line.replace("http://127.0.0.1:8000", service.url).replace('"docs/', f'"{ROOT}/docs/')
        out = eval(code, {"Client": Client, "pd": pd})  # the README line itself
    ids = [f["id"] for f in answer["forecasts"]]
    assert ids == ["store_31", "store_32", "store_33"]
    rest = np.concatenate([np.array(f["forecast"])[:, 0] for f in answer["forecasts"]])
    assert list(out["unique_id"]) == [i for i in ids for _ in range(12)]
    bands = [c for c in out.columns if re.search(r"-(lo|hi)-\d+$", c)]
    assert len(bands) == 4, list(out.columns)  # lo and hi of 80 and 95
    (column,) = [c for c in out.columns if c not in ("unique_id", "ds", *bands)]  # the forecast's
    np.testing.assert_allclose(out[column].to_numpy(), rest, rtol=1e-6)
    assert out.attrs["fit"]["series"] == 3 and out.attrs["fit"]["levels"] == [80.0, 95.0]


def test_every_file_a_readme_request_reads_is_in_a_fresh_clone() -> None:
    """Issue 45, item 11: every file the README's requests send (`curl -d @file`) or its Python lines read
    (`read_csv("file")`) is tracked, so a fresh clone has it (a walk-through's output is not: curl -s
    then sends an empty body)."""
    import subprocess

    named = re.findall(r"-d @(\S+)", README) + re.findall(r"read_csv\(\"([^\"]+)\"", README)
    assert len(named) >= 5, named
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", *named], cwd=ROOT, capture_output=True, text=True
    )
    assert tracked.returncode == 0, tracked.stderr


def test_the_fit_example_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    """docs/examples' fit files are export.example_data's synthetic shops, not data copied from anywhere."""
    from export.example_data import write_fit_example

    for written in write_fit_example(tmp_path):
        assert written.read_text() == (ROOT / "docs" / "examples" / written.name).read_text(), written.name


def test_the_backtest_and_anomaly_examples_answer_as_described(tmp_path: Path) -> None:
    """The README's cross_validation and detect_anomalies curl lines (their bodies, to the same paths),
    and its client lines against a service process on the shipped models."""
    block = next(b for b in blocks("bash", README) if "cross_validation" in b)
    calls = re.findall(r"127\.0\.0\.1:8000(\S+) \\\s+.*?-d @(\S+)", block, flags=re.S)
    assert [path.rsplit("/", 1)[1] for path, _ in calls] == ["cross_validation", "detect_anomalies"]
    with running_client(make_settings(ROOT / "model_repository")) as client:
        answers = [client.post(path, json=json.loads((ROOT / f).read_text())) for path, f in calls]
    assert [r.status_code for r in answers] == [200, 200], [r.text[:300] for r in answers]
    backtest, anomalies = (r.json() for r in answers)
    assert backtest["n_windows"] == 8 and backtest["horizon"] == 24 and backtest["metrics"]["coverage"]
    assert len(anomalies["series"][0]["index"]) == 24 and anomalies["level"] == 99

    from tests.app.live import live_service

    code = next(b for b in blocks("python", README) if "cross_validation" in b)
    code = code.replace('"data/ETT/', f'"{ROOT}/data/ETT/')
    with live_service(ROOT / "model_repository", tmp_path / "service.log") as service:
        scope: dict = {}
        exec(compile(code.replace("http://127.0.0.1:8000", service.url), "README.md", "exec"), scope)
    cv, flags = scope["cv"], scope["flags"]
    assert len(cv) == 8 * 24 and cv.attrs["metrics"]["points"] == 8 * 24 * 7
    assert len(flags) == 24 and flags["OT-anomaly"].dtype == bool
