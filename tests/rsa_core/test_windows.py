"""rsa_core.windows: a series' last L values right-aligned, the steps before a short series' start filled,
the same whether the series come as a list (`tail_windows`) or laid end to end (`right_aligned`)."""

from __future__ import annotations

import numpy as np

from rsa_core.windows import right_aligned, tail_windows


def test_a_short_series_is_right_aligned_after_its_fill_and_a_long_one_keeps_its_last_values() -> None:
    histories = [np.arange(1.0, 4.0), np.arange(10.0, 20.0), np.zeros(0)]
    got = tail_windows(histories, 5)
    np.testing.assert_array_equal(got[0], [np.nan, np.nan, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(got[1], [15.0, 16.0, 17.0, 18.0, 19.0])
    assert np.isnan(got[2]).all() and got.dtype == np.float64
    zeros = tail_windows(histories, 5, before=0.0, dtype=np.float32)
    assert zeros.dtype == np.float32 and zeros[0].tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]


def test_the_long_form_is_the_list_form() -> None:
    """Series laid end to end (the client's frames) give the windows of the same series as a list."""
    rng = np.random.default_rng(0)
    histories = [rng.normal(size=n) for n in (1, 7, 3, 12, 5)]
    ends = np.cumsum([len(h) for h in histories])
    begins = ends - [len(h) for h in histories]
    long = np.concatenate(histories)
    for before in (np.nan, 0.0):
        want = tail_windows(histories, 6, before=before, dtype=np.float32)
        got = right_aligned(long, begins, ends, 6, before)
        np.testing.assert_array_equal(got, want)
    channels = np.stack([long, 2 * long], axis=1)  # [N, C] rows: windows [S, L, C]
    got = right_aligned(channels, begins, ends, 6, np.nan)
    assert got.shape == (5, 6, 2)
    np.testing.assert_array_equal(got[:, :, 1], 2 * right_aligned(long, begins, ends, 6, np.nan))
