"""Missing values in served windows: a null in /v1 (NaN in OIP v2 tensors) is filled by the model's training
rule, counted in the answer, and refused above RSA_MAX_MISSING_SHARE with the field, the count and the limit.

The toy model (L = 8, C = 3) records no training fill, so its rule is linear interpolation with the edges
held (app/inference/windows.py `fill_window`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput
from app.inference.windows import fill_window, fill_windows

L, C = 8, 3
URL = "/v1/models/toy/forecast"


def window() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.round(rng.normal(10, 3, (L, C)), 3)


def forecast(client: TestClient, values: Any) -> Any:
    return client.post(URL, json={"series": [{"values": values, "start": "2018-01-01T00:00:00"}]})


def test_nulls_are_filled_linearly_and_counted(client: TestClient) -> None:
    full = window()
    holes = full.tolist()
    holes[3][0] = None  # interior: between rows 2 and 4
    holes[0][2] = None  # left edge: row 1's value held
    expected = full.copy()
    expected[3, 0] = (full[2, 0] + full[4, 0]) / 2
    expected[0, 2] = full[1, 2]
    r = forecast(client, holes)
    assert r.status_code == 200, r.text
    out = r.json()["forecasts"][0]
    assert out["filled"] == 2
    reference = forecast(client, expected.tolist()).json()["forecasts"][0]
    assert "filled" not in reference  # a complete window's answer is as it always was
    np.testing.assert_allclose(out["forecast"], reference["forecast"], rtol=1e-6)
    assert out["timestamps"] == reference["timestamps"]


def test_nulls_in_named_columns_and_before_the_window(client: TestClient) -> None:
    full = window()
    columns: dict[str, list[Any]] = {n: full[:, c].tolist() for c, n in enumerate(["HUFL", "MUFL", "OT"])}
    columns["OT"][5] = None
    older = {n: [None, *v] for n, v in columns.items()}  # a row before the window: never read, not counted
    a = forecast(client, columns).json()["forecasts"][0]
    body = {"series": [{"values": older, "start": "2017-12-31T23:00:00"}]}
    b = client.post(URL, json=body).json()["forecasts"][0]
    assert a["filled"] == b["filled"] == 1
    assert a["forecast"] == b["forecast"]


def test_above_the_share_is_refused_naming_the_series_count_and_limit(client: TestClient) -> None:
    holes: list[list[Any]] = window().tolist()
    for t in range(5):  # 5 of 24 values: above 0.2 x 24 = 4
        holes[t][1] = None
    body = {"series": [{"values": window().tolist()}, {"values": holes}]}
    r = client.post(URL, json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "series[1].values"
    assert error["limit"] == 4
    assert "5 missing values among the 24" in error["message"]
    assert "RSA_MAX_MISSING_SHARE" in error["message"]


def test_a_series_that_ends_early_is_told_to_send_it_up_to_its_last_value(client: TestClient) -> None:
    """Its last rows empty in every channel (a discontinued series, values not in yet): the refusal says
    so, on /v1 and for OIP v2's tensors (the same clause); a hole elsewhere keeps the plain message."""
    ended: list[list[Any]] = window().tolist()
    for t in range(L - 2, L):  # the last 2 rows: 6 of 24 values
        ended[t] = [None] * C
    r = client.post(URL, json={"series": [{"values": ended}]})
    assert r.status_code == 422, r.text
    said = r.json()["error"]["message"]
    assert said.endswith(
        "; its last 2 rows are empty (the series ends early): send it up to its last value to "
        "forecast from there"
    ), said
    tensors = np.array([window(), np.array(ended, dtype=float)])
    with pytest.raises(
        InvalidInput, match=r"window\[1\] has 6 .* its last 2 rows are empty \(the series ends"
    ):
        fill_windows(tensors, _manifest("linear"), 0.2, lambda i: f"window[{i}]")
    holes: list[list[Any]] = window().tolist()
    holes[0] = holes[1] = [None] * C  # the first rows instead
    r = client.post(URL, json={"series": [{"values": holes}]})
    assert r.status_code == 422 and "ends early" not in r.json()["error"]["message"]


