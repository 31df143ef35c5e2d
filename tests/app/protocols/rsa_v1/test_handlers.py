"""Decoding and the /v1 handlers without HTTP: limits, timestamps, and a forecast through the registry."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from app.artifacts.manifest import Manifest, load_manifest
from app.core.errors import InvalidInput, ModelNotFound, VersionNotFound
from app.engine.local import LocalEngine
from app.inference.service import InferenceService
from app.inference.windows import check_horizon
from app.protocols.rsa_v1.codec import decode_series, forecast_timestamps, resolve_channel
from app.protocols.rsa_v1.handlers import V1Handlers
from app.protocols.rsa_v1.schemas import ForecastRequest, SeriesInput
from tests.app.conftest import make_settings, ort_forecast


@pytest.fixture(scope="module")
def manifest(toy_repository: Path) -> Manifest:
    return load_manifest(toy_repository / "toy" / "1" / "manifest.json")


def test_decode_rows_and_columns_agree(manifest: Manifest) -> None:
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    as_rows = decode_series(SeriesInput(values=x.tolist()), manifest, "s", 100)
    cols = {"OT": x[:, 2].tolist(), "HUFL": x[:, 0].tolist(), "MUFL": x[:, 1].tolist()}
    as_cols = decode_series(SeriesInput(values=cols), manifest, "s", 100)
    np.testing.assert_array_equal(as_rows.window, x[-8:])
    np.testing.assert_array_equal(as_cols.window, x[-8:])
    assert as_rows.n_values == as_cols.n_values == 10
    assert as_rows.window.dtype == np.float32


def test_decode_limits(manifest: Manifest) -> None:
    with pytest.raises(InvalidInput) as info:
        decode_series(SeriesInput(values=[[1.0, 2.0, 3.0]] * 7), manifest, "series[2]", 100)
    assert (info.value.field, info.value.limit) == ("series[2].values", 8)
    with pytest.raises(InvalidInput) as info:
        decode_series(SeriesInput(values=[[1.0, 2.0, 3.0]] * 11), manifest, "s", 10)
    assert info.value.limit == 10
    with pytest.raises(InvalidInput) as info:
        decode_series(
            SeriesInput(values={"HUFL": [1.0] * 8, "MUFL": [1.0] * 8, "OT": [1e39] * 8}), manifest, "s", 100
        )
    assert info.value.field == "s.values.OT[0]"


def test_timestamps() -> None:
    start = datetime(2020, 1, 1)
    assert forecast_timestamps(start, 96, 2, 900) == [
        start + timedelta(minutes=15 * 96),
        start + timedelta(minutes=15 * 97),
    ]


def test_horizon_and_channel(manifest: Manifest) -> None:
    assert check_horizon(None, manifest) == 4 and check_horizon(1, manifest) == 1
    with pytest.raises(InvalidInput):
        check_horizon(5, manifest)
    assert resolve_channel("OT", manifest) == 2 and resolve_channel(1, manifest) == 1
    with pytest.raises(InvalidInput):
        resolve_channel(-1, manifest)


def test_forecast_through_service_without_http(toy_repository: Path) -> None:
    async def scenario() -> None:
        engine = LocalEngine(make_settings(toy_repository))
        await engine.start()
        while engine.catalog.loading_any:
            await asyncio.sleep(0.01)
        assert engine.catalog.ready
        handlers = V1Handlers(InferenceService(engine, engine.settings))
        x = np.random.default_rng(3).normal(0, 1, (2, 8, 3)).astype(np.float32)
        request = ForecastRequest(
            series=[SeriesInput(id=str(i), values=w.tolist()) for i, w in enumerate(x)], horizon=3
        )
        response = await handlers.forecast("toy", 1, request)
        expected = ort_forecast(toy_repository / "toy" / "1" / "model.onnx", x)[:, :3]
        np.testing.assert_allclose(response.outputs, expected, atol=1e-5)
        with pytest.raises(ModelNotFound):
            await handlers.forecast("nope", None, request)
        with pytest.raises(VersionNotFound):
            await handlers.forecast("toy", 3, request)
        await engine.stop()

    asyncio.run(scenario())
