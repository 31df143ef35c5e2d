"""What every /v1 request shares: a series' values (rows, named columns or a flat list; null: missing),
its start and covariates (`SeriesInput`), strict numbers, and the service's series limit checked before
any series is validated."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
)
from pydantic_core import PydanticCustomError

from app.protocols.datetimes import IsoDatetime

# Strict: a string or a bool is not a number. allow_inf_nan=False: NaN, Infinity and overflowing
# literals such as 1e400 (parsed as inf) are rejected with the element's position.
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]

ROWS_TAG = "rows"
COLUMNS_TAG = "columns"
FLAT_TAG = "flat"


def _values_layout(value: Any) -> str:
    if isinstance(value, dict):
        return COLUMNS_TAG
    if isinstance(value, list) and value and not isinstance(value[0], list):
        return FLAT_TAG  # [1.0, 2.0, ...]: one channel's values
    return ROWS_TAG


# `values` is rows of channel values, an object of named columns, or (a one-channel model, e.g. a
# global model of many series) a flat list of values. The callable discriminator keeps validation
# errors to the layout the client actually sent.
# A null is a missing value: filled by the model's training rule and counted in the answer (`filled`),
# refused above RSA_MAX_MISSING_SHARE of the window (app/inference/windows.py `last_window_filled`).
SeriesValues = Annotated[
    Annotated[list[list[FiniteFloat | None]], Tag(ROWS_TAG)]
    | Annotated[dict[str, list[FiniteFloat | None]], Tag(COLUMNS_TAG)]
    | Annotated[list[FiniteFloat | None], Tag(FLAT_TAG)],
    Discriminator(_values_layout),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SeriesInput(_Strict):
    """One time series: `[[c1, ..., cC], ...]` rows in the model's channel order, or `{"OT": [...]}`."""

    id: str | None = Field(
        default=None, max_length=256, description="Echoed back in the response; unique within a request."
    )
    values: SeriesValues = Field(
        description="Rows of C channel values (oldest first), an object of named columns of equal "
        "length holding every model channel, or for a one-channel model a flat list of values. Only the "
        "last `input_length` points are used. A global model (`panel` in /v1/models) takes histories "
        "from its `min_history` on: the steps before a shorter series' start are masked, never filled."
    )
    start: IsoDatetime | None = Field(
        default=None,
        description="Timestamp of the first value, ISO 8601 (e.g. 2018-01-26T16:00:00Z; a naive one is read "
        "in the model's zone, `timezone` in /v1/models, UTC without one); "
        "enables forecast timestamps. Required by a model with a seasonal `cycle`, which aligns it to the "
        "window's first timestamp.",
    )
    # Covariates of a global model that has them (`panel.covariates` in /v1/models; docs/panels.md).
    future: dict[str, list[FiniteFloat]] | None = Field(
        default=None,
        description="Future-known covariates: {name: one value per step of the model's horizon H}.",
    )
    past: dict[str, list[FiniteFloat | None]] | None = Field(
        default=None,
        description="Past-only covariates: {name: one value per value of `values`} (null: not observed).",
    )
    static: dict[str, FiniteFloat | Annotated[str, Field(strict=True, max_length=256)]] | None = Field(
        default=None, description="Static covariates: {name: a number, or one of the model's categories}."
    )


def _series_within_limit(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """The service's series limit (validation context `max_series`), checked before any series is
    validated: a request of too many series is refused without paying for its values."""
    limit = (info.context or {}).get("max_series")
    if limit is not None and isinstance(value, list) and len(value) > limit:
        raise PydanticCustomError(
            "too_long",
            "series has {actual_length} items; at most {max_length} are accepted",
            {"max_length": limit, "actual_length": len(value)},
        )
    return handler(value)


def unique_ids(series: list[SeriesInput]) -> list[SeriesInput]:
    """Each series' `id` names its answer (and its rows in the client's tables, keyed by `unique_id`), so
    no two series of a request may share one; series without an id are told apart by their position.
    Until 2026-12-06 a repeated id was answered twice under one name."""
    first: dict[str, int] = {}
    for i, one in enumerate(series):
        if one.id is None:
            continue
        if one.id in first:
            raise PydanticCustomError(
                "duplicate_id",
                "series[{index}].id '{id}' repeats series[{first}].id: each id names one series' answer, "
                "so ids must be unique within a request",
                {"index": i, "id": one.id, "first": first[one.id]},
            )
        first[one.id] = i
    return series
