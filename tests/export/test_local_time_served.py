"""Local times, from a written CSV to a served forecast: a shop's 15-minute file with Europe/Berlin wall-clock
times and no offset, across the autumn repeat (2023-10-29) and the spring gap (2024-03-31).

The file trains as written (`--timezone Europe/Berlin`): the repeated hour is read by order, the skipped one
is no gap; the manifest keeps the zone; the cycle's phase is local (the shop opens at 9 local, all year);
a naive served `start` is local, a zone name or an offset names the same instant, and the answer's
timestamps carry the zone's offsets of their own dates.

One module-scoped repository: one tiny training (1 epoch, threads=1), one export, one service.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fastapi.testclient import TestClient

from export.checkpoint import load_checkpoint
from export.data import DataError, load_csv, load_dataset
from export.evaluate import load_for_checkpoint, predict
from export.onnx import export_model
from export.train import TrainConfig, load_config, read_options, train
from tests.app.conftest import make_settings, running_client

ZONE = "Europe/Berlin"
L, H, PERIOD = 96, 8, 96  # a day of quarters in, two hours out, a daily cycle


def _shop(local: pd.DatetimeIndex, seed: int = 0) -> np.ndarray:
    """Busy from 9 to 18 local time, every day of the year."""
    open_ = (local.hour >= 9) & (local.hour < 18)
    return 10 + 50 * open_ + np.random.default_rng(seed).normal(0, 1, len(local))


def write_local_csv(path: Path) -> Path:
    instants = pd.date_range("2023-10-16", "2024-04-08", freq="15min", tz="UTC", inclusive="left")
    local = instants.tz_convert(ZONE)
    values = _shop(local)
    lines = [f"{t:%Y-%m-%d %H:%M:%S},{v:.3f}" for t, v in zip(local, values, strict=True)]  # no offset
    path.write_text("\n".join(["timestamp,visitors", *lines]) + "\n")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, TestClient]]:
    root = tmp_path_factory.mktemp("local-time")
    csv = write_local_csv(root / "shop.csv")
    cfg = TrainConfig(
        data=str(csv),
        timezone=ZONE,
        model={
            "d_model": 8,
            "d_ff": 16,
            "n_heads": 2,
            "rem_heads": [1, 1, 0, 0, 0, 0],
            "cycle_period": PERIOD,
        }
        | {"input_length": L, "horizon": H},
        epochs=1,
        batch_size=256,
        threads=1,
        progress=False,
        out=str(root / "runs"),
        name="shop",
        plot_windows=1,
    )
    run = train(cfg)
    export_model(run / "checkpoint.safetensors", root / "repo", "shop", verify_batch_sizes=(1,))
    with running_client(make_settings(root / "repo")) as client:
        yield root, csv, client


def test_without_the_zone_the_autumn_repeat_is_disorder(tmp_path: Path) -> None:
    csv = write_local_csv(tmp_path / "shop.csv")
    with pytest.raises(DataError, match=r"2023-10-29 02:00:00 is not after the previous row's"):
        load_csv(csv)


def test_a_local_time_the_zone_skips_is_refused_with_its_line(tmp_path: Path) -> None:
    csv = write_local_csv(tmp_path / "shop.csv")
    lines = csv.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("2024-03-31 03:00:00"))
    lines.insert(at, "2024-03-31 02:30:00,1.0")  # 02:00-03:00 does not exist that night
    csv.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"line {at + 1}.*2024-03-31 02:30:00 does not exist in {ZONE}"):
        load_csv(csv, timezone=ZONE)


def test_the_file_reads_as_written_and_the_phase_is_local(served) -> None:
    _, csv, _ = served
    series = load_csv(csv, timezone=ZONE)
    assert series.frequency == "15min"
    stamps = series.timestamps
    assert (np.diff(stamps) == np.timedelta64(15, "m")).all()  # the repeat and the gap are no gaps
    assert len(stamps) == len(csv.read_text().splitlines()) - 1
    ds = load_dataset(csv, L, H, timezone=ZONE)
    local = pd.DatetimeIndex(ds.series.timestamps).tz_localize("UTC").tz_convert(ZONE)
    nine = np.flatnonzero((local.hour == 9) & (local.minute == 0))
    winter, summer = nine[local[nine].month == 1][0], nine[local[nine].month == 4][0]
    in_winter = ds.train.phases(np.array([winter - ds.borders["train"][0]]), PERIOD)
    in_summer = ds.test.phases(np.array([summer - ds.borders["test"][0]]), PERIOD)
    # 09:00 local is quarter 36 of the day, in winter and in summer
    assert [int(in_winter[0]), int(in_summer[0])] == [36, 36]


def _last_test_window(root: Path) -> tuple[np.ndarray, pd.Timestamp, np.ndarray]:
    model, info = load_checkpoint(root / "runs" / "shop" / "checkpoint.safetensors")
    ds = load_for_checkpoint(info)
    i = ds.test.num_windows - 1
    first = ds.borders["test"][0] + i
    with torch.no_grad():
        scaled, _ = predict(model, ds.test, torch.tensor([i]))
    return (
        ds.series.values[first : first + L],
        pd.Timestamp(ds.series.timestamps[first]).tz_localize("UTC"),
        ds.scaler.inverse_transform(scaled[0].numpy()),
    )


def _forecast(client: TestClient, rows: np.ndarray, start: str) -> Any:
    r = client.post("/v1/models/shop/forecast", json={"series": [{"values": rows.tolist(), "start": start}]})
    assert r.status_code == 200, r.text
    return r.json()["forecasts"][0]


def test_the_manifest_keeps_the_zone(served) -> None:
    root, _, _ = served
    manifest = json.loads(next((root / "repo" / "shop").glob("*/manifest.json")).read_text())
    assert manifest["timezone"] == ZONE
    assert manifest["dataset"]["timezone"] == ZONE


def test_a_naive_start_is_local_and_the_answer_carries_local_offsets(served) -> None:
    root, _, client = served
    rows, first, expected = _last_test_window(root)
    local = first.tz_convert(ZONE)  # April: summer time, +02:00
    naive = local.strftime("%Y-%m-%dT%H:%M:%S")
    out = _forecast(client, rows, naive)
    np.testing.assert_allclose(out["forecast"], expected, rtol=1e-4, atol=1e-3)  # the phase is training's
    after = [local + pd.Timedelta(minutes=15 * (L + k)) for k in range(H)]
    assert out["timestamps"] == [t.isoformat() for t in after]
    assert all(t.endswith("+02:00") for t in out["timestamps"])
    for same in (f"{naive}[{ZONE}]", local.isoformat(), first.isoformat(), f"{local.isoformat()}[{ZONE}]"):
        assert _forecast(client, rows, same) == out, same


def test_timestamps_across_the_autumn_repeat_step_by_the_instant(served) -> None:
    root, _, client = served
    rows, _, _ = _last_test_window(root)
    out = _forecast(
        client, rows, "2023-10-28T02:00:00"
    )  # 24 h of quarters: the forecast starts in the repeat
    assert out["timestamps"] == [
        "2023-10-29T02:00:00+02:00",
        "2023-10-29T02:15:00+02:00",
        "2023-10-29T02:30:00+02:00",
        "2023-10-29T02:45:00+02:00",
        "2023-10-29T02:00:00+01:00",
        "2023-10-29T02:15:00+01:00",
        "2023-10-29T02:30:00+01:00",
        "2023-10-29T02:45:00+01:00",
    ]
    # In the repeated hour a naive or zone-named time is the first reading (+02:00); an offset picks the
    # second. A day of quarters later (24 h of instants), both are in winter time, an hour apart.
    first = _forecast(client, rows, "2023-10-29T02:30:00[Europe/Berlin]")
    second = _forecast(client, rows, "2023-10-29T02:30:00+01:00[Europe/Berlin]")
    assert _forecast(client, rows, "2023-10-29T02:30:00") == first
    assert first["timestamps"][0] == "2023-10-30T01:30:00+01:00"
    assert second["timestamps"][0] == "2023-10-30T02:30:00+01:00"


def test_an_unknown_zone_is_refused_with_the_field(served) -> None:
    _, _, client = served
    body = {"series": [{"values": [[1.0]] * L, "start": "2024-01-01T00:00:00[Europe/Nowhere]"}]}
    r = client.post("/v1/models/shop/forecast", json=body)
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["field"] == "series[0].start"
    assert "unknown time zone 'Europe/Nowhere'" in error["message"]


def test_the_option_from_the_command_line_and_a_wrong_name() -> None:
    cfg = load_config(None, [f"timezone={ZONE}"])  # what `--timezone Europe/Berlin` appends
    assert read_options(cfg).record()["timezone"] == ZONE
    assert "timezone" not in read_options(load_config(None, [])).record()  # UTC runs record as before
    with pytest.raises(DataError, match="timezone must be an IANA time zone name"):
        read_options(load_config(None, ["timezone=Europe/Nowhere"]))
