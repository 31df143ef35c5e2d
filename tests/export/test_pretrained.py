"""export.pretrained (issue 47): the shipped pretrained models are what `SPECS` describes (one version each,
the frequency it answers, its sources' series counts, origin and licence, the current interval rule), and
`build` publishes the next version of a spec with that record; an unknown `--only` is refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from export.pretrained import SPECS, PretrainedSpec, Source, build, cli
from tests.utils.panel import store

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "model_repository"


def shipped_manifest(spec: PretrainedSpec) -> dict:
    return json.loads((SHIPPED / spec.name / "1" / "manifest.json").read_text())


@pytest.mark.parametrize("frequency", list(SPECS))
def test_the_shipped_model_is_its_spec(frequency: str) -> None:
    """One version per pretrained model (the client and /v1/forecast tests read version 1), its manifest
    naming the frequency it answers, each source as `SPECS` records it with the series count the
    installed data holds, and its graph the file the manifest's sha256 names."""
    spec = SPECS[frequency]
    folder = SHIPPED / spec.name
    assert sorted(p.name for p in folder.iterdir()) == ["1"]
    m = shipped_manifest(spec)
    assert m["name"] == spec.name and m["horizon"] == spec.horizon and m["frequency"] == spec.alias
    assert m["panel"]["period"] == spec.period
    if spec.min_history is not None:
        assert m["panel"]["min_history"] == spec.min_history
    assert m["dataset"]["pretrained"] == {"frequency": spec.frequency, "alias": spec.alias}
    counts = [len(src.load()) for src in spec.sources]
    assert m["dataset"]["sources"] == [src.record(n) for src, n in zip(spec.sources, counts, strict=True)]
    for name, info in m["files"].items():
        data = (folder / "1" / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == info["sha256"] and len(data) == info["bytes"]


@pytest.mark.parametrize("frequency", ["monthly", "quarterly", "yearly"])
def test_the_shipped_widths_are_plain_split_conformal_and_no_level_collapses(frequency: str) -> None:
    """The shipped widths are the split-conformal quantiles of one calibration window per training series,
    with no drift correction (bench/drift_backtest.py; docs/artifacts.md). At every step each level's width
    is strictly above the level below's: a build whose 99% drift factor was the noise of 11 windows (0.27)
    had made pretrained-yearly's 99% interval its 95% one."""
    intervals = shipped_manifest(SPECS[frequency])["intervals"]
    cal = intervals["calibration"]
    assert cal["rule"] == "split_conformal" and cal.get("drift") is None
    assert cal["windows"] == cal["series"] > 1000
    widths = np.asarray(intervals["widths"])[:, :, 0]
    assert (np.diff(widths, axis=0) > 0).all()


@pytest.mark.slow  # trains two small hybrids (4 s on the loaded 2-core machine)
def test_build_publishes_the_next_version_with_its_dataset_record(tmp_path: Path) -> None:
    """`build` trains the spec's model on its sources and publishes version 1, then 2: the manifest's
    dataset block names the frequency and each source's count, origin and licence."""
    made_up = Source(
        name="stores",
        origin="tests.utils.panel.store (made up)",
        licence="none: generated",
        used="each series whole",
        load=lambda: [store(i, 40 - (i % 3)) for i in range(8)],
    )
    spec = PretrainedSpec("monthly", "1MS", 12, 4, (made_up,), min_history=24)
    said: list[str] = []
    first = build(spec, tmp_path, said.append)
    second = build(spec, tmp_path, said.append)
    assert (first.name, second.name) == ("1", "2")
    m = json.loads((second / "manifest.json").read_text())
    assert m["name"] == "pretrained-monthly" and m["horizon"] == 4
    assert m["dataset"]["pretrained"] == {"frequency": "monthly", "alias": "1MS"}
    assert m["dataset"]["sources"] == [made_up.record(8)]
    assert len(said) == 2 and "pretrained-monthly version 2: 8 series (stores)" in said[1]
    assert m["panel"]["min_history"] == 24


def test_an_unknown_frequency_is_refused_naming_the_option(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["build", "--only", "other", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "--only" in r.output and "'other'" in r.output and "monthly" in r.output
    assert not any(tmp_path.iterdir())  # nothing built


@pytest.mark.parametrize("frequency", ["monthly", "quarterly", "yearly"])
def test_the_shipped_models_forecast_a_series_below_zero_as_the_mirror_of_one_above(frequency: str) -> None:
    """M3 and Tourism hold no value below zero, so the shipped models read a window below zero mirrored
    (the manifest's `readout.mirror`): served, a series at -50 +- 1 is forecast near -50 and as minus the
    forecast of its mirror image (before: 11.1, -36.2, -57.8, -61.4 from the quarterly model). A seasonal
    one too: the local half's season is its mirror image's (app/artifacts/local_models.py; before, the
    monthly model forecast 50 + 10·sin(2πt/12) + noise and its mirror image up to 8.5 apart)."""
    from tests.app.conftest import make_settings, running_client

    spec = SPECS[frequency]
    assert shipped_manifest(spec)["readout"]["mirror"] is True
    n = 5 * spec.horizon * max(spec.period, 2)
    rng = np.random.default_rng(0)
    values = -50.0 + rng.normal(0.0, 1.0, n)
    t = np.arange(n)
    seasonal = -50.0 - 10 * np.sin(2 * np.pi * t / max(spec.period, 2)) - 0.1 * t + rng.normal(0, 2, n)
    settings = make_settings(SHIPPED, models=[spec.name])
    with running_client(settings) as client:
        got = []
        for series in (values, -values, seasonal, -seasonal):
            body = {"series": [{"values": series.tolist()}]}
            r = client.post(f"/v1/models/{spec.name}/forecast", json=body)
            assert r.status_code == 200, r.text
            got.append(np.asarray(r.json()["forecasts"][0]["forecast"])[:, 0])
    below, above, seasonal_below, seasonal_above = got
    assert np.abs(below + 50.0).max() < 2.0, below
    np.testing.assert_allclose(below, -above, atol=1e-3)
    np.testing.assert_allclose(seasonal_below, -seasonal_above, atol=1e-3)


def test_a_short_seasonal_history_gets_the_read_out_alone_where_validation_chose_it() -> None:
    """The shipped quarterly model's `min_values` was chosen on validation histories cut to 2-3.5 cycles
    (export/global_models/hybrid.py `short_min_values`): 16 quarters. Ten quarters of a clear cycle had been
    forecast nearly flat (108.4, 110.8, 114.0, 120.4 against 88.0, 99.9, 112.0, 146.9) by members whose
    seasonal test cannot pass on so few values, and a quarter of such series' normal values were flagged
    at 99% by `detect_anomalies`; served now by the read-out alone, which says so."""
    from tests.app.conftest import make_settings, running_client

    spec = SPECS["quarterly"]
    m = shipped_manifest(spec)
    search = m["architecture"]["search"]
    assert m["panel"]["local"]["min_values"] == 16
    assert all(search[f"short_{n}"] > search[f"short_{n}_readout"] for n in (8, 10, 12))  # alone better
    full = 100 * np.tile([1.0, 1.3, 0.8, 0.9], 4) * (1 + 0.01 * np.arange(16))
    with running_client(make_settings(SHIPPED, models=[spec.name])) as client:
        body = {"series": [{"values": full[:10].tolist()}], "horizon": 4}
        r = client.post(f"/v1/models/{spec.name}/forecast", json=body)
    assert r.status_code == 200, r.text
    (answer,) = r.json()["forecasts"]
    assert "read-out alone" in answer["local_models"] and "need 16" in answer["local_models"]
    got = np.asarray(answer["forecast"])[:, 0]
    np.testing.assert_allclose(got, full[10:14], rtol=0.1)
