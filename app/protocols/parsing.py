"""A request model's validation for the parse process (`app.core.offload`, `app.protocols.http.parse_body`'s
`offload`): the parsed request, or its refusal in a form that pickles back to the event loop.

A pydantic ValidationError does not survive pickling whole, and a lane that answered only "not mine" (None)
for an invalid body made the loop parse it again for the errors: a 56 MB body refused by its schema held
the loop as long as a valid one. `Refusal` carries the errors themselves (without their `input`, which may
be the whole body, and with context values as plain text), rendered as FastAPI's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Refusal:
    """A body its model refused, as pydantic's errors (`loc`, `msg`, `type`, `ctx`), each picklable."""

    errors: tuple[dict[str, Any], ...]


def _portable(error: Any) -> dict[str, Any]:
    out = {k: v for k, v in error.items() if k not in ("input", "url")}
    if "input" in error and error["input"] is None:  # a null where a value belongs: said so in the answer
        out["input"] = None
    if "ctx" in out:
        out["ctx"] = {
            k: v if v is None or isinstance(v, bool | int | float | str) else str(v)
            for k, v in out["ctx"].items()
        }
    return out


def validate_json(model: type[M], raw: bytes, context: dict[str, Any] | None = None) -> M | Refusal:
    """`model.model_validate_json(raw, context=context)`, or the errors of its refusal."""
    try:
        return model.model_validate_json(raw, context=context)
    except ValidationError as exc:
        return Refusal(tuple(_portable(e) for e in exc.errors(include_url=False)))
