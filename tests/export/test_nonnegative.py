"""Which channels are never negative: declared, or detected from the training rows (zeros are its floor)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from export.data import load_dataset
from export.nonnegative import resolve_nonnegative, undeclared


@pytest.fixture
def ds(tmp_path: Path):
    rng = np.random.default_rng(0)
    n = 200
    spend = np.where(rng.uniform(size=n) < 0.2, 0.0, rng.gamma(2.0, 50.0, n))  # 20% days without spend
    visits = rng.poisson(40, n) + 1.0  # never negative, never 0: not detected, named in the hint
    temperature = rng.normal(5, 6, n)  # goes below 0
    stamps = pd.date_range("2022-01-01", periods=n, freq="D")
    rows = [
        f"{t.date()},{a:.2f},{b:.0f},{c:.2f}"
        for t, a, b, c in zip(stamps, spend, visits, temperature, strict=True)
    ]
    path = tmp_path / "shop.csv"
    path.write_text("date,spend,visits,temp\n" + "\n".join(rows) + "\n")
    return load_dataset(path, 14, 7)


def test_detected_declared_and_refused(ds) -> None:
    assert resolve_nonnegative("auto", ds) == (
        ["spend"],
        "detected: no negative value and at least 5% zeros in the training rows",
    )
    assert undeclared(ds, ["spend"]) == ["visits"]
    assert resolve_nonnegative(["visits", "spend"], ds) == (["spend", "visits"], "declared")  # model order
    assert resolve_nonnegative(["all"][:0] or "none", ds) == ([], "declared: none")
    with pytest.raises(
        ValueError, match=r"channel 'temp' is declared non-negative, but its training rows go"
    ):
        resolve_nonnegative("all", ds)
    with pytest.raises(ValueError, match=r"\['price'\] are not channels"):
        resolve_nonnegative(["price"], ds)
