"""The batch command under bad input (issue 46, item 9): two rows of a series at one time are refused,
naming the series and the time, by the scorer and by the command (exit 2, one line, no Ray traceback),
and a folder holding a symbolic link to itself (or to its parent) is walked once."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from batch import io as batch_io
from batch.score import Forecaster, Job
from tests.batch.conftest import etth1_table


def with_repeat(table: pa.Table, row: int) -> pa.Table:
    """`table` with its row `row` once more, at the end (the same series, the same time)."""
    return pa.concat_tables([table, table.slice(row, 1)])


def test_two_rows_at_one_time_are_refused_naming_the_series_and_the_time(repository: Path) -> None:
    table = etth1_table(2, seed=2)
    ids = table["unique_id"].to_pylist()
    row = [i for i, sid in enumerate(ids) if sid == "ss01"][100]
    when = table["ds"][row].as_py()
    forecaster = Forecaster(Job(str(repository), "etth1-rsa", horizon=24, threads=1))
    assert forecaster.score_table(table).num_rows == 2 * 24  # the table as it is: scored
    with pytest.raises(ValueError, match="series 'ss01' has two rows at ") as caught:
        forecaster.score_table(with_repeat(table, row))
    assert when.strftime("%Y-%m-%dT%H:%M:%S") in str(caught.value)
    # The last row of one series and the first row of the next at one time: not a repeat.
    a = table.filter(pc.equal(table["unique_id"], "ss00"))
    stamps = a["ds"].to_pylist()
    shift = max(stamps) - min(stamps)
    b = a.set_column(0, "unique_id", pa.array(["ss99"] * a.num_rows, a["unique_id"].type))
    b = b.set_column(1, "ds", pa.array([t + shift for t in stamps], a["ds"].type))
    assert forecaster.score_table(pa.concat_tables([a, b])).num_rows == 2 * 24


def test_a_missing_row_in_the_window_is_refused_and_one_before_it_is_not(repository: Path) -> None:
    """A window with a row missing was read as consecutive steps (the values a step off, the daily cycle
    out of phase). The rows the model reads (its last L = 512) must step by its hour; a gap before them is
    not read. Series end to end are judged apart."""
    table = etth1_table(2, seed=2)
    forecaster = Forecaster(Job(str(repository), "etth1-rsa", horizon=24, threads=1))
    ids = table["unique_id"].to_pylist()
    times = table["ds"].to_pylist()
    rows = sorted((i for i, sid in enumerate(ids) if sid == "ss01"), key=times.__getitem__)
    L = forecaster.manifest.input_length
    inside, before = rows[-L // 2], rows[-L - 2]  # one row the window reads, one it does not
    keep = [i for i in range(table.num_rows) if i != inside]
    with pytest.raises(
        ValueError, match=r"series 'ss01': the rows its window reads .* must step by h"
    ) as caught:
        forecaster.score_table(table.take(keep))
    gap_end = (times[inside] + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert f"but {gap_end}" in str(caught.value)
    assert len(rows) > L + 2
    older = table.take([i for i in range(table.num_rows) if i != before])
    assert forecaster.score_table(older).num_rows == 2 * 24


def test_a_symbolic_link_to_the_folder_itself_is_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    pq.write_table(etth1_table(1, seed=1), root / "part-0.parquet")
    pq.write_table(etth1_table(1, seed=2), root / "sub" / "part-1.parquet")
    os.symlink(root, root / "loop")  # the folder itself
    assert batch_io.list_parts(str(root)).relative == ["part-0.parquet", "sub/part-1.parquet"]
    # Two loops (Arrow's listing would have walked 2 ** 40 paths), and a link to nothing.
    os.symlink(root, root / "sub" / "up")  # its parent, from below
    os.symlink(root / "nowhere", root / "dangling")
    assert batch_io.list_parts(str(root)).relative == ["part-0.parquet", "sub/part-1.parquet"]
    # A link to a folder outside the input, met once, is still followed.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    pq.write_table(etth1_table(1, seed=3), outside / "part-2.parquet")
    os.symlink(outside, root / "more")
    assert batch_io.list_parts(str(root)).relative == [
        "more/part-2.parquet",
        "part-0.parquet",
        "sub/part-1.parquet",
    ]


def test_the_command_refuses_a_repeated_time_and_walks_a_loop_once(
    repository: Path, tmp_path: Path, ray_state: Path
) -> None:
    """`python -m batch score` on a folder holding a good part, a part with one time twice and a link
    to itself: exit 2, the error naming the part, the series and the time on one line."""
    root = tmp_path / "in"
    root.mkdir()
    pq.write_table(etth1_table(2, seed=1), root / "part-0.parquet")
    table = etth1_table(2, seed=2, prefix="r")
    row = [i for i, sid in enumerate(table["unique_id"].to_pylist()) if sid == "rs01"][100]
    pq.write_table(with_repeat(table, row), root / "part-1.parquet")
    os.symlink(root, root / "loop")
    env = {**os.environ, "RAY_TMPDIR": str(ray_state)}
    command = [
        sys.executable, "-m", "batch", "score", "--model-repository", str(repository), "--model", "etth1-rsa",
        "--input", str(root), "--output", str(tmp_path / "out"), "--horizon", "24", "--threads", "1",
        "--num-cpus", "1",
    ]  # fmt: skip
    workdir = Path(__file__).resolve().parents[2]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: part 'part-1.parquet': series 'rs01' has two rows at "), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    written = sorted(
        p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.parquet")
    )
    assert written in ([], ["part-0.parquet"]), written  # never loop/part-0.parquet, loop/loop/...


def test_a_part_without_the_id_time_or_channel_columns_is_refused_before_ray_starts(
    repository: Path, tmp_path: Path
) -> None:
    """A part without the id column (one series written as `ds, y`), without the time column or without
    a channel: refused naming the part, the column and the option, read from the parts' headers before Ray
    starts. Before, an actor failed with Arrow's `Field "unique_id" does not exist in schema` and a Ray
    traceback."""
    import pyarrow.csv as pacsv
    import ray

    from batch.score import run

    table = etth1_table(1, seed=3)
    renamed = table.rename_columns(["unique_id", "when", *table.column_names[2:]])
    cases = {
        "no-id.parquet": (
            table.drop(["unique_id"]),
            "has no column 'unique_id'; name the part's own with --id-column",
        ),
        "no-time.csv": (renamed, "has no column 'ds'; name the part's own with --time-column"),
        "no-channel.parquet": (table.drop(["OT"]), r": model etth1-rsa reads channels .*OT"),
    }
    job = Job(str(repository), "etth1-rsa", horizon=24, threads=1)
    for name, (part, said) in cases.items():
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        if name.endswith(".csv"):
            pacsv.write_csv(part, folder / name)
        else:
            pq.write_table(part, folder / name)
        with pytest.raises(ValueError, match=rf"input part .*{name}:? ?{said}"):
            run(job, str(folder), str(tmp_path / "out"))
        assert not ray.is_initialized()


def test_a_one_channel_models_target_is_named_with_target_column(repository: Path) -> None:
    """fpp3's `us_employment` scored as written (`Employed`, not the channel's `y`): refused saying
    --target-column, which then reads it, as `train` and the client's `target_col` read it; a
    multi-channel model's channels are columns of their own names, so the option is refused there."""
    from batch.job import channel_columns, published

    _, several = published(str(repository), "etth1-rsa", None)
    one = several.model_copy(update={"channels": ("y",), "name": "us_employment"})
    names = ["Month", "Series_ID", "Title", "Employed"]
    with pytest.raises(
        ValueError, match=r"reads channels \['y'\].*; name the target's column with --target-column$"
    ):
        channel_columns(names, one)
    assert channel_columns(names, one, "Employed") == ["Employed"]
    assert channel_columns(["ds", "y"], one) == ["y"]
    with pytest.raises(ValueError, match=r"no target column 'Sales' \(--target-column\)"):
        channel_columns(names, one, "Sales")
    with pytest.raises(ValueError, match="--target-column names a one-channel model's target"):
        channel_columns([*several.channels], several, "OT")
    with pytest.raises(ValueError) as caught:
        channel_columns(["ds"], several)
    assert "--target-column" not in str(caught.value)


def test_the_columns_a_job_does_not_read_are_named(repository: Path, tmp_path: Path) -> None:
    """An input column that is neither the id, the time, a channel nor a covariate (fpp3's us_employment's
    `Title`) is named by the command's note, as the client's warning names it; read from the parts'
    headers, each once."""
    from batch.job import check_input_columns, published

    _, manifest = published(str(repository), "etth1-rsa", None)
    table = etth1_table(1, seed=4)
    for i, extra in enumerate(([], ["Title"], ["Title", "rownames"])):
        folder = tmp_path / f"in{i}"
        folder.mkdir()
        part = table
        for name in extra:
            part = part.append_column(name, pa.array(["x"] * part.num_rows))
        pq.write_table(part, folder / "a.parquet")
        pq.write_table(part, folder / "b.parquet")
        parts = batch_io.list_parts(str(folder))
        job = Job(str(repository), "etth1-rsa", threads=1)
        assert check_input_columns(job, manifest, parts, parts.relative) == extra
