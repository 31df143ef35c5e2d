"""forecast.png's bands: the split-conformal widths of the validation residuals, none from too few."""

from __future__ import annotations

import numpy as np
import torch

from export.conformal import conformal_quantile
from export.data import load_dataset
from export.evaluate import predict
from export.plots import band_widths, plot_forecasts
from models import ModelConfig, RSAForecaster
from tests.utils.data import ettd_slice


def test_bands_are_the_conformal_widths_of_the_validation_residuals(tmp_path) -> None:
    torch.manual_seed(0)
    ds = load_dataset(ettd_slice(tmp_path / "slice.csv", rows=1200), 24, 12)
    model = RSAForecaster(ModelConfig(input_length=24, horizon=12, channels=7, d_model=8, n_heads=4, d_ff=16))
    widths = band_widths(model.eval(), ds.val, channel=6)
    with torch.no_grad():
        pred, y = predict(model, ds.val, torch.arange(ds.val.num_windows))
    scores = (pred - y)[:, :, 6].abs().numpy().astype(np.float64)
    assert set(widths) == {95, 80} and ds.val.num_windows == 109
    for level, w in widths.items():
        np.testing.assert_allclose(w, conformal_quantile(scores, level / 100))
    plot_forecasts(model, ds, tmp_path / "forecast.png", n_windows=2, title="t")
    assert (tmp_path / "forecast.png").read_bytes().startswith(b"\x89PNG")
    short = load_dataset(ettd_slice(tmp_path / "short.csv", rows=200), 24, 12)  # 9 validation windows
    assert band_widths(model, short.val, channel=6) == {}
