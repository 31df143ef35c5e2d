"""A request's validation errors as one problem to name: the first, at the location the client wrote.

pydantic reports a value that fits no member of a union once per member, under a location holding the
member's type or tag (`parameters.level.bool`, `inputs[0].series.list[float][0]`, `series[0].values.flat[0]`),
which the client never wrote. Every protocol's error answer (/v1, KServe's time-series API, OIP v2) names the
first problem through `first_problem`: its location without those parts, the members' messages joined, and
how many other places are wrong in the same reading of the body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Problem", "first_problem", "union_free"]

# A union member's type as pydantic writes it in a location: a scalar type or a parametrised container.
_MEMBER = re.compile(r"(bool|int|float|str|bytes|none|(list|dict|tuple|set|frozenset)\[.+\])")


@dataclass(frozen=True)
class Problem:
    """The first problem: its location (without union members), its message, and the other places
    wrong in the same reading of the body (the first error's union members)."""

    loc: tuple[int | str, ...]
    message: str
    more: int


def union_free(
    loc: Sequence[int | str], tags: Iterable[str] = ()
) -> tuple[tuple[int | str, ...], tuple[str, ...]]:
    """(the location without its union members' parts, those parts): a part is a member when it is a type
    as pydantic writes one (`_MEMBER`) or one of the schema's own `tags` (a discriminated union's)."""
    named = set(tags)
    kept: list[int | str] = []
    members: list[str] = []
    for part in loc:
        if isinstance(part, str) and (part in named or _MEMBER.fullmatch(part)):
            members.append(part)
        else:
            kept.append(part)
    return tuple(kept), tuple(members)


def _joined(messages: list[str]) -> str:
    """ "Input should be a valid boolean", "Input should be a valid integer" -> "Input should be a valid
    boolean or a valid integer"; other messages joined by "; "."""
    lead = "Input should be "
    if len(messages) > 1 and all(m.startswith(lead) for m in messages):
        rest = [m[len(lead) :] for m in messages]
        return lead + (", ".join(rest[:-1]) + " or " + rest[-1])
    return "; ".join(messages)


def first_problem(errors: Sequence[Mapping[str, Any]], tags: Iterable[str] = ()) -> Problem:
    """The first of pydantic's `errors` (`loc`, `msg`) as the client would name it (the module's
    docstring); `tags`: a discriminated union's own member names, beside the types pydantic writes."""
    if not errors:
        return Problem((), "invalid request", 0)
    tags = tuple(tags)
    read = [(*union_free(e.get("loc", ()), tags), str(e.get("msg"))) for e in errors]
    loc, members, _ = read[0]
    messages = list(dict.fromkeys(msg for where, _, msg in read if where == loc))
    # the other places wrong in the first error's reading (its members, or none): not the errors of the
    # members it was not read as (each number of a list refused as "not a list" by list[list[float]])
    others = {where for where, those, _ in read if where != loc and those in (members, ())}
    return Problem(loc, _joined(messages), len(others))
