"""Batch scoring of a covariate model (issue 37 with issue 36's covariates): past covariates and statics
from the input table's columns, future-known ones from a second table (`--future`), the calendar from the
horizon's timestamps. The answers are /v1's for the same series and covariates, bit for bit; a series
whose future rows are missing, too few or at the wrong times, and a table without a covariate's column,
are refused naming the series and the column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from batch.__main__ import main
from batch.score import Forecaster, FutureRows, Job, run
from tests.app.conftest import make_settings, running_client
from tests.utils.shops import NAME, H, Shops, publish_shops, v1_series


@pytest.fixture(scope="module")
def shops(tmp_path_factory: pytest.TempPathFactory) -> Shops:
    """6 shops (shop_5 with SHORT days of history) and their model, exported with intervals."""
    return publish_shops(tmp_path_factory.mktemp("batch-covariates"))


@pytest.fixture(scope="module")
def levels(shops: Shops) -> list[float]:
    """The first level the model calibrated."""
    with running_client(make_settings(shops.repository)) as client:
        entry = client.get(f"/v1/models/{NAME}").json()["versions"][0]
    return [float(v) for v in (entry.get("intervals") or {}).get("levels", [])][:1]


def table(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame.sample(frac=1.0, random_state=1), preserve_index=False)  # unsorted


def v1_answers(shops: Shops, levels: list[float]) -> dict[str, Any]:
    """/v1's answer for every shop in one request, its covariates sent as `future`, `past`, `static`."""
    series = v1_series(shops.history, shops.future)
    with running_client(make_settings(shops.repository)) as client:
        body = {"series": series, **({"level": levels} if levels else {})}
        r = client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 200, r.text
    return {f["id"]: f for f in r.json()["forecasts"]}


def test_covariate_forecasts_are_v1s_bit_for_bit(shops: Shops, levels: list[float]) -> None:
    job = Job(str(shops.repository), NAME, levels=tuple(levels), threads=1)
    out = Forecaster(job).score_table(table(shops.history), table(shops.future)).to_pandas()
    expected = v1_answers(shops, levels)
    assert levels, "the model was exported with intervals"
    assert sorted(out["unique_id"].unique()) == sorted(expected) and len(out) == 6 * H
    for sid, rows in out.groupby("unique_id"):
        want = expected[sid]
        stamps = np.array([np.datetime64(t[:19]) for t in want["timestamps"]], "datetime64[us]")
        assert (rows["ds"].to_numpy().astype("datetime64[us]") == stamps).all()
        keys = [("", "forecast")] + [(f"-{s}-{v:g}", f"{s}-{v:g}") for v in levels for s in ("lo", "hi")]
        for suffix, key in keys:
            got = rows[[f"{NAME}{suffix}"]].to_numpy()  # named after the model
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, np.asarray(want[key], np.float32), err_msg=f"{sid} {key}")
    # the covariates are read: other promotions give another forecast
    flipped = shops.future.assign(promo=1 - shops.future["promo"])
    other = Forecaster(job).score_table(table(shops.history), table(flipped)).to_pandas()
    assert not np.array_equal(other[NAME].to_numpy(), out[NAME].to_numpy())


def test_a_zoned_models_naive_times_are_read_in_its_zone(tmp_path: Path) -> None:
    """A model trained in Bogotá's zone reads a naive time there, as /v1 reads a naive `start`: its
    day-of-week calendar is Bogotá's (read as UTC, every midnight would fall on the day before), and
    the output's naive times are Bogotá's wall clock, /v1's timestamps without their offset."""
    shops = publish_shops(tmp_path, n=3, short=False, timezone="America/Bogota")
    levels: list[float] = []
    out = Forecaster(Job(str(shops.repository), NAME, threads=1)).score_table(
        table(shops.history), table(shops.future)
    )
    expected = v1_answers(shops, levels)
    for sid, rows in out.to_pandas().groupby("unique_id"):
        want = expected[sid]
        assert want["timestamps"][0].endswith("-05:00")  # UTC-5, no DST
        stamps = np.array([np.datetime64(t[:19]) for t in want["timestamps"]], "datetime64[us]")
        assert (rows["ds"].to_numpy().astype("datetime64[us]") == stamps).all()
        np.testing.assert_array_equal(rows[[NAME]].to_numpy(), np.asarray(want["forecast"], np.float32))


def write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def test_parts_on_local_ray_with_a_mirrored_future_folder(
    shops: Shops, levels: list[float], tmp_path: Path
) -> None:
    """Two input parts (CSV, Parquet) and a future folder with a part at each one's relative path (one
    CSV, one Parquet): each part's series read from its own future part; the output is score_table's."""
    first = shops.history["unique_id"].isin(["shop_0", "shop_1", "shop_5"])
    in_first = shops.future["unique_id"].isin(["shop_0", "shop_1", "shop_5"])
    write(shops.history[first], tmp_path / "in" / "part-0.csv")
    write(shops.history[~first], tmp_path / "in" / "part-1.parquet")
    write(shops.future[in_first], tmp_path / "future" / "part-0.parquet")
    # part-1's future also holds rows of a part-0 series (a day late): read with part-0 they would be
    # refused as too many, so part-0 reading its mirror alone is seen
    stray = shops.future[shops.future["unique_id"] == "shop_0"].assign(
        ds=lambda f: f["ds"] + pd.Timedelta(days=1)
    )
    write(pd.concat([shops.future[~in_first], stray]), tmp_path / "future" / "part-1.csv")
    job = Job(str(shops.repository), NAME, levels=tuple(levels), threads=1, future=str(tmp_path / "future"))
    summary = run(job, str(tmp_path / "in"), str(tmp_path / "out"), num_cpus=1)
    assert summary.series == 6 and summary.parts == 2
    forecaster = Forecaster(job)
    for name, suffix, future in (("part-0", ".csv", in_first), ("part-1", ".parquet", ~in_first)):
        source = tmp_path / "in" / (name + suffix)
        part = pacsv.read_csv(source) if source.suffix == ".csv" else pq.read_table(source)
        want = forecaster.score_table(part, pa.Table.from_pandas(shops.future[future], preserve_index=False))
        assert pq.read_table(tmp_path / "out" / f"{name}.parquet").equals(want), name


