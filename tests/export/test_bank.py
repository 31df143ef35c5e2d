"""The compact REM-bank spec of the training config, expanded into heads."""

from __future__ import annotations

import math

import pytest

from export.bank import expand_bank
from models import ModelConfig


def test_expand_bank_orders_heads_by_kind_and_follows_the_period():
    rows = expand_bank(
        {
            "regular": [0.9, -0.5],
            "cyclic": {"harmonics": [1, 2], "gamma": [0.97]},
            "dilated": {"lambda": [0.8]},
        },
        period=24,
    )
    assert [r[:2] for r in rows] == [
        ["regular", 1],
        ["regular", 1],
        ["cyclic_cos", 1],
        ["cyclic_cos", 1],
        ["cyclic_sin", 1],
        ["cyclic_sin", 1],
        ["regular", 24],
    ]
    assert rows[3][3] == pytest.approx(2 * math.pi * 2 / 24) and rows[3][2] == 0.97
    cfg = ModelConfig.from_dict({"d_model": 7, "n_heads": 7, "rem_heads": [0] * 6, "rem_bank": rows})
    assert cfg.head_types[-1] == ("regular", 24)
    assert expand_bank({"dilated": {"lambda": [0.5], "dilation": 7}}, period=0) == [["regular", 7, 0.5, 0.0]]


def test_the_nyquist_harmonic_has_a_cosine_head_only():
    """At k = period / 2 (θ = π) γ^t·sin(tπ) is identically zero: the bank leaves that sine head out."""
    rows = expand_bank({"cyclic": {"harmonics": [1, 12], "gamma": [0.9, 0.97]}}, period=24)
    assert [(r[0], round(r[3] * 24 / (2 * math.pi))) for r in rows] == [
        ("cyclic_cos", 1),
        ("cyclic_cos", 1),
        ("cyclic_cos", 12),
        ("cyclic_cos", 12),
        ("cyclic_sin", 1),
        ("cyclic_sin", 1),
    ]
    assert len(expand_bank({"cyclic": {"harmonics": [12], "gamma": [0.9]}}, period=25)) == 2


@pytest.mark.parametrize(
    "spec, period, match",
    [
        ({"cyclic": {"harmonics": [1], "gamma": [0.9]}}, 0, "seasonal period"),
        ({"dilated": {"lambda": [0.5]}}, 1, "seasonal period"),
        ({"spiral": [0.5]}, 24, "keys"),
        ("regular", 24, "mapping"),
    ],
)
def test_expand_bank_refuses_what_it_cannot_place(spec, period, match):
    with pytest.raises(ValueError, match=match):
        expand_bank(spec, period)
