"""Tests for models/attention.py: the RSA head of rsa.md §3,

RSA_h(X) = [ (1 − σ(μ)) · softmax(Q_h K_hᵀ / √d_k + mask) + σ(μ) · P_h ] · V_h
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from models.attention import RSAAttention
from models.rem import build_rem

D_MODEL = 16
MIXED_TYPES = [("regular", 1), ("cyclic_cos", 1), ("softmax", 1), ("regular", 2)]
ALL_REM_TYPES = [("regular", 1), ("cyclic_cos", 2), ("cyclic_sin", 1), ("regular", 3)]
SOFTMAX_TYPES = [("softmax", 1)] * 4


def make_attn(head_types=MIXED_TYPES, masked=False, gate="layer", seed=0, **kw) -> RSAAttention:
    torch.manual_seed(seed)
    attn = RSAAttention(D_MODEL, head_types, masked=masked, gate=gate, **kw).double().eval()
    return attn


def split_heads(attn: RSAAttention, x: torch.Tensor):
    """q, k, v [B, H, T, hd] from the module's own qkv projection."""
    B, T, D = x.shape
    q, k, v = attn.qkv(x).split(D, dim=2)
    return tuple(t.view(B, T, attn.n_heads, attn.head_dim).transpose(1, 2) for t in (q, k, v))


def merge_heads(attn: RSAAttention, y: torch.Tensor) -> torch.Tensor:
    B, H, T, hd = y.shape
    return attn.proj(y.transpose(1, 2).reshape(B, T, H * hd))


def reference_mha(attn: RSAAttention, x: torch.Tensor) -> torch.Tensor:
    q, k, v = split_heads(attn, x)
    return merge_heads(attn, F.scaled_dot_product_attention(q, k, v, is_causal=attn.masked))


def run(attn: RSAAttention, x: torch.Tensor, path: str) -> torch.Tensor:
    """Forward through one of the module's paths: fused, explicit, return_attn or folded."""
    attn.unfold()
    attn.fused = path == "fused"
    if path == "folded":
        attn.fold(x.shape[1])
    y, maps = attn(x, return_attn=path == "return_attn")
    assert (maps is not None) == (path == "return_attn")
    attn.unfold()
    attn.fused = True
    return y


PATHS = ["fused", "explicit", "return_attn", "folded"]


def x_input(batch=3, length=10, seed=100) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, length, D_MODEL, generator=g, dtype=torch.float64)


# -- limits of the gate ---------------------------------------------------------------------------------
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("gate", ["layer", "head"])
@pytest.mark.parametrize("path", PATHS)
def test_gate_zero_is_plain_attention(masked, gate, path):
    attn = make_attn(masked=masked, gate=gate)
    with torch.no_grad():
        attn.mu.fill_(-1e4)
    assert (attn.gates() == 0).all()
    x = x_input()
    with torch.no_grad():
        torch.testing.assert_close(run(attn, x, path), reference_mha(attn, x), atol=1e-6, rtol=0)


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("path", PATHS)
def test_gate_one_is_rem_times_v(masked, path):
    attn = make_attn(ALL_REM_TYPES, masked=masked)
    with torch.no_grad():
        attn.mu.fill_(1e4)
    assert (attn.gates() == 1).all()
    x = x_input(length=12)
    T = x.shape[1]
    with torch.no_grad():
        _, _, v = split_heads(attn, x)
        values = attn.rem.values()
        P = []
        for (kind, d), vals in zip(ALL_REM_TYPES, values, strict=True):
            params = (
                {"lam": vals["lambda"]}
                if kind == "regular"
                else {"gamma": vals["gamma"], "theta": vals["theta"]}
            )
            P.append(build_rem(kind, T, **params, dilation=d, masked=masked))
        ref = merge_heads(attn, torch.stack(P) @ v)
        torch.testing.assert_close(run(attn, x, path), ref, atol=1e-6, rtol=0)


