"""The one error a data file's problems raise, and how its messages say where."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DataError"]

# Cells read as "missing" rather than "not a number" (compared lower-case, stripped).
_MISSING_TOKENS = frozenset({"", "nan", "-nan", "+nan", "na", "n/a", "null", "none", "nat"})


class DataError(ValueError):
    """A problem with a user's CSV or with the requested split of it; the message says where.

    ``problems`` holds each problem's own message when a file has several (the message lists them all,
    one per line), else just the message."""

    def __init__(self, message: str, problems: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) if problems else (message,)


def _where(fname: str, line: int, column: str | None = None) -> str:
    """Message prefix: ``data.csv line 57, column 'OT'``."""
    return f"{fname} line {line}" + (f", column {column!r}" if column is not None else "")


def _raise(problems: list[str]) -> None:
    """One DataError for all of a file's problems: the first on the first line, each other on its own."""
    if problems:
        raise DataError("\n".join([problems[0], *(f"also: {p}" for p in problems[1:])]), problems)
