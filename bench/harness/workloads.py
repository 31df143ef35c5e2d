"""Workloads: real windows of a model's data set as request bodies, built and serialised once before anything
is timed, with the checker that holds ONNX Runtime's forecasts for them.

- `prepare_forecast_workload`: `/v1` forecast requests (JSON);
- `oip_binary_workload`: the same windows as OIP v2 infer requests with binary tensors;
- `windows_of`: a workload's windows as the arrays a session takes (raw ONNX Runtime baselines).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import REPO
from bench.harness.checks import FP32, ForecastChecker, OipBinaryChecker


@dataclass
class Workload:
    path: str  # URL path of the forecast endpoint
    bodies: list[bytes]
    checker: ForecastChecker
    windows: int  # distinct windows across the bodies
    input_length: int
    horizon: int
    channels: int
    content_type: str = "application/json"  # of every body
    headers: dict[str, str] = field(default_factory=dict)  # sent with every body (run_load's `headers`)
    series_per_request: int = 1


def _read_data(csv_path: Path, channels: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The date column and the channels, in manifest order, as float64 (csv + numpy: no pandas needed)."""
    with csv_path.open(newline="") as fh:
        rows = csv.reader(fh)
        header = next(rows)
        missing = [c for c in ("date", *channels) if c not in header]
        if missing:
            raise ValueError(f"{csv_path}: no column(s) {missing} in {header}")
        cols = [header.index(c) for c in channels]
        d = header.index("date")
        dates, values = [], []
        for row in rows:
            dates.append(row[d])
            values.append([float(row[c]) for c in cols])
    return dates, np.asarray(values, dtype=np.float64)


def _phase(date: str, step_seconds: float, period: int) -> int:
    """The window's phase as docs/artifacts.md defines it: integer microseconds, floor, then mod."""
    t_us = int(np.datetime64(date.replace(" ", "T"), "us").astype(np.int64))
    return (t_us // round(step_seconds * 1e6)) % period


def prepare_forecast_workload(
    model: str = "etth1-rsa",
    version: int = 1,
    *,
    repository: Path = REPO / "model_repository",
    data_dir: Path = REPO / "data" / "ETT",
    windows: int = 64,
    series_per_request: int = 1,
) -> Workload:
    """`windows` distinct windows, spread over the data set named in the version's manifest, as bodies
    of `series_per_request` series (one body per window start, series cycling through the windows), and a
    checker holding onnxruntime's forecasts for them (CPU provider, the version's own model.onnx)."""
    import onnxruntime as ort  # here, so `run_load` alone does not need it

    vdir = repository / model / str(version)
    manifest = json.loads((vdir / "manifest.json").read_text())
    L, H, channels = manifest["input_length"], manifest["horizon"], manifest["channels"]
    dates, values = _read_data(data_dir / manifest["dataset"]["file"], channels)
    if len(values) - L + 1 < windows:
        raise ValueError(f"{len(values)} rows give fewer than {windows} distinct windows of {L}")
    starts = np.linspace(0, len(values) - L, windows).round().astype(int)
    x = np.stack([values[s : s + L] for s in starts])
    cycle = manifest.get("cycle")
    feed: dict[str, np.ndarray] = {"window": x.astype(np.float32)}
    if cycle:  # a cycle model needs each series' `start`, and the graph its phase
        feed["phase"] = np.array(
            [_phase(dates[s], cycle["step_seconds"], cycle["period"]) for s in starts], dtype=np.int64
        )
    session = ort.InferenceSession(str(vdir / "model.onnx"), providers=["CPUExecutionProvider"])
    (reference,) = session.run(["forecast"], feed)
    del session

    bodies, ids, expected = [], [], []
    for b in range(windows):
        picks = [(b * series_per_request + s) % windows for s in range(series_per_request)]
        body_ids = [f"b{b}s{s}w{w}" for s, w in enumerate(picks)]
        series = []
        for sid, w in zip(body_ids, picks, strict=True):
            one: dict[str, Any] = {"id": sid, "values": x[w].tolist()}
            if cycle:
                one["start"] = dates[starts[w]].replace(" ", "T")
            series.append(one)
        bodies.append(json.dumps({"series": series, "horizon": H}, separators=(",", ":")).encode())
        ids.append(body_ids)
        expected.append(reference[picks])
    return Workload(
        path=f"/v1/models/{model}/versions/{version}/forecast",
        bodies=bodies,
        checker=ForecastChecker(model, version, ids, expected),
        windows=windows,
        input_length=L,
        horizon=H,
        channels=len(channels),
        series_per_request=series_per_request,
    )


def oip_binary_workload(work: Workload) -> Workload:
    """`work`'s windows as OIP v2 infer requests with binary tensors: one JSON header for every body
    (each has the same number of series), then the body's windows as raw float32; `forecast` asked in
    binary. The checker holds `work`'s references. Built once, before anything is measured."""
    windows = windows_of(work)
    if any(x.shape != windows[0].shape for x in windows):
        raise ValueError("one JSON header for every body needs the same number of series in each")
    size = FP32.itemsize * windows[0].size
    window = {"name": "window", "datatype": "FP32", "shape": list(windows[0].shape)}
    header = json.dumps(
        {
            "inputs": [window | {"parameters": {"binary_data_size": size}}],
            "outputs": [{"name": "forecast", "parameters": {"binary_data": True}}],
        },
        separators=(",", ":"),
    ).encode()
    c = work.checker
    return Workload(
        path=f"/v2/models/{c.model}/versions/{c.version}/infer",
        bodies=[header + x.astype(FP32, copy=False).tobytes() for x in windows],
        checker=OipBinaryChecker(c.model, c.version, c.ids, c.expected),
        windows=work.windows,
        input_length=work.input_length,
        horizon=work.horizon,
        channels=work.channels,
        content_type="application/octet-stream",
        headers={"Inference-Header-Content-Length": str(len(header))},
        series_per_request=work.series_per_request,
    )


def windows_of(work: Workload) -> list[np.ndarray]:
    """Each body's windows as the [series, L, C] float32 array a session takes."""
    return [np.array([s["values"] for s in json.loads(b)["series"]], dtype=np.float32) for b in work.bodies]