# -- the paths agree -----------------------------------------------------------------------------------
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("gate", ["layer", "head"])
@pytest.mark.parametrize(
    "head_types", [MIXED_TYPES, ALL_REM_TYPES, SOFTMAX_TYPES], ids=["mixed", "rem", "mha"]
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_fused_explicit_and_folded_paths_agree(masked, gate, head_types, dtype):
    attn = make_attn(head_types, masked=masked, gate=gate, seed=3).to(dtype)
    if attn.has_rem:
        with torch.no_grad():
            attn.mu.uniform_(-3.0, 3.0)
    x = x_input(length=14).to(dtype)
    with torch.no_grad():
        outs = {path: run(attn, x, path) for path in PATHS}
    for path in PATHS[1:]:
        torch.testing.assert_close(outs[path], outs["fused"], atol=1e-6, rtol=0, msg=path)


def test_fold_and_unfold():
    attn = make_attn()
    x = x_input(length=9)
    attn.fold(9)
    assert attn.folded_length == 9
    with torch.no_grad():
        g = attn.gates()
        torch.testing.assert_close(attn.softmax_scale.flatten(), 1 - g)
        torch.testing.assert_close(attn.rem_scaled, g[:, None, None] * attn.rem(9))
        attn(x)
    with pytest.raises(ValueError):
        attn(x_input(length=8))
    attn.unfold()
    assert attn.folded_length is None and not hasattr(attn, "rem_scaled")
    attn(x_input(length=8))


def test_folded_kernels_are_constants():
    attn = make_attn()
    attn.fold(6)
    assert not attn.rem_scaled.requires_grad and not attn.softmax_scale.requires_grad


# -- returned matrices ---------------------------------------------------------------------------------
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("gate", ["layer", "head"])
def test_return_attn_maps(masked, gate):
    attn = make_attn(masked=masked, gate=gate, seed=5)
    with torch.no_grad():
        attn.mu.uniform_(-2.0, 2.0)
    x = x_input(batch=2, length=11)
    B, T = x.shape[:2]
    H = attn.n_heads
    with torch.no_grad():
        _, maps = attn(x, return_attn=True)
        assert set(maps) == {"softmax", "rem", "mixed"}
        sm, rem, mixed = maps["softmax"], maps["rem"], maps["mixed"]
        assert sm.shape == (B, H, T, T) and mixed.shape == (B, H, T, T) and rem.shape == (H, T, T)
        torch.testing.assert_close(sm.sum(-1), torch.ones(B, H, T, dtype=sm.dtype))
        assert (sm >= 0).all()
        if masked:
            assert (sm.triu(1) == 0).all()
        torch.testing.assert_close(rem, attn.rem(T), atol=0, rtol=0)
        g = attn.gates()
        assert g.shape == (H,)
        is_rem = torch.tensor([k != "softmax" for k, _ in MIXED_TYPES])
        assert (g[~is_rem] == 0).all()
        mu = attn.mu.expand(H) if gate == "layer" else attn.mu
        torch.testing.assert_close(g[is_rem], torch.sigmoid(mu)[is_rem])
        gg = g[:, None, None]
        torch.testing.assert_close(mixed, (1 - gg) * sm + gg * rem, atol=1e-12, rtol=0)
        # the mixed matrix is the one that multiplies V
        _, _, v = split_heads(attn, x)
        torch.testing.assert_close(attn(x)[0], merge_heads(attn, mixed @ v), atol=1e-10, rtol=0)


def test_per_head_gate_has_one_mu_per_head():
    attn = make_attn(gate="head")
    assert attn.mu.shape == (len(MIXED_TYPES),)
    with torch.no_grad():
        attn.mu.copy_(torch.tensor([-1.0, 0.5, 2.0, 1.5], dtype=torch.float64))
    g = attn.gates()
    expected = torch.sigmoid(torch.tensor([-1.0, 0.5, 0.0, 1.5], dtype=torch.float64))
    expected[2] = 0.0  # the softmax head
    torch.testing.assert_close(g, expected)
    assert make_attn(gate="layer").mu.shape == (1,)
    with pytest.raises(ValueError):
        make_attn(gate="bogus")


def test_mu_init():
    attn = make_attn(mu_init=-1.5)
    assert attn.mu.item() == -1.5
    torch.testing.assert_close(attn.gates()[0], torch.sigmoid(torch.tensor(-1.5, dtype=torch.float64)))


# -- zero REM heads is standard multi-head attention ---------------------------------------------------
@pytest.mark.parametrize("masked", [True, False])
def test_zero_rem_heads_is_standard_mha(masked):
    attn = make_attn(SOFTMAX_TYPES, masked=masked)
    assert not attn.has_rem
    names = {n for n, _ in attn.named_parameters()}
    assert names == {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}
    assert not hasattr(attn, "mu") and not hasattr(attn, "rem")
    assert (attn.gates() == 0).all()
    x = x_input()
    with torch.no_grad():
        for path in PATHS:
            torch.testing.assert_close(run(attn, x, path), reference_mha(attn, x), atol=1e-6, rtol=0)
        _, maps = attn(x, return_attn=True)
        assert (maps["rem"] == 0).all()
        assert torch.equal(maps["mixed"], maps["softmax"])
    report = attn.head_report()
    assert [r["kind"] for r in report] == ["softmax"] * 4 and all(r["gate"] == 0 for r in report)


def test_matches_torch_multihead_attention():
    """Independent check of the plain path against nn.MultiheadAttention with the same weights."""
    attn = make_attn(SOFTMAX_TYPES, masked=True)
    mha = torch.nn.MultiheadAttention(D_MODEL, 4, batch_first=True).double().eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(attn.qkv.weight)
        mha.in_proj_bias.copy_(attn.qkv.bias)
        mha.out_proj.weight.copy_(attn.proj.weight)
        mha.out_proj.bias.copy_(attn.proj.bias)
        x = x_input(length=7)
        mask = torch.ones(7, 7, dtype=torch.bool).triu(1)
        ref, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
        attn.fused = False
        torch.testing.assert_close(attn(x)[0], ref, atol=1e-10, rtol=0)


# -- causality and batch independence -------------------------------------------------------------------
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("head_types", [MIXED_TYPES, ALL_REM_TYPES], ids=["mixed", "rem"])
def test_masked_layout_is_causal(path, head_types):
    attn = make_attn(head_types, masked=True, seed=7)
    x = x_input(batch=2, length=12)
    t0 = 7
    x2 = x.clone()
    x2[:, t0:] += torch.randn_like(x2[:, t0:])
    with torch.no_grad():
        y1, y2 = run(attn, x, path), run(attn, x2, path)
    torch.testing.assert_close(y1[:, :t0], y2[:, :t0], atol=1e-12, rtol=0)
    assert not torch.allclose(y1[:, t0:], y2[:, t0:])


def test_unmasked_layout_sees_the_future():
    attn = make_attn(masked=False)
    x = x_input(batch=1, length=8)
    x2 = x.clone()
    x2[:, -1] += 1.0
    with torch.no_grad():
        assert not torch.allclose(attn(x)[0][:, 0], attn(x2)[0][:, 0])


@pytest.mark.parametrize("path", PATHS)
def test_batch_independence(path):
    attn = make_attn(seed=8)
    x = x_input(batch=4, length=10)
    with torch.no_grad():
        alone = run(attn, x[:1], path)
        batched = run(attn, x, path)
    torch.testing.assert_close(alone[0], batched[0], atol=1e-10, rtol=0)


# -- gradients and reports ------------------------------------------------------------------------------
@pytest.mark.parametrize("fused", [True, False])
def test_gradients_reach_rem_parameters(fused):
    attn = make_attn(ALL_REM_TYPES + [("cyclic_sin", 2), ("softmax", 1)] * 2, seed=9).train()
    attn.fused = fused
    x = x_input(batch=2, length=10)
    y, _ = attn(x)
    (y**2).mean().backward()
    for name, p in attn.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert (p.grad != 0).any(), name
        if name.startswith("rem.") or name == "mu":
            assert (p.grad != 0).all(), name


def test_head_report():
    attn = make_attn(gate="head")
    report = attn.head_report()
    assert [(r["kind"], r["dilation"]) for r in report] == MIXED_TYPES
    assert [r["head"] for r in report] == [0, 1, 2, 3]
    values = attn.rem.values()
    gates = attn.gates().tolist()
    for h, r in enumerate(report):
        assert r["gate"] == pytest.approx(gates[h])
        for key in ("lambda", "gamma", "theta"):
            assert r[key] == values[h][key]
    assert report[0]["lambda"] is not None and report[1]["gamma"] is not None and report[2]["lambda"] is None


def test_d_model_must_divide_heads():
    with pytest.raises(ValueError):
        RSAAttention(10, MIXED_TYPES)


# -- the last-step read-out (rsa.md §7) ---------------------------------------------------------------
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("head_types", [MIXED_TYPES, SOFTMAX_TYPES])
def test_forward_last_is_the_last_row_of_forward(head_types, masked):
    attn = make_attn(head_types, masked=masked)
    x = torch.randn(3, 29, D_MODEL, dtype=torch.float64)
    full, maps = attn(x, return_attn=True)
    last, rows = attn.forward_last(x, return_attn=True)
    torch.testing.assert_close(last, full[:, -1])
    for name in ("softmax", "mixed"):
        torch.testing.assert_close(rows[name], maps[name][:, :, -1])
    torch.testing.assert_close(rows["rem"], maps["rem"][:, -1])


def test_forward_last_folded_matches_unfolded_and_refuses_another_length():
    attn = make_attn(ALL_REM_TYPES, masked=True, gate="head", mu_init=2.0)
    x = torch.randn(2, 17, D_MODEL, dtype=torch.float64)
    want, _ = attn.forward_last(x)
    attn.fold(17, last_row=True)
    assert attn.rem_scaled.shape == (4, 17) and attn.softmax_scale.shape == (4, 1)
    got, _ = attn.forward_last(x)
    torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="folded for length 17"):
        attn.forward_last(torch.randn(2, 18, D_MODEL, dtype=torch.float64))


def test_rem_init_sets_each_heads_starting_values():
    # ALL_REM_TYPES: regular, cyclic_cos (dilation 2), cyclic_sin, regular (dilation 3)
    init = [(0.995, 0.0), (0.9, 0.3), (0.8, 0.5), (-0.7, 0.0)]
    values = make_attn(ALL_REM_TYPES, rem_init=init).rem.values()
    assert values[0]["lambda"] == pytest.approx(0.995, abs=1e-6)
    assert (values[1]["gamma"], values[1]["theta"]) == pytest.approx((0.9, 0.3), abs=1e-6)
    assert (values[2]["gamma"], values[2]["theta"]) == pytest.approx((0.8, 0.5), abs=1e-6)
    assert values[3]["lambda"] == pytest.approx(-0.7, abs=1e-6)
