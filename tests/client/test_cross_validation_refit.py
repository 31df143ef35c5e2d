"""`Client.cross_validation(..., refit=)` (issue 45, item 2): True and False are sent as the service's
`refit`, and each answer is /v1 cross_validation's with that `refit` for the same histories; None leaves
the choice to the service. The service and model are tests/client/test_fit_forecast.py's (a global
read-out that can be refitted)."""

from __future__ import annotations

import warnings
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
from rsa_client import Client

from tests.app.live import LiveService
from tests.client.test_fit_forecast import KEY, long_frame, served
from tests.utils.panel import NAME

__all__ = ["served"]


def test_refit_is_sent_as_asked(served: tuple[LiveService, Path], tmp_path: Path) -> None:
    service, _ = served
    frame = long_frame({"a": 120, "b": 96})
    body = {
        "series": [
            {"id": sid, "start": "2016-01-01T00:00:00+00:00", "values": rows.sort_values("ds")["y"].tolist()}
            for sid, rows in frame.groupby("unique_id", sort=True)
        ],
        "horizon": 4,
        "n_windows": 3,
    }
    got = {}
    with Client(service.url, api_key=KEY) as client:
        for refit in (True, False, None):
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                out = client.cross_validation(frame, h=4, n_windows=3, model=NAME, refit=refit)
            rest = httpx.post(
                f"{service.url}/v1/models/{NAME}/cross_validation",
                json=body if refit is None else {**body, "refit": refit},
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=60,
            ).json()
            want = np.array([r[0] for s in rest["series"] for w in s["windows"] for r in w["forecast"]])
            column = NAME if NAME in out.columns else "forecast"  # the model-named column (item 8)
            np.testing.assert_allclose(out[column].to_numpy(), want, rtol=1e-6)
            assert out.attrs["refit"] is rest["refit"]
            # the service's in-sample marks, kept (the served weights were fitted on some windows here)
            marked = sum(bool(w["in_sample"]) for s in rest["series"] for w in s["windows"])
            assert len(out.attrs["in_sample"]) == marked and (marked > 0) is (refit is False)
            assert out.attrs["training_end"] == rest["training_end"]
            out.to_parquet(tmp_path / "cv.parquet")  # attrs stay JSON (pandas writes them into the file)
            assert pd.read_parquet(tmp_path / "cv.parquet").attrs["in_sample"] == out.attrs["in_sample"]
            in_sample = [str(w.message) for w in said if "in-sample" in str(w.message)]
            assert len(in_sample) == (refit is False), in_sample
            got[refit] = want
    assert rest["refit"] is True  # the service's default for a refittable read-out
    assert not np.allclose(got[True], got[False])  # the served weights are not the refit's
    np.testing.assert_allclose(got[None], got[True], rtol=1e-6)
