"""The batch scorer reads a text time column as `export.panel` reads the file and the client a frame
(rsa_core.written): a CSV part whose `ds` is "Jan 2015", "2015Q1", "13/01/2015" or an ISO week is dated as
the exporter dates it (before, Arrow's cast refused every form but ISO 8601 with "Failed to parse
string"); a day/month order the part leaves open, and a cell that does not read, name the row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from batch.reading import _utc_micros
from export.data import load_panel
from tests.utils.written import FORMS, STEPS


@pytest.mark.parametrize("form", list(FORMS))
def test_a_parts_text_times_read_as_the_exporter_reads_the_file(tmp_path: Path, form: str) -> None:
    start = "2015-01-05" if form == "1991 W06" else "2015-01-01"
    stamps = pd.date_range(start, periods=30, freq=STEPS.get(form, "MS"))
    text = [FORMS[form](t) for t in stamps]
    pd.DataFrame({"unique_id": "a", "ds": text, "y": np.arange(30.0)}).to_csv(tmp_path / "f.csv", index=False)
    exporter = load_panel(tmp_path / "f.csv").series[0].timestamps
    micros = _utc_micros(pa.chunked_array([text]), None, None, "ds")
    np.testing.assert_array_equal(micros.astype("datetime64[us]").astype("datetime64[ns]"), exporter)


def test_an_open_day_month_order_and_a_bad_cell_are_refused_naming_the_row() -> None:
    months = [f"{t:%d/%m/%Y}" for t in pd.date_range("2015-01-01", periods=12, freq="MS")]
    with pytest.raises(ValueError, match=r"row 1, column 'ds': ambiguous date '01/02/2015'.*ISO 8601"):
        _utc_micros(pa.chunked_array([months]), None, None, "ds")
    with pytest.raises(ValueError, match=r"row 2, column 'ds': not a date: 'soon'"):
        _utc_micros(pa.chunked_array([["2015-01-01", "2015-02-01", "soon"]]), None, None, "ds")


def test_integer_years_are_read_as_years_and_an_integer_index_refused() -> None:
    """A Parquet part of yearly data with an int64 `ds` (1800, 1801...): Arrow's cast took them as
    microseconds since 1970; they are read as the client and the exporter read them (years)."""
    years = pa.chunked_array([pa.array(np.arange(1800, 1805), pa.int64())])
    micros = _utc_micros(years, None, None, "ds")
    assert micros.astype("datetime64[us]").astype(str).tolist()[:2] == [
        "1800-01-01T00:00:00.000000",
        "1801-01-01T00:00:00.000000",
    ]
    with pytest.raises(
        ValueError, match=r"row 0, column 'ds': not a date: '1'.*a plain number is a time index"
    ) as e:
        _utc_micros(pa.chunked_array([pa.array([1, 2, 3], pa.int32())]), None, None, "ds")
    # The hint's pandas line is the fix: no ISO 8601 advice after it, which numbers could not follow.
    assert str(e.value).endswith("frame['ds'] = pd.date_range('2015-01-01', periods=len(frame), freq='D'))")


def test_float_decimal_years_are_read_as_months() -> None:
    """A Parquet part of fpp2's data as pandas writes it: a float64 `time` of R's decimal years, which Arrow
    writes back as "1956" for 1956.0; read as the exporter and the client read them (each month's first
    day), not cast to microseconds since 1970."""
    quarters = pd.date_range("1956-01-01", periods=8, freq="QS")
    column = pa.chunked_array([pa.array(quarters.year + (quarters.month - 1) / 12, pa.float64())])
    micros = _utc_micros(column, None, None, "time")
    np.testing.assert_array_equal(
        micros.astype("datetime64[us]"), quarters.to_numpy().astype("datetime64[us]")
    )
