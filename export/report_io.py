"""How a report is written and read (export/reports.py holds the report classes): `write_report` stores
a report's fields (nested dataclasses as objects) with its `kind` and `schema_version`, `read_report`
builds the class back from the file, field by field from its type hints, after the class's `migrate`
has brought an older layout up to date. A file of another kind, or of a schema newer than the code, or
holding a key its class does not declare, is refused with its path.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

__all__ = ["ReportError", "SameFields", "build", "from_dict", "read_report", "to_dict", "write_report"]

R = TypeVar("R")


class ReportError(ValueError):
    """A report file that is not of the expected kind or schema."""


def to_dict(report: Any) -> dict[str, Any]:
    """The report's fields as JSON-ready values, with its kind and schema version first."""
    return {"kind": report.kind, "schema_version": report.schema_version, **dataclasses.asdict(report)}


def write_report(path: Path, report: Any, indent: int | None = 2) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(report), indent=indent) + "\n")
    return path


def read_report(path: Path, cls: type[R]) -> R:
    """The report at `path` as `cls` (an older schema migrated by `cls.migrate`)."""
    try:
        return from_dict(cls, json.loads(Path(path).read_text()))
    except ReportError as e:
        raise ReportError(f"{path}: {e}") from None


def from_dict(cls: type[R], data: dict[str, Any]) -> R:
    """`cls` from parsed JSON: its kind checked, an older schema migrated, every field built by type."""
    kind, schema = getattr(cls, "kind"), getattr(cls, "schema_version")  # noqa: B009 (class variables)
    version = int(data.get("schema_version") or 1)  # the first layouts carried no version
    if data.get("kind", kind) != kind:
        raise ReportError(f"a {data.get('kind')!r} report, not {kind!r}")
    if version > schema:
        raise ReportError(f"{kind} schema {version} is newer than this code's ({schema})")
    data = getattr(cls, "migrate")(dict(data), version) if version < schema else data  # noqa: B009
    return _build(cls, data)


def build(cls: type[R], fields: dict[str, Any]) -> R:
    """`cls` from a mapping of its fields (nested parts as mappings or as built objects), checked as a
    read is: a missing field or one it does not declare is a ReportError."""
    return _build(cls, fields)


def _build(tp: Any, value: Any) -> Any:
    """`value` (parsed JSON) as type `tp`: dataclasses field by field, lists, dicts and optionals of
    them; anything else as it is."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(options[0], value) if len(options) == 1 else value
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_build(item, v) for v in value]
    if origin is dict:
        _, item = typing.get_args(tp)
        return {k: _build(item, v) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):  # built already
            return value
        if hasattr(tp, "from_dict"):  # a type that reads its own mapping (models.ModelConfig)
            return tp.from_dict(value)
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp) if f.init}
        unknown = sorted(set(value) - known - {"kind", "schema_version"})
        if unknown:  # every field ever written is declared: nothing is dropped unseen
            raise ReportError(f"{tp.__name__} has no field {unknown}")
        missing = [
            f.name
            for f in dataclasses.fields(tp)
            if f.init
            and f.name not in value
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ReportError(f"{tp.__name__} lacks {missing}")
        return tp(**{k: _build(hints[k], v) for k, v in value.items() if k in known})
    if tp is float and isinstance(value, int):
        return float(value)
    return value


class SameFields:
    """A report class whose older schemas hold its fields as they are (a newer one only added `kind` and
    `schema_version`, or fields with defaults): read as written."""

    @staticmethod
    def migrate(raw: dict[str, Any], version: int) -> dict[str, Any]:
        return raw