def test_a_future_folder_that_does_not_mirror_is_read_for_each_parts_ids(
    shops: Shops, tmp_path: Path
) -> None:
    """Future parts named unlike the input's: every one is read, and only the rows of the asked series
    kept (a CSV id column read as strings; a Parquet one cast)."""
    write(shops.future.iloc[::2], tmp_path / "f" / "a.csv")
    write(shops.future.iloc[1::2], tmp_path / "f" / "b.parquet")
    rows = FutureRows(str(tmp_path / "f"), "unique_id", "ds", ["promo"])
    got = rows.read("part-0.parquet", pa.array(["shop_1", "shop_3"])).to_pandas()
    assert sorted(got["unique_id"].unique()) == ["shop_1", "shop_3"] and len(got) == 2 * H
    assert sorted(got["promo"]) == sorted(
        shops.future[shops.future["unique_id"].isin(["shop_1", "shop_3"])]["promo"]
    )


def bad_future(shops: Shops, change: str) -> pd.DataFrame:
    future = shops.future.copy()
    if change == "missing":
        return future[future["unique_id"] != "shop_2"]
    if change == "short":
        return future.drop(future.index[future["unique_id"] == "shop_2"][-1:])
    if change == "late":
        future.loc[future["unique_id"] == "shop_2", "ds"] += pd.Timedelta(days=1)
        return future
    if change == "nan":
        future.loc[future.index[future["unique_id"] == "shop_2"][3], "promo"] = np.nan
        return future
    raise AssertionError(change)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("missing", "series 'shop_2' has no rows in the future table"),
        ("short", "series 'shop_2' has 6 rows in the future table (--future); model 'shops' needs exactly 7"),
        ("late", "series 'shop_2': the future table's row 0 is at 2023-05-16T00:00:00+00:00"),
        ("nan", "series 'shop_2'.future.promo[3]: a covariate value must be a finite number"),
    ],
)
def test_bad_future_rows_are_refused_naming_the_series(shops: Shops, change: str, words: str) -> None:
    forecaster = Forecaster(Job(str(shops.repository), NAME, threads=1))
    with pytest.raises(ValueError) as caught:
        forecaster.score_table(table(shops.history), table(bad_future(shops, change)))
    assert words in str(caught.value), str(caught.value)


def test_bad_covariate_columns_are_refused_naming_them(shops: Shops) -> None:
    forecaster = Forecaster(Job(str(shops.repository), NAME, threads=1))
    future = table(shops.future)
    with pytest.raises(ValueError, match="no column 'footfall', a past covariate of model 'shops'"):
        forecaster.score_table(table(shops.history.drop(columns="footfall")), future)
    moved = shops.history.copy()
    moved.loc[moved.index[moved["unique_id"] == "shop_3"][-1], "size"] = "other"
    with pytest.raises(ValueError, match="series 'shop_3': static covariate 'size' must hold one value"):
        forecaster.score_table(table(moved), future)
    unseen = shops.history.assign(size="huge")
    with pytest.raises(ValueError, match=r"series 'shop_0'.static.size: must be one of the training"):
        forecaster.score_table(table(unseen), future)


def test_the_command_refuses_before_ray_starts(shops: Shops, tmp_path: Path, repository: Path) -> None:
    """A future table missing, without a covariate's column or with a column the model does not read, or
    one given to a model without future covariates: refused before Ray starts, exit status 2."""
    write(shops.history, tmp_path / "in.csv")
    write(shops.future.rename(columns={"promo": "promotion"}), tmp_path / "renamed.csv")
    write(shops.future.assign(price=1.0), tmp_path / "extra.parquet")
    out = tmp_path / "out"
    cases = [
        (None, NAME, shops.repository, r"reads the future covariates \['promo'\].*--future"),
        ("renamed.csv", NAME, shops.repository, r"renamed.csv has no column 'promo'"),
        ("extra.parquet", NAME, shops.repository, r"column 'price' is not a future covariate"),
        ("extra.parquet", "etth1-rsa", repository, r"reads no future covariates"),
    ]
    for future, model, repo, words in cases:
        job = Job(str(repo), model, future=None if future is None else str(tmp_path / future))
        with pytest.raises(ValueError, match=words):
            run(job, str(tmp_path / "in.csv"), str(out))
        assert not out.exists()
    args = [
        "score",
        "--model-repository",
        str(shops.repository),
        "--model",
        NAME,
        "--input",
        str(tmp_path / "in.csv"),
    ]
    assert main([*args, "--output", str(out), "--future", str(tmp_path / "renamed.csv")]) == 2
