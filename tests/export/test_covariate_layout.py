"""The covariate layout the trainer and the service share (app/artifacts/covariates.py): calendar columns
read in the model's zone, statics encoded or refused, the read-out matrix placing each block."""

from __future__ import annotations

import sys
import types
from datetime import date

import numpy as np
import pytest

from app.artifacts.covariates import CovariateLayout, StaticCovariate, calendar_columns, calendar_values


def stamps(*texts: str) -> np.ndarray:
    return np.array([np.datetime64(t, "ns") for t in texts])


def test_day_of_week_and_hour_follow_the_local_clock_across_daylight_saving() -> None:
    # 2023-03-26 01:30 UTC is 03:30 in Berlin (summer time began at 01:00 UTC), a Sunday
    cal = calendar_values(
        stamps("2023-03-26T01:30", "2023-03-25T23:30"), ("hour", "dayofweek"), "Europe/Berlin"
    )
    cols = list(calendar_columns(("hour", "dayofweek")))
    angle = 2 * np.pi * 3.5 / 24
    np.testing.assert_allclose(cal[0, :2], [np.sin(angle), np.cos(angle)], atol=1e-12)
    assert cal[0, cols.index("dayofweek_6")] == 1.0  # Sunday
    assert cal[1, cols.index("dayofweek_6")] == 1.0  # 00:30 local: Sunday too, though Saturday in UTC
    utc = calendar_values(stamps("2023-03-25T23:30"), ("dayofweek",))
    assert utc[0, 5] == 1.0  # Saturday in UTC


def test_holidays_come_from_the_holidays_package(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def country_holidays(country: str, years: list[int]) -> dict[date, str]:
        seen.update(country=country, years=years)
        if country != "AU":
            raise NotImplementedError(country)
        return {date(2014, 1, 1): "New Year's Day"}

    monkeypatch.setitem(sys.modules, "holidays", types.SimpleNamespace(country_holidays=country_holidays))
    flags = calendar_values(stamps("2014-01-01T12:00", "2014-01-02T12:00"), ("holiday",), None, "AU")
    assert flags[:, 0].tolist() == [1.0, 0.0] and seen == {"country": "AU", "years": [2014]}
    with pytest.raises(ValueError, match="no country 'XX'"):
        calendar_values(stamps("2014-01-01"), ("holiday",), None, "XX")
    with pytest.raises(ValueError, match="needs a country"):
        CovariateLayout(4, 2, calendar=("holiday",))


def test_holidays_from_the_installed_package() -> None:
    """The real `holidays` package (requirements/serve.txt): New Year's Day is a holiday in AU, 2 January
    is not, and days are read in the model's zone (23:30 UTC on 31 December is New Year's Day in
    Melbourne)."""
    flags = calendar_values(
        stamps("2014-01-01T12:00", "2014-01-02T12:00", "2013-12-31T23:30"),
        ("holiday",),
        "Australia/Melbourne",
        "AU",
    )
    assert flags[:, 0].tolist() == [1.0, 0.0, 1.0]


def test_statics_are_encoded_or_refused_with_the_reason() -> None:
    size = StaticCovariate("size", ("big", "small"))
    assert size.encode("small").tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="training categories"):
        size.encode("huge")
    with pytest.raises(ValueError, match="finite number"):
        StaticCovariate("area").encode("12")
    layout = CovariateLayout(4, 2, static=(StaticCovariate("area"), size))
    assert layout.encode_static({"area": 3.5, "size": "big"}).tolist() == [3.5, 1.0, 0.0]
    with pytest.raises(ValueError, match="'size' is missing"):
        layout.encode_static({"area": 1.0})


def test_readout_matrix_puts_the_past_through_the_kernels_and_the_rest_through_as_is() -> None:
    L, H = 3, 2
    layout = CovariateLayout(L, H, past=("a", "b"), future=("f",), static=(StaticCovariate("s"),))
    kernels = np.arange(2 * L, dtype=float).reshape(2, L)  # K = 2
    assert layout.width == L * 2 + H * 1 + 1
    m = layout.readout_matrix(kernels)
    past = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])  # [L, P], step-major in the row
    raw = np.concatenate([past.ravel(), [7.0, 8.0], [9.0]])
    got = raw @ m
    np.testing.assert_allclose(got[:2], kernels @ past[:, 0])
    np.testing.assert_allclose(got[2:4], kernels @ past[:, 1])
    np.testing.assert_allclose(got[4:], [7.0, 8.0, 9.0])