def test_a_channel_with_no_value_in_the_window_is_refused(client: TestClient) -> None:
    holes: list[list[Any]] = window().tolist()
    for t in range(L):
        holes[t][2] = None
    r = client.post(URL, json={"series": [{"values": holes}]})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "series[0].values"


def _manifest(fill: str | None) -> Any:
    class Fake:
        channels = ("a", "b")
        training_fill = fill or "none"

    return Fake()


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("linear", [1.0, 1.0, 2.0, 3.0, 3.0]),
        ("none", [1.0, 1.0, 2.0, 3.0, 3.0]),
        ("ffill", [1.0, 1.0, 1.0, 3.0, 3.0]),
        ("zero", [0.0, 1.0, 0.0, 3.0, 0.0]),
    ],
)
def test_each_training_rule(rule: str, expected: list[float]) -> None:
    column = np.array([[np.nan], [1.0], [np.nan], [3.0], [np.nan]])
    assert fill_window(column, rule)[:, 0].tolist() == expected


def test_tensor_windows_are_filled_and_counted_or_refused() -> None:
    manifest: Manifest = _manifest("linear")
    windows = np.ones((3, 5, 2), np.float32)
    windows[1, 2, 0] = np.nan
    out, counts = fill_windows(windows, manifest, 0.2, lambda i: f"window[{i}]")
    assert counts.tolist() == [0, 1, 0]
    assert np.isfinite(out).all()
    windows[2, :3, 1] = np.nan
    with pytest.raises(InvalidInput, match=r"window\[2\] has 3 missing values") as caught:
        fill_windows(windows, manifest, 0.2, lambda i: f"window[{i}]")
    assert caught.value.field == "window[2]"


def test_a_short_rows_missing_values_are_filled_among_its_own() -> None:
    """A global model's row of `observed` values (its last): the steps before are neither counted nor
    read, as /v1 fills a short history within the values sent (a NaN at its first value takes the next
    value, not the 0 before it; the share is of its own values)."""
    manifest: Manifest = _manifest("linear")
    windows = np.zeros((2, 10, 1), np.float32)
    windows[:, 5:, 0] = [np.nan, 4.0, 5.0, 6.0, 7.0]
    out, counts = fill_windows(windows, manifest, 0.2, lambda i: f"window[{i}]", np.array([5, 5]))
    assert counts.tolist() == [1, 1]
    assert out[0, :, 0].tolist() == [0.0] * 5 + [4.0, 4.0, 5.0, 6.0, 7.0]
    windows[1, 6, 0] = np.nan  # 2 of its 5 values: over 0.2 of them, though under 0.2 of the row's 10
    with pytest.raises(InvalidInput, match=r"window\[1\] has 2 missing values") as caught:
        fill_windows(windows, manifest, 0.2, lambda i: f"window[{i}]", np.array([5, 5]))
    assert caught.value.limit == 1


def _binary(client: TestClient, x: np.ndarray) -> Any:
    header = b'{"inputs": [{"name": "window", "datatype": "FP32", "shape": %s, ' % str(list(x.shape)).encode()
    header += b'"parameters": {"binary_data_size": %d}}]}' % x.nbytes
    return client.post(
        "/v2/models/toy/versions/1/infer",
        content=header + x.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )


def test_nan_in_oip_v2_binary_windows_is_filled_and_counted_or_refused(client: TestClient) -> None:
    full = window().astype(np.float32)[None]
    holes = full.copy()
    holes[0, 3, 0] = np.nan
    expected = full.copy()
    expected[0, 3, 0] = (full[0, 2, 0] + full[0, 4, 0]) / 2
    r = _binary(client, holes)
    assert r.status_code == 200, r.text
    assert r.json()["parameters"] == {"filled": 1}
    reference = _binary(client, expected).json()
    assert "parameters" not in reference
    np.testing.assert_allclose(r.json()["outputs"][0]["data"], reference["outputs"][0]["data"], rtol=1e-6)
    holes[0, :5, 1] = np.nan
    refused = _binary(client, holes)
    assert refused.status_code == 400
    assert "window[0] has 6 missing values" in refused.json()["error"]
