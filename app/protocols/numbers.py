"""Counts in request bodies (a horizon, a shape's dimensions, a layer index): JSON integers only.

Pydantic's lax `int` reads `"3"` as 3 and `true` as 1, so `{"horizon": "3"}` and `{"horizon": true}` were
forecasts of 3 and 1 steps. `Count` refuses a string or a bool with pydantic's own `int_type` error (a 422
or 400 naming the field, in each protocol's shape) and takes what `int` takes otherwise: a JSON integer,
or a number with no fractional part (3.0), as before.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError


def _a_number(value: Any) -> Any:
    if isinstance(value, bool | str | bytes):
        kind = "a boolean" if isinstance(value, bool) else "a string"
        raise PydanticCustomError(
            "int_type", "Input should be a valid integer, a JSON number; got {kind}", {"kind": kind}
        )
    return value


Count = Annotated[int, BeforeValidator(_a_number)]
