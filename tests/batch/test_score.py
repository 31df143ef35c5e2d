"""Batch scoring: the service's answers bit for bit, parts in and out on a local Ray, reruns skip what is
done, a failed part is tried again, progress as plain lines off a terminal."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from batch.progress import Progress
from batch.score import Forecaster, Job, retrying, run
from tests.app.conftest import make_settings, running_client
from tests.batch.conftest import CHANNELS, etth1_table

L = 512


def v1_forecasts(client, table: pa.Table, h: int, levels: list[float]) -> dict:
    """/v1's answers for each series' last L rows, every series in one request (so in one session call,
    as the batch command runs them)."""
    frame = table.to_pandas().sort_values(["unique_id", "ds"])
    series = []
    for sid, rows in frame.groupby("unique_id", sort=True):
        last = rows.tail(L)
        start = last["ds"].iloc[0].isoformat()
        series.append({"id": sid, "values": last[CHANNELS].to_numpy().tolist(), "start": start})
    r = client.post(
        "/v1/models/etth1-rsa/versions/5/forecast", json={"series": series, "horizon": h, "level": levels}
    )
    assert r.status_code == 200, r.text
    return {f["id"]: f for f in r.json()["forecasts"]}


def test_batch_answers_are_the_services_bit_for_bit(repository):
    table = etth1_table(9, seed=3)
    job = Job(str(repository), "etth1-rsa", horizon=48, levels=(80.0,), threads=1)
    out = Forecaster(job).score_table(table).to_pandas()
    with running_client(make_settings(repository, models=["etth1-rsa"])) as client:
        expected = v1_forecasts(client, table, 48, [80])
    assert sorted(out["unique_id"].unique()) == sorted(expected)
    for sid, rows in out.groupby("unique_id"):
        want = expected[sid]
        stamps = np.array([np.datetime64(t[:19]) for t in want["timestamps"]], "datetime64[us]")
        assert (rows["ds"].to_numpy().astype("datetime64[us]") == stamps).all()
        for suffix, key in (("", "forecast"), ("-lo-80", "lo-80"), ("-hi-80", "hi-80")):
            got = rows[[f"etth1-rsa-{c}{suffix}" for c in CHANNELS]].to_numpy()  # named after the model
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, np.asarray(want[key], np.float32))


def test_missing_values_are_filled_as_the_service_fills_them(repository):
    """A NaN in a series' window is filled by the model's training rule and counted, as /v1 fills a null:
    the same forecast as /v1 given the same history with that value missing."""
    table = etth1_table(2, seed=5).to_pandas().sort_values(["unique_id", "ds"]).reset_index(drop=True)
    holes = table.index[table["unique_id"] == "ss01"][-10:-7]  # three rows inside the window
    table.loc[holes, "OT"] = np.nan
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    out = Forecaster(Job(str(repository), "etth1-rsa", horizon=24, threads=1)).score_table(arrow).to_pandas()
    with running_client(make_settings(repository, models=["etth1-rsa"])) as client:
        last = table[table["unique_id"] == "ss01"].tail(L)
        values = [[None if np.isnan(v) else float(v) for v in row] for row in last[CHANNELS].to_numpy()]
        body = {"series": [{"id": "ss01", "values": values, "start": last["ds"].iloc[0].isoformat()}]}
        r = client.post("/v1/models/etth1-rsa/versions/5/forecast", json={**body, "horizon": 24})
    assert r.status_code == 200, r.text
    answer = r.json()["forecasts"][0]
    assert answer["filled"] == 3
    got = out[out["unique_id"] == "ss01"][[f"etth1-rsa-{c}" for c in CHANNELS]].to_numpy()
    np.testing.assert_allclose(got, np.asarray(answer["forecast"], np.float32), rtol=1e-4, atol=1e-5)


def test_a_series_the_service_refuses_is_named(repository):
    table = etth1_table(3).to_pandas()
    short = table[table["unique_id"] == "ss01"].sort_values("ds").tail(100)
    table = pa.Table.from_pandas(pd_concat(table[table["unique_id"] != "ss01"], short), preserve_index=False)
    with pytest.raises(ValueError, match="series 'ss01' has 100 points; the model needs at least 512"):
        Forecaster(Job(str(repository), "etth1-rsa", threads=1)).score_table(table)


def pd_concat(*frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def write_parts(folder: Path) -> dict[str, pa.Table]:
    """Three parts, two CSV in a subfolder and one Parquet, each its own series."""
    parts = {
        "region=a/part-0.csv": etth1_table(3, seed=1, prefix="a"),
        "region=a/part-1.csv": etth1_table(2, seed=2, prefix="b"),
        "region=b/part-0.parquet": etth1_table(4, seed=4, prefix="c"),
    }
    for rel, table in parts.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".csv"):
            pacsv.write_csv(table, path)
        else:
            pq.write_table(table, path)
    return parts


def test_a_folder_of_parts_on_local_ray_then_a_rerun_skips_them(repository, tmp_path):
    parts = write_parts(tmp_path / "in")
    job = Job(str(repository), "etth1-rsa", horizon=24, levels=(80.0,), threads=1)
    lines = io.StringIO()
    summary = run(
        job, str(tmp_path / "in"), str(tmp_path / "out"), num_cpus=1, progress=Progress(lines, every_s=0)
    )
    assert summary.series == 9 and summary.skipped == 0 and summary.providers == {"CPUExecutionProvider"}
    forecaster = Forecaster(job)
    for rel, table in parts.items():
        written = pq.read_table(tmp_path / "out" / (rel.rsplit(".", 1)[0] + ".parquet"))
        if rel.endswith(".csv"):  # as the batch command read it: through CSV
            table = pacsv.read_csv(tmp_path / "in" / rel)
        assert written.equals(forecaster.score_table(table)), rel
    shown = lines.getvalue().splitlines()
    assert len(shown) == 3 and shown[-1].startswith("parts 3/3  series 9  ") and "ETA 0:00:00" in shown[-1]
    again = run(job, str(tmp_path / "in"), str(tmp_path / "out"), num_cpus=1)
    assert again.skipped == 3 and again.series == 0  # nothing left: Ray is not even started
    (tmp_path / "out" / "region=b" / "part-0.parquet").unlink()  # as if that part had failed
    rest = run(job, str(tmp_path / "in"), str(tmp_path / "out"), num_cpus=1)
    assert rest.skipped == 2 and rest.series == 4
    assert not list((tmp_path / "out").rglob(".tmp-*"))  # written under a temporary name, then renamed


def test_a_failed_try_is_retried_within_bounds():
    calls = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("the store hiccupped")
        return 7

    assert retrying(flaky, 2, "part x") == 7 and len(calls) == 3
    calls.clear()
    with pytest.raises(OSError):
        retrying(flaky, 1, "part x")
    assert len(calls) == 2


def test_progress_on_a_terminal_is_a_bar():
    stream = io.StringIO()
    progress = Progress(stream, bar=True)
    progress.start(2)
    progress.update(10)
    progress.update(5)
    progress.close()
    shown = stream.getvalue()
    assert "2/2" in shown and "series=15" in shown and "parts 2/2" not in shown


def test_parts_by_url_and_their_output_names(tmp_path):
    from batch import io as batch_io

    write_parts(tmp_path / "in")
    (tmp_path / "in" / "_SUCCESS").write_text("")  # markers and hidden files are not parts
    parts = batch_io.list_parts(f"file://{tmp_path / 'in'}")
    assert parts.relative == ["region=a/part-0.csv", "region=a/part-1.csv", "region=b/part-0.parquet"]
    assert [batch_io.output_name(parts, r) for r in parts.relative] == [
        "region=a/part-0.parquet",
        "region=a/part-1.parquet",
        "region=b/part-0.parquet",
    ]
    single = batch_io.list_parts(str(tmp_path / "in" / "region=a" / "part-1.csv"))
    assert single.relative == [""] and batch_io.output_name(single, "") == "part-1.parquet"
    assert batch_io.read_part(single.fs, single.path("")).num_rows > 0
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        batch_io.list_parts(str(tmp_path / "nowhere"))


def test_the_batch_command_leaves_no_token_in_the_home_folder(repository, tmp_path, ray_state):
    """A local Ray of the batch command's own authenticates with a token of its own from the environment:
    Ray's default writes ~/.ray/auth_token and leaves it. Run as a user would, with no RAY_AUTH_* set,
    in a process of its own (Ray's token loader keeps the first token a process read)."""
    import os
    import subprocess
    import sys

    write_parts(tmp_path / "in")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env |= {"HOME": str(home), "RAY_TMPDIR": str(ray_state)}
    command = [
        sys.executable, "-m", "batch", "score", "--model-repository", str(repository), "--model", "etth1-rsa",
        "--input", str(tmp_path / "in" / "region=b"), "--output", str(tmp_path / "out"), "--horizon", "24",
        "--threads", "1", "--num-cpus", "1",
    ]  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scored 4 series in 1 part (" in done.stdout, done.stdout
    assert not (home / ".ray").exists(), sorted(p.name for p in (home / ".ray").iterdir())
    # Issue 45 item 12: a successful run prints its progress and summary, none of Ray's notices, and a
    # small run's rate in two figures, not "0 series/s".
    for noise in ("Token authentication", "RayDeprecationWarning", "core_worker", " INFO ", "Progress bars"):
        assert noise not in done.stderr, done.stderr
    assert done.stderr.startswith("parts 1/1  series 4  "), done.stderr
    assert " 0 series/s" not in done.stdout + done.stderr, done.stdout


def test_sorted_shuffled_and_dictionary_tables_give_the_same_answer(repository):
    """A part already sorted by id and time is scored without a sorted copy; shuffled rows, a dictionary
    id column and extra columns give the same bits; a null id is refused, naming the column."""
    forecaster = Forecaster(Job(str(repository), "etth1-rsa", horizon=24, levels=(80.0,), threads=1))
    shuffled = etth1_table(3, seed=7)
    ordered = shuffled.sort_by([("unique_id", "ascending"), ("ds", "ascending")])
    want = forecaster.score_table(shuffled)
    assert forecaster.score_table(ordered).equals(want)
    extra = ordered.append_column("note", pa.array(["x"] * ordered.num_rows))
    assert forecaster.score_table(extra).equals(want)
    coded = ordered.set_column(0, "unique_id", pc.dictionary_encode(ordered["unique_id"]))
    assert forecaster.score_table(coded).equals(want)
    ids = ordered["unique_id"].to_pylist()
    ids[5] = None
    with pytest.raises(ValueError, match="column 'unique_id' has 1 null ids"):
        forecaster.score_table(ordered.set_column(0, "unique_id", pa.array(ids)))
