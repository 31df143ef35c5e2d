"""How a file is read beyond its path: one options object, carried from the CLI or config to the reader,
recorded in the checkpoint and the manifest so that evaluation and calibration read the file the same way."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from export.data.errors import DataError
from rsa_core.zones import model_zone

__all__ = ["FILL_METHODS", "LAYOUTS", "PANEL_OPTIONS", "READ_OPTIONS", "ZONE_OPTIONS", "ReadOptions"]

# How missing values and steps may be filled (off by default: a gap is an error naming its lines).
FILL_METHODS = ("none", "linear", "ffill", "zero")

# "wide": one timestamp column and a numeric column per channel; "long": one row per (series, time):
# id, timestamp and target columns (`unique_id, ds, y`); "auto": long when an id column is named or the
# header has one of the usual long-format names (export/data/panels.py), else wide.
LAYOUTS = ("auto", "wide", "long")

# The options of a wide file, as a training run records them (and as checkpoints and manifests written
# before long files existed hold them: keep this tuple as it is, so their records read unchanged).
READ_OPTIONS = ("timestamp_column", "drop", "keep", "fill", "date_format", "dayfirst")
# The options only a long file uses; recorded only when they differ from the defaults.
PANEL_OPTIONS = ("layout", "id_column", "target_column", "sort")
# Options of any file recorded only when set (records written before them read unchanged).
ZONE_OPTIONS = ("timezone",)


def _names(value: Sequence[str] | str | None, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise DataError(f"{field} must be a list of column names, got the string {value!r}")
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class ReadOptions:
    """Every choice about reading a data file (wide or long); the defaults detect what they can."""

    timestamp_column: str | None = (
        None  # None: a column named date/timestamp/time/datetime/ds, else the first
    )
    drop: tuple[str, ...] = ()  # columns left out (text columns, say)
    keep: tuple[str, ...] = ()  # when given, the only value columns used (wide files)
    fill: str = "none"  # FILL_METHODS: how missing values and steps are filled
    date_format: str | None = None  # strftime format of the timestamps (None: detected)
    dayfirst: bool | None = None  # the day/month order where the dates leave it open
    layout: str = "auto"  # LAYOUTS
    id_column: str | None = None  # a long file's series id column (None: detected, e.g. unique_id)
    target_column: str | None = None  # a long file's value column (None: detected, e.g. y)
    sort: bool = False  # a long file's rows sorted by (id, timestamp) first instead of refused when unsorted
    # The IANA zone (zoneinfo) of timestamps written without offset, e.g. Europe/Berlin: read as local
    # wall-clock times, kept as UTC instants (export/data/timestamps.py `localize`). None: they are UTC.
    timezone: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "drop", _names(self.drop, "drop"))
        object.__setattr__(self, "keep", _names(self.keep, "keep"))
        if self.fill not in FILL_METHODS:
            raise DataError(f"fill must be one of {list(FILL_METHODS)}, got {self.fill!r}")
        if self.dayfirst is not None and not isinstance(self.dayfirst, bool):
            raise DataError(f"dayfirst must be true, false or null, got {self.dayfirst!r}")
        if self.layout not in LAYOUTS:
            raise DataError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}")
        if not isinstance(self.sort, bool):
            raise DataError(f"sort must be true or false, got {self.sort!r}")
        if self.timezone is not None:
            try:
                model_zone(str(self.timezone))  # not the host's own (`localtime`): one rule, rsa_core.zones
            except ValueError as e:
                raise DataError(
                    "timezone must be an IANA time zone name such as Europe/Berlin, got "
                    f"{self.timezone!r}: {e}"
                ) from None

    @classmethod
    def of(cls, options: ReadOptions | None = None, **overrides: Any) -> ReadOptions:
        """`options` (or the defaults) with `overrides` (field names) replaced: the keyword form
        `load_csv(path, fill="linear")` and the object form share one path."""
        return dataclasses.replace(options or cls(), **overrides)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ReadOptions:
        """The options a checkpoint or manifest recorded (`record`); other keys of the mapping and
        None values (older records) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in record.items() if k in names and v is not None})

    def changed(self) -> dict[str, Any]:
        """JSON-ready: the options that differ from the defaults, the zone left out (a global model's
        model.json records how train read its file so that export and forecast read theirs alike, and
        records its zone apart); `from_record` reads it back."""
        default = ReadOptions()
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "timezone" and value != getattr(default, f.name):
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def record(self) -> dict[str, Any]:
        """JSON-ready: every wide option (as records have always held them), and the long-format ones
        that differ from their defaults."""
        out: dict[str, Any] = {k: getattr(self, k) for k in READ_OPTIONS}
        out["drop"], out["keep"] = list(self.drop), list(self.keep)
        default = ReadOptions()
        out.update({k: getattr(self, k) for k in PANEL_OPTIONS if getattr(self, k) != getattr(default, k)})
        out.update({k: getattr(self, k) for k in ZONE_OPTIONS if getattr(self, k) is not None})
        return out
