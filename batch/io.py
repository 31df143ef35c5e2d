"""Tables in and out: a file, a folder of part files, or any filesystem URL pyarrow opens (file://,
s3://, gs://, hdfs://); CSV or Parquet in, Parquet out, one output part per input part at the same
relative path (`part-0003.csv` -> `part-0003.parquet`), written under a temporary name and renamed, so a
part that exists is finished and a rerun skips it. A local folder's symbolic links to folders are
followed once each folder (a link to the folder itself is not walked again)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq

SUFFIXES = (".parquet", ".pq", ".csv", ".csv.gz")
logger = logging.getLogger("batch")


@dataclass(frozen=True)
class Parts:
    """The input's part files: `root` on `fs`, each part by its path relative to it ("" for a single
    file, whose output is then `<output>/<its stem>.parquet`)."""

    fs: pafs.FileSystem
    root: str
    relative: list[str]

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root


def open_fs(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path) for a URL or a local path."""
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), os.path.abspath(uri)


def list_parts(uri: str) -> Parts:
    fs, root = open_fs(uri)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.File:
        return Parts(fs, root, [""])
    if info.type != pafs.FileType.Directory:
        raise FileNotFoundError(f"{uri}: no such file or folder")
    if isinstance(fs, pafs.LocalFileSystem):
        files = _local_files(root)
    else:  # object stores and HDFS: no symbolic links to loop through
        found = fs.get_file_info(pafs.FileSelector(root, recursive=True))
        files = [f.path[len(root) + 1 :] for f in found if f.type == pafs.FileType.File]
    relative = sorted(rel for rel in files if _is_part(rel.rsplit("/", 1)[-1]))
    if not relative:
        raise FileNotFoundError(f"{uri}: no CSV or Parquet part files ({', '.join(SUFFIXES)})")
    return Parts(fs, root, relative)


def _is_part(base_name: str) -> bool:
    return base_name.endswith(SUFFIXES) and not base_name.startswith((".", "_"))


def _local_files(root: str) -> list[str]:
    """The files under a local folder, by their paths relative to it. A symbolic link to a folder is
    followed only to a folder not seen yet (by device and inode), so a link to the folder itself or to one
    above it is walked once, not until the path is too long (Arrow's recursive listing went 40 levels deep
    and listed each part 41 times); a link to a folder met twice is skipped there (logged)."""
    seen: set[tuple[int, int]] = set()
    files: list[str] = []

    def walk(folder: str, rel: str) -> None:
        info = os.stat(folder)
        key = (info.st_dev, info.st_ino)
        if key in seen:
            logger.warning("%s: a folder met before (a symbolic link loop, or two links): skipped", folder)
            return
        seen.add(key)
        with os.scandir(folder) as entries:
            children = sorted(entries, key=lambda e: e.name)
        for entry in children:
            path = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir()  # through a symbolic link
                is_file = not is_dir and entry.is_file()
            except OSError:  # a dangling or looping link
                continue
            if is_dir:
                walk(entry.path, path)
            elif is_file:
                files.append(path)

    walk(root, "")
    return files


def output_name(parts: Parts, rel: str) -> str:
    """The output part's path relative to the output folder."""
    name = rel or parts.root.rsplit("/", 1)[-1]
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".parquet"
    return name + ".parquet"


def read_part(fs: pafs.FileSystem, path: str) -> pa.Table:
    if path.endswith((".csv", ".csv.gz")):
        with fs.open_input_stream(path, compression="detect") as stream:
            return pacsv.read_csv(stream)
    return pq.read_table(path, filesystem=fs)


def finished(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type == pafs.FileType.File


def write_part(fs: pafs.FileSystem, path: str, table: pa.Table) -> None:
    """Atomically where the filesystem renames atomically (local, HDFS): a temporary name, then a rename."""
    folder = path.rsplit("/", 1)[0]
    fs.create_dir(folder, recursive=True)
    tmp = f"{folder}/.tmp-{path.rsplit('/', 1)[-1]}"
    pq.write_table(table, tmp, filesystem=fs)
    fs.move(tmp, path)


def read_columns(fs: pafs.FileSystem, path: str) -> list[str]:
    """A part's column names, from its header (CSV) or footer (Parquet), without reading its rows."""
    if path.endswith((".csv", ".csv.gz")):
        with fs.open_input_stream(path, compression="detect") as stream:
            return list(pacsv.open_csv(stream).schema.names)
    with fs.open_input_file(path) as f:
        return list(pq.read_schema(f).names)


def read_matching(fs: pafs.FileSystem, path: str, column: str, keys: pa.Array) -> list[pa.RecordBatch]:
    """The rows of a part whose `column`, read as a string, is one of `keys` (strings): read a batch at a
    time and filtered, so memory holds the rows kept and one batch, never the whole part (CSV: the column
    declared a string, so that an id like 007 keeps its zeros and a later batch cannot change its type)."""
    kept = []
    if path.endswith((".csv", ".csv.gz")):
        options = pacsv.ConvertOptions(column_types={column: pa.string()})
        with fs.open_input_stream(path, compression="detect") as stream:
            for batch in pacsv.open_csv(stream, convert_options=options):
                kept.append(batch.filter(pc.is_in(batch.column(column), value_set=keys)))
    else:
        with fs.open_input_file(path) as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=65_536):
                ids = pc.cast(batch.column(column), pa.string())
                kept.append(batch.filter(pc.is_in(ids, value_set=keys)))
    return [b for b in kept if b.num_rows]
