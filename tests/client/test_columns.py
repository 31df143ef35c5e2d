"""One forecast column name on every tabular path (issue 45, item 8): the client's rule is the one the batch
command and `export.panel forecast` call (app/artifacts/contract.py), and `target_col` names a one-channel
model's target under any name."""

from __future__ import annotations

import pandas as pd
import pytest
from rsa_client import forecast_columns
from rsa_client.frames import _channel_columns
from rsa_client.models import ModelLimits, ModelSpec

from app.artifacts.contract import forecast_columns as contract_columns

ONE = ModelSpec("stores", 1, ["y"], 24, 12, "1MS", None, False, [], ModelLimits(10, 2**20))
WIDE = ModelSpec("etth1-rsa", 5, ["HUFL", "OT"], 512, 96, "h", 3600.0, True, [], ModelLimits(10, 2**20))


@pytest.mark.parametrize(
    ("model", "channels", "want"),
    [
        ("stores", ["y"], ["stores"]),
        ("stores", ["sales"], ["stores"]),  # the target's own name never: merging with actuals adds nothing
        ("etth1-rsa", ["HUFL", "OT"], ["etth1-rsa-HUFL", "etth1-rsa-OT"]),
    ],
)
def test_the_client_names_forecasts_as_the_batch_command_and_the_offline_forecast(
    model: str, channels: list[str], want: list[str]
) -> None:
    assert forecast_columns(model, channels) == want
    assert contract_columns(model, channels) == want


def test_target_col_names_a_one_channel_models_target() -> None:
    frame = pd.DataFrame({"unique_id": ["a"], "ds": ["2024-01-01"], "sales": [1.0], "y": [2.0]})
    assert _channel_columns(frame, ONE, "sales") == ["sales"]  # taken over `y`
    assert _channel_columns(frame, ONE) == ["y"]
    with pytest.raises(ValueError, match=r"target_col 'units' is not a column of the frame"):
        _channel_columns(frame, ONE, "units")
    wide = pd.DataFrame({"HUFL": [1.0], "OT": [2.0]})
    with pytest.raises(ValueError, match=r"one-channel model; model etth1-rsa reads the channels"):
        _channel_columns(wide, WIDE, "OT")


def test_columns_no_call_reads_are_said_once_at_the_callers_line() -> None:
    """The one rule of a frame's other columns (`unread_columns`, every call): an R data set's `rownames`
    beside the model's channel is left unread and said in a UserWarning shown at the user's own line (the
    client's calls go through each other and `one_series`, so a fixed stacklevel pointed inside them); a
    frame of the model's columns alone says nothing."""
    import warnings

    from rsa_client.series import unread_columns

    frame = pd.DataFrame({"rownames": [1, 2], "unique_id": "a", "ds": ["2015-01-01", "2015-02-01"], "y": 1.0})
    with pytest.warns(
        UserWarning, match=r"columns \['rownames'\] are not read: .*\(it reads no covariates\)"
    ) as said:
        unread_columns(frame, ["y"], "unique_id", "ds", ONE)
    assert [w.filename for w in said] == [__file__]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unread_columns(frame.drop(columns="rownames"), ["y"], "unique_id", "ds", ONE)
