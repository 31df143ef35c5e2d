"""The attention PNG's colour scales, labels and gate legend, and the documented example request."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from app.protocols.rsa_v1.plotting import colour_scale, gate_legend, head_label
from app.protocols.rsa_v1.schemas import HeadAttention, LayerAttention
from tests.app.conftest import make_settings, running_client

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "docs" / "examples" / "attention_request.json"
SAMPLE = ROOT / "docs" / "images" / "attention-etth1-rsa-v5.png"


def test_softmax_weights_near_one_over_l_get_a_sequential_scale_over_their_own_spread() -> None:
    """512 weights near 1/512: a scale at the panel's 1st-99th percentiles, not ±max around 0."""
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.full(512, 200.0), size=36)  # every weight close to 1/512
    cmap, low, high = colour_scale(weights)
    assert cmap == "viridis"
    assert (low, high) == pytest.approx(tuple(np.percentile(weights, [1, 99])))
    assert 0 < low < 1 / 512 < high < 2 / 512


def test_one_saturated_weight_does_not_black_out_the_rest() -> None:
    """A full-attention panel with a causal mask: the first query's weight is 1.0, the upper triangle 0."""
    L = 96
    rng = np.random.default_rng(1)
    panel = np.tril(rng.uniform(0.005, 0.05, (L, L)))
    panel[0, 0] = 1.0
    cmap, low, high = colour_scale(panel)
    assert cmap == "viridis" and high < 0.06 and low >= 0.005  # the mask's zeros and the 1.0 left out


def test_signed_weights_get_a_symmetric_diverging_scale() -> None:
    rem = np.array([[0.9, -0.8, 0.5, -0.1, 0.0] * 40])
    cmap, low, high = colour_scale(rem)
    assert cmap == "RdBu_r" and low == -high and high == pytest.approx(np.percentile(np.abs(rem), 99))
    assert colour_scale(np.full((2, 8), 1 / 8))[1:] != (1 / 8, 1 / 8)  # never an empty range


def _layer(gates: list[float]) -> LayerAttention:
    heads = [
        HeadAttention(head=i, kind="cyclic_cos", dilation=24 if i else 1, gamma=0.995, theta=0.2618, gate=g)
        for i, g in enumerate(gates)
    ]
    return LayerAttention(layer=0, heads=heads)


def test_one_gate_legend_when_every_head_shares_its_gate() -> None:
    shared = _layer([0.953] * 3)
    assert gate_legend([shared]) == (
        "layer 0: gate g = 0.953 on every REM head, so mixed = 0.047·softmax + 0.953·REM: "
        "mixed looks like REM"
    )
    assert head_label(shared.heads[1], with_gate=False) == "1 cos/24 γ=0.995 θ=0.262"
    mixed = _layer([0.2, 0.9])
    assert gate_legend([mixed]) == "layer 0: gate g per head (in its label)"
    assert head_label(mixed.heads[0], with_gate=True) == "0 cos γ=0.995 θ=0.262 g=0.2"


def test_the_documented_attention_request_renders_the_sample_png() -> None:
    """docs/examples/attention_request.json against the shipped model, as the README's curl sends it:
    a PNG of the sample's size, 30 px a head (8-point labels fit). RSA_DOCS_IMAGES=docs/images writes the
    sample again (a 256-colour palette keeps it small)."""
    from PIL import Image

    body = json.loads(EXAMPLE.read_text())
    with running_client(make_settings(ROOT / "model_repository")) as client:
        r = client.post("/v1/models/etth1-rsa/attention", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(r.content))
    out = os.environ.get("RSA_DOCS_IMAGES")
    if out:
        image.convert("RGB").quantize(colors=256).save(Path(out) / SAMPLE.name, optimize=True)
    assert image.size == Image.open(SAMPLE).size == (1680, 2850)
