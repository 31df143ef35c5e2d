"""Your own data, end to end: a quarterly series in the tens of thousands (GDP-like) trains, exports
(the parity check on the normalised scale) and serves forecast timestamps on quarter starts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from export.onnx import export_model
from export.train import TrainConfig, train
from tests.app.conftest import make_settings, running_client


def test_quarterly_large_valued_series_trains_exports_and_serves_on_the_calendar(tmp_path) -> None:
    quarters = pd.date_range("1960-01-01", periods=200, freq="QS")
    rng = np.random.default_rng(0)
    level = 13_000 * np.exp(0.006 * np.arange(200)) + rng.normal(
        0, 60, 200
    )  # a trend, in the tens of thousands
    investment = 0.2 * level + rng.normal(0, 30, 200)
    rows = [f"{q.date()},{a:.1f},{b:.1f}" for q, a, b in zip(quarters, level, investment, strict=True)]
    csv = tmp_path / "gdp.csv"
    csv.write_text("date,gdp,investment\n" + "\n".join(rows) + "\n")

    model = {
        "input_length": 8,
        "horizon": 4,
        "d_model": 8,
        "d_ff": 16,
        "n_heads": 2,
        "rem_heads": (1, 1, 0, 0, 0, 0),
    }
    cfg = TrainConfig(
        data=str(csv),
        target="gdp",
        model=model,
        epochs=2,
        batch_size=16,
        out=str(tmp_path / "runs"),
        threads=1,
        progress=False,
        name="gdp",
    )
    run = train(cfg)
    version = export_model(run / "checkpoint.safetensors", tmp_path / "repo", "gdp")
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["frequency"] == "3MS" and manifest["cycle"] is None
    assert manifest["verification"]["max_error"] <= 1e-4

    history = [[float(a), float(b)] for a, b in zip(level[-8:], investment[-8:], strict=True)]
    start = str(quarters[-8].date())  # 2009-01-01 for the last 8 quarters
    with running_client(make_settings(tmp_path / "repo")) as client:
        r = client.post("/v1/models/gdp/forecast", json={"series": [{"values": history, "start": start}]})
    assert r.status_code == 200, r.text
    forecast = r.json()["forecasts"][0]
    next_quarters = pd.date_range(quarters[-1], periods=5, freq="QS")[1:]
    assert forecast["timestamps"] == [f"{q.date()}T00:00:00Z" for q in next_quarters]
    assert all(np.isfinite(forecast["forecast"][0]))
