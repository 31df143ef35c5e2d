"""Parsing counts and versions from text the client wrote (paths, headers, messages).

`str.isdigit()` is no guard before `int()`: it is true of superscripts ("²") and other digits that
`int()` refuses (ValueError), and `int()` itself accepts what no client means ("٣", " 3", "1_0"). Starlette
decodes header bytes as latin-1, so a stray byte 0xB2 arrives as "²". Only ASCII decimal digits count.
"""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"[0-9]+")


def decimal(raw: str) -> int | None:
    """`raw` as a non-negative integer when it is ASCII decimal digits only, else None."""
    return int(raw) if _DECIMAL.fullmatch(raw) else None
