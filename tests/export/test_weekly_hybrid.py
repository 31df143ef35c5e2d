"""A hybrid on hours with a week in them (export/global_models/hybrid.py `long_periods`): the search tries
the members' weekly decomposition beside the daily one, keeps it where it validates better, and the
exported model serves it: the manifest's `panel.local.long_period`, /v1's forecast the numpy model's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from app.artifacts.repository import VersionRef, read_version
from app.core.config import Settings
from bench.harness.in_process import serve_in_process
from export.global_models.config import PanelConfig
from export.global_models.hybrid import local_key_parts
from export.global_models.onnx import export_global
from export.global_models.search import train_global

DAY, WEEK, H = 24, 168, 48


def shops(n: int = 6, weeks: int = 16) -> list[np.ndarray]:
    """Hourly sales: a daily shape on weekdays, a lower one at the weekend, a level and noise per shop."""
    rng = np.random.default_rng(7)
    t = np.arange(weeks * WEEK)
    day = np.sin(2 * np.pi * (t % DAY - 6) / DAY)
    weekend = (t % WEEK) >= 5 * DAY
    out = []
    for _ in range(n):
        level = rng.uniform(50, 500)
        shape = np.where(weekend, 0.6 + 0.1 * day, 1.0 + 0.3 * day)
        out.append(level * shape * (1 + 0.02 * rng.standard_normal(len(t))))
    return out


def test_few_series_with_a_week_take_it_in_their_fixed_local_half() -> None:
    """Fewer than ten series (export/global_models/hybrid.py `fixed_local`): the widest set on the day's
    longest window or the week's, whichever validates better: here the week."""
    from export.global_models.hybrid import candidate_sets

    cfg = PanelConfig(horizon=H, period=DAY, input_periods=2, lift=0)
    model = train_global(shops(6), cfg, frequency="1h", local=True)
    assert model.local is not None and model.local.long_period == WEEK
    assert model.local.members == max(candidate_sets(DAY), key=len)
    assert len([k for k in model.search if k.startswith("local_")]) == 2  # the day's and the week's


def test_a_panel_with_a_week_in_it_is_served_with_the_weekly_decomposition(tmp_path: Path) -> None:
    series = shops(10)  # ten series: searched (fewer take the fixed half above)
    cfg = PanelConfig(horizon=H, period=DAY, input_periods=2, lift=0)
    model = train_global(series, cfg, frequency="1h", local=True)
    local = model.local
    assert local is not None and local.long_period == WEEK
    scored = {local_key_parts(k): v for k, v in model.search.items() if k.startswith("local_")}
    week = {k: v for k, v in scored.items() if k[2] == WEEK and k[3] is None}
    day = [v for k, v in scored.items() if k[2] is None]
    assert week and day and min(week.values()) < min(day)
    # every shop shows the week: the week's window for them and the day's for none is the week for all
    splits = {k: v for k, v in scored.items() if k[3] is not None}
    assert splits and all(v == week[(*k[:3], None)] for k, v in splits.items())
    folder = export_global(model, tmp_path / "repo", "shops")
    manifest = read_version(VersionRef(model="shops", version=1, path=folder))
    assert manifest.panel is not None and manifest.panel.local_spec is not None
    assert manifest.panel.local_spec.long_period == WEEK
    assert "decomposed by 168 steps where a series holds 3 of them" in manifest.description
    assert manifest.input_length == local.length >= 3 * WEEK  # the window holds the weeks the members read
    histories = [v[-local.length - 2 * DAY : -2 * DAY] for v in series]  # ends on a Friday: the weekend next
    settings = Settings(model_repository=tmp_path / "repo", models=["shops"], device="cpu")
    with serve_in_process(settings) as client:
        body = {
            "series": [{"id": str(i), "values": h.tolist()} for i, h in enumerate(histories)],
            "horizon": H,
        }
        r = client.post("/v1/models/shops/forecast", json=body)
        # the inspection says which decomposition each series got: three weeks the week's, fewer the day's
        seasons = [
            client.post("/v1/models/shops/attention", json={"series": {"values": h.tolist()}}).json()[
                "hybrid"
            ]["season"]
            for h in (histories[0], histories[0][-(3 * WEEK - 1) :])
        ]
    assert seasons == [WEEK, DAY]
    assert r.status_code == 200, r.text
    served = np.array([np.asarray(f["forecast"])[:, 0] for f in r.json()["forecasts"]])
    np.testing.assert_allclose(served, model.forecast(histories), rtol=1e-4)
    by_day = replace(model, local=replace(local, long_period=None)).forecast(histories)
    assert np.abs(served - by_day).max() > 0.05 * np.abs(served).mean()  # the weekend is the week's
