"""Counts and versions parsed from client text: ASCII decimal digits only."""

from __future__ import annotations

import pytest

from app.core.numbers import decimal


@pytest.mark.parametrize(("raw", "value"), [("0", 0), ("7", 7), ("0012", 12), ("123456789", 123456789)])
def test_ascii_digits_are_numbers(raw: str, value: int) -> None:
    assert decimal(raw) == value


@pytest.mark.parametrize("raw", ["", "²", "1²", "٣", "1_0", " 3", "3\n", "-1", "+1", "1.0", "abc"])
def test_anything_else_is_none(raw: str) -> None:
    # "²".isdigit() is True but int("²") raises; "٣" and "1_0" int() would accept
    assert decimal(raw) is None
