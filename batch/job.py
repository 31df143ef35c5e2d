"""A batch job and its model: what to score with and how the input names its columns (`Job`), the
published version it scores with (`published`), the input's columns for the model's channels, and what a
covariate model needs that is checked before Ray starts (`check_covariates`), as the input's own columns are
(`check_input_columns`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.artifacts.contract import MANIFEST_FILE
from app.artifacts.covariates import CovariateLayout
from app.artifacts.manifest import Manifest, load_manifest
from app.artifacts.repository import read_model
from batch import io


@dataclass(frozen=True)
class Job:
    """What to score with and how the input names its columns."""

    repository: str
    model: str
    version: int | None = None  # None: the latest published version
    horizon: int | None = None  # None: the model's horizon
    levels: tuple[float, ...] = ()
    id_col: str = "unique_id"
    time_col: str = "ds"
    # A one-channel model's target column in the input (None: the channel's name, or `y`), as `train`'s
    # --target-column and the client's `target_col` name it.
    target_col: str | None = None
    # Windows per session call. The default model's CPU arena grows with it: the batch job's process tree
    # peaked at 11.0 GiB with calls of 500 windows (L = 512, 87 heads) and 6.2 GiB with 256, while the raw
    # session ran no faster past 64 on this machine (bench/batch.py, 2026-11-27).
    batch_rows: int = 64
    threads: int | None = None  # intra-op threads per session; None: the CPUs the actor may use
    retries: int = 2  # further tries of a part that failed, in the actor, before Ray's own retries
    # A covariate model's future-known covariates: a long table (id, time, one column per future
    # covariate; the model's H steps after each series' last timestamp), a file, folder or URL.
    future: str | None = None


def published(repository: str, model: str, version: int | None) -> tuple[Path, Manifest]:
    """The version folder (the latest when `version` is None) and its manifest."""
    ref = read_model(Path(repository), model)
    if ref.error is not None:
        raise FileNotFoundError(ref.error)
    chosen = (
        ref.versions[-1] if version is None else next((v for v in ref.versions if v.version == version), None)
    )
    if chosen is None:
        known = ", ".join(str(v.version) for v in ref.versions)
        raise FileNotFoundError(f"model {model!r} has no version {version}; versions: {known}")
    return chosen.path, load_manifest(chosen.path / MANIFEST_FILE)


def channel_columns(names: Sequence[str], manifest: Manifest, target: str | None = None) -> list[str]:
    """The input's columns for the model's channels, in its order: their names, or for one channel
    `target` (the job's --target-column) or `y`."""
    channels = list(manifest.channels)
    if target is not None:
        if len(channels) != 1:
            raise ValueError(
                f"--target-column names a one-channel model's target; model {manifest.name} reads the "
                f"channels {channels}, each a column of its name"
            )
        if target not in names:
            raise ValueError(
                f"no target column {target!r} (--target-column); the table has columns {list(names)}"
            )
        return [target]
    if all(c in names for c in channels):
        return channels
    if len(channels) == 1 and "y" in names:
        return ["y"]
    how = "; name the target's column with --target-column" if len(channels) == 1 else ""
    raise ValueError(
        f"model {manifest.name} reads channels {channels}; the table has columns {list(names)}{how}"
    )


def check_input_columns(job: Job, manifest: Manifest, parts: io.Parts, todo: Sequence[str]) -> list[str]:
    """Each input part to score has the id, time and channel columns, read from its header (or footer)
    before Ray starts: a part without them failed inside a Ray actor with Arrow's `Field "unique_id" does
    not exist in schema` and a traceback. ValueError naming the part, the column and the option. Returns
    the parts' columns that are not read (neither those nor a covariate of the model: fpp3's
    us_employment's `Title`), which the command names as the client's warning does."""
    covariates = table_covariates(manifest)
    unread: list[str] = []
    for rel in todo:
        columns = io.read_columns(parts.fs, parts.path(rel))
        where = f"input part {parts.path(rel)}"
        for column, option in ((job.id_col, "--id-column"), (job.time_col, "--time-column")):
            if column not in columns:
                raise ValueError(
                    f"{where} has no column {column!r}; name the part's own with {option} (its columns are "
                    f"{columns})"
                )
        try:
            read = [
                job.id_col,
                job.time_col,
                *channel_columns(columns, manifest, job.target_col),
                *covariates,
            ]
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        unread += [c for c in columns if c not in read and c not in unread]
    return unread


def covariate_layout(manifest: Manifest) -> CovariateLayout | None:
    return manifest.panel.layout if manifest.panel is not None else None


def table_covariates(manifest: Manifest) -> list[str]:
    """The covariates a model reads from the input table itself: its past ones, then its statics (the
    future ones come in their own table)."""
    layout = covariate_layout(manifest)
    return [] if layout is None else [*layout.past, *(s.name for s in layout.static)]


def check_covariates(job: Job, manifest: Manifest) -> None:
    """What a covariate model needs that is checked before Ray starts: a future table exactly when the
    model reads future covariates, and in each of its parts the id, time and future covariate columns
    and no other (read from the parts' headers, not their rows). ValueError saying what is wrong."""
    layout = covariate_layout(manifest)
    future = list(layout.future) if layout is not None else []
    name = f"model {manifest.name!r} version {manifest.version}"
    if future and job.future is None:
        raise ValueError(
            f"{name} reads the future covariates {future}: give each series' values for the model's "
            f"{manifest.horizon} steps after its last timestamp in a table with --future "
            f"({job.id_col}, {job.time_col}, {', '.join(future)})"
        )
    if job.future is None:
        return
    if not future:
        raise ValueError(f"{name} reads no future covariates; --future {job.future} would not be read")
    parts = io.list_parts(job.future)
    want = [job.id_col, job.time_col, *future]
    for rel in parts.relative:
        columns = io.read_columns(parts.fs, parts.path(rel))
        where = f"future table {parts.path(rel)}"
        missing = [c for c in want if c not in columns]
        if missing:
            raise ValueError(f"{where} has no column {missing[0]!r}; {name} needs the columns {want}")
        extra = [c for c in columns if c not in want]
        if extra:
            raise ValueError(
                f"{where}: column {extra[0]!r} is not a future covariate of {name} (its future covariates: "
                f"{future}); the future table holds {want} only"
            )
