"""A global model's intervals clipped at 0 where its series cannot go below it (`export.panel export
--nonnegative`, the multichannel exporter's rule in export/nonnegative.py): `auto` flags a panel of
counts with zeros, `all` declares one, `none` leaves the bounds alone, and the service reads the flag
from the manifest and clips every lower bound it answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from export.global_models.cli import cli
from tests.app.conftest import make_settings, running_client
from tests.utils.panel import HORIZON, write_long


def counts_file(path: Path) -> Path:
    """The stores, shifted down so that each spends a tenth of its months at 0: sales with closed months."""
    frame = pd.read_csv(write_long(path, n=6))
    low = frame.groupby("unique_id")["y"].transform(lambda y: y.quantile(0.1))
    frame["y"] = (frame["y"] - low).clip(lower=0.0)
    frame.to_csv(path, index=False)
    return path


def export(runner: CliRunner, run: Path, repo: Path, data: Path, *extra: str) -> str:
    args = ["export", "--model", str(run / "model.json"), "--name", "sales", "--repository", str(repo)]
    done = runner.invoke(cli, [*args, "--data", str(data), *extra])
    assert done.exit_code == 0, done.output
    return " ".join(done.output.split())


def test_counts_get_lower_bounds_clipped_at_zero_on_the_service(tmp_path: Path) -> None:
    data = counts_file(tmp_path / "sales.csv")
    runner = CliRunner()
    run, repo = tmp_path / "run", tmp_path / "repo"
    trained = runner.invoke(cli, ["train", "--data", str(data), "--horizon", str(HORIZON), "--out", str(run)])
    assert trained.exit_code == 0, trained.output
    said = export(runner, run, repo, data)  # version 1: auto
    assert "lower bounds clipped at 0 (detected" in said, said
    export(runner, run, repo, data, "--nonnegative", "none")  # version 2
    flags = [
        json.loads((repo / "sales" / v / "manifest.json").read_text())["intervals"]["nonnegative"]
        for v in "12"
    ]
    assert flags == [[True], [False]]

    frame = pd.read_csv(data)
    series = [
        {"id": sid, "start": rows["ds"].iloc[0], "values": rows["y"].tolist()}
        for sid, rows in frame.groupby("unique_id")
    ]
    lows = {}
    with running_client(make_settings(repo)) as client:
        for version in (1, 2):
            r = client.post(
                f"/v1/models/sales/versions/{version}/forecast", json={"series": series, "level": [95]}
            )
            assert r.status_code == 200, r.text
            lows[version] = np.array([f["lo-95"] for f in r.json()["forecasts"]], dtype=float)
    assert lows[2].min() < 0  # the case this is about: unclipped, a count's interval reaches below 0
    assert lows[1].min() == 0
    np.testing.assert_array_equal(lows[1], np.maximum(lows[2], 0))


def test_declaring_and_refusing(tmp_path: Path) -> None:
    data = write_long(tmp_path / "stores.csv", n=6)  # positive, no zeros: not detected
    runner = CliRunner()
    run, repo = tmp_path / "run", tmp_path / "repo"
    assert (
        runner.invoke(
            cli, ["train", "--data", str(data), "--horizon", str(HORIZON), "--out", str(run)]
        ).exit_code
        == 0
    )
    said = export(runner, run, repo, data)
    assert "hint: no series goes below 0; --nonnegative all clips" in said, said
    said = export(runner, run, repo, data, "--nonnegative", "all")
    assert "lower bounds clipped at 0 (declared)" in said, said
    below = pd.read_csv(data).assign(y=lambda f: f["y"] - 1e6)
    below.to_csv(tmp_path / "below.csv", index=False)
    args = ["export", "--model", str(run / "model.json"), "--name", "x", "--repository", str(repo)]
    refused = runner.invoke(cli, [*args, "--data", str(tmp_path / "below.csv"), "--nonnegative", "all"])
    out = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "--nonnegative" in out and "go down to" in out, out
    refused = runner.invoke(cli, [*args, "--data", str(data), "--nonnegative", "yes"])
    out = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "use auto, none or all" in out, out
