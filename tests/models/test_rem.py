"""Tests for models/rem.py: the Recurrence Encoding Matrices of rsa.md §1–2.

The central property: P @ v is the hidden-state sequence of the linear recurrence the REM encodes,
checked against a plain Python loop of that recurrence (not against the same sum).
"""

from __future__ import annotations

import cmath
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.rem import (
    REM_KINDS,
    CyclicCosREM,
    CyclicSinREM,
    RegularREM,
    REMBank,
    build_rem,
    lag_lattice,
    lag_row,
)

KINDS = ("regular", "cyclic_cos", "cyclic_sin")


# -- references: genuine recurrences ------------------------------------------------------------------
def _step(kind: str, lam: float, gamma: float, theta: float) -> complex:
    """The multiplier of one recurrence step: λ (real) or w = γ e^{iθ} (complex)."""
    return complex(lam) if kind == "regular" else gamma * cmath.exp(1j * theta)


def _read(kind: str, z: complex) -> float:
    """cos REM ↔ Re z, sin REM ↔ Im z; a regular state is real."""
    return z.imag if kind == "cyclic_sin" else z.real


def causal_recurrence(kind, v, d, lam=0.0, gamma=0.0, theta=0.0) -> list[float]:
    """s_i = w·(s_{i−d} + v_{i−d}) for i ≥ d, s_i = 0 for i < d: one state per residue class mod d."""
    w = _step(kind, lam, gamma, theta)
    T = len(v)
    s = [0j] * T
    for i in range(d, T):
        s[i] = w * (s[i - d] + v[i - d])
    return [_read(kind, z) for z in s]


def anticausal_recurrence(kind, v, d, lam=0.0, gamma=0.0, theta=0.0) -> list[float]:
    """The same recurrence run backwards in time: r_i = w·(r_{i+d} + v_{i+d}), r_i = 0 for i ≥ T − d."""
    w = _step(kind, lam, gamma, theta)
    T = len(v)
    r = [0j] * T
    for i in range(T - d - 1, -1, -1):
        r[i] = w * (r[i + d] + v[i + d])
    return [_read(kind, z) for z in r]


def recurrence(kind, v, d, masked, **params) -> list[float]:
    out = causal_recurrence(kind, v, d, **params)
    if not masked:  # P_unmasked = P_masked + P_maskedᵀ: causal plus anti-causal
        back = anticausal_recurrence(kind, v, d, **params)
        out = [a + b for a, b in zip(out, back, strict=True)]
    return out


def direct_rem(kind, length, d, masked, lam=0.0, gamma=0.0, theta=0.0) -> list[list[float]]:
    """P_ij from its definition (rsa.md §2), one entry at a time, with integer powers."""
    P = [[0.0] * length for _ in range(length)]
    for i in range(length):
        for j in range(length):
            lag = i - j
            if lag == 0 or lag % d != 0 or (masked and lag < 0):
                continue
            t = abs(lag) // d
            if kind == "regular":
                P[i][j] = lam**t
            elif kind == "cyclic_cos":
                P[i][j] = gamma**t * math.cos(t * theta)
            else:
                P[i][j] = gamma**t * math.sin(t * theta)
    return P


def _params(kind: str, lam: float, gamma: float, theta: float) -> dict[str, float]:
    return {"lam": lam} if kind == "regular" else {"gamma": gamma, "theta": theta}


# -- the recurrence property ------------------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    masked=st.booleans(),
    dilation=st.integers(1, 4),
    lam=st.floats(-0.99, 0.99),
    gamma=st.floats(0.05, 0.99),
    theta=st.floats(-math.pi, math.pi),
    data=st.data(),
)
def test_rem_times_v_equals_the_recurrence(kind, masked, dilation, lam, gamma, theta, data):
    T = data.draw(st.integers(1, 40), label="T")
    v = data.draw(st.lists(st.floats(-10.0, 10.0), min_size=T, max_size=T), label="v")
    params = _params(kind, lam, gamma, theta)
    P = build_rem(kind, T, **params, dilation=dilation, masked=masked, dtype=torch.float64)
    assert P.shape == (T, T) and P.dtype == torch.float64
    out = P @ torch.tensor(v, dtype=torch.float64)
    ref = torch.tensor(recurrence(kind, v, dilation, masked, **params), dtype=torch.float64)
    torch.testing.assert_close(out, ref, atol=1e-9, rtol=0)


@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    masked=st.booleans(),
    dilation=st.integers(1, 4),
    length=st.integers(1, 24),
    lam=st.floats(-0.99, 0.99),
    gamma=st.floats(0.05, 0.99),
    theta=st.floats(-math.pi, math.pi),
)
def test_rem_equals_its_entrywise_definition(kind, masked, dilation, length, lam, gamma, theta):
    params = _params(kind, lam, gamma, theta)
    P = build_rem(kind, length, **params, dilation=dilation, masked=masked, dtype=torch.float64)
    ref = torch.tensor(direct_rem(kind, length, dilation, masked, **params), dtype=torch.float64)
    torch.testing.assert_close(P, ref, atol=1e-12, rtol=0)


def test_rem_matches_double_loop_and_recurrence_for_one_v():
    """One fixed case, checked three ways: matrix, entrywise definition, recurrence."""
    torch.manual_seed(0)
    T, d = 17, 3
    v = torch.randn(T, dtype=torch.float64)
    for kind, params in (("regular", {"lam": -0.7}), ("cyclic_sin", {"gamma": 0.9, "theta": 2.0})):
        for masked in (True, False):
            P = build_rem(kind, T, **params, dilation=d, masked=masked)
            ref_P = torch.tensor(direct_rem(kind, T, d, masked, **params), dtype=torch.float64)
            torch.testing.assert_close(P, ref_P, atol=1e-12, rtol=0)
            ref_v = torch.tensor(recurrence(kind, v.tolist(), d, masked, **params), dtype=torch.float64)
            torch.testing.assert_close(P @ v, ref_v, atol=1e-12, rtol=0)
            torch.testing.assert_close(ref_P @ v, ref_v, atol=1e-12, rtol=0)


def test_regular_rem_spot_values():
    P = build_rem("regular", 5, lam=0.5, masked=True)
    assert P[1, 0] == 0.5 and P[4, 0] == 0.5**4 and P[3, 1] == 0.25
    P = build_rem("regular", 7, lam=-0.5, dilation=2, masked=False)
    assert P[4, 0] == 0.25 and P[0, 6] == -0.125 and P[3, 0] == 0 and P[6, 5] == 0


def test_cyclic_cos_and_sin_are_real_and_imaginary_parts():
    T, gamma, theta = 12, 0.8, 0.9
    cos = build_rem("cyclic_cos", T, gamma=gamma, theta=theta, masked=True)
    sin = build_rem("cyclic_sin", T, gamma=gamma, theta=theta, masked=True)
    w = gamma * cmath.exp(1j * theta)
    for i in range(T):
        for j in range(i):
            assert cos[i, j].item() == pytest.approx((w ** (i - j)).real, abs=1e-12)
            assert sin[i, j].item() == pytest.approx((w ** (i - j)).imag, abs=1e-12)


# -- structure ------------------------------------------------------------------------------------------
STRUCT_PARAMS = {"lam": -0.8, "gamma": 0.9, "theta": 1.3}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("dilation", [1, 2, 3, 4])
def test_rem_structure(kind, masked, dilation):
    T = 23
    params = {k: v for k, v in STRUCT_PARAMS.items() if k in _params(kind, 0.0, 0.0, 0.0)}
    P = build_rem(kind, T, **params, dilation=dilation, masked=masked)
    assert torch.isfinite(P).all()
    assert (P.diagonal() == 0).all()
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    lag = i - j
    off_lattice = (lag % dilation) != 0
    assert (P[off_lattice] == 0).all()
    on_lattice = (~off_lattice) & (lag != 0)
    if masked:
        assert (P.triu() == 0).all(), "masked REM must be strictly lower-triangular"
        on_lattice &= lag > 0
    else:
        assert torch.equal(P, P.T), "unmasked REM must be symmetric"
        masked_P = build_rem(kind, T, **params, dilation=dilation, masked=True)
        assert torch.equal(P, masked_P + masked_P.T)
    # with these parameters no lattice entry underflows or hits a zero of sin/cos
    assert (P[on_lattice] != 0).all()


def test_rem_is_not_normalised():
    P = build_rem("regular", 10, lam=-0.9, masked=False)
    assert not torch.allclose(P.sum(-1), torch.ones(10, dtype=P.dtype))
    assert (P < 0).any()


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("dilation", [1, 3])
def test_long_regular_rem_with_negative_lambda_is_finite(masked, dilation):
    T = 4096
    P = build_rem("regular", T, lam=-0.99, dilation=dilation, masked=masked)
    assert torch.isfinite(P).all()
    k = (T - 1) // dilation
    last = P[dilation * k, 0].item()
    assert last == pytest.approx((-0.99) ** k, rel=1e-9) and last != 0.0
    assert (P.diagonal() == 0).all()


@pytest.mark.parametrize("kind", ["cyclic_cos", "cyclic_sin"])
def test_long_cyclic_rem_is_finite(kind):
    P = build_rem(kind, 4096, gamma=0.99, theta=0.7, dilation=1, masked=False)
    assert torch.isfinite(P).all()
    assert P.abs().max() <= 0.99


@pytest.mark.parametrize("dilation", [1, 2, 3, 4])
@pytest.mark.parametrize("masked", [True, False])
def test_negative_lambda_alternates_along_a_row(dilation, masked):
    T, lam = 30, -0.8
    P = build_rem("regular", T, lam=lam, dilation=dilation, masked=masked)
    assert not torch.isnan(P).any()
    for i in range(T):
        for j in range(T):
            lag = i - j
            if lag == 0 or lag % dilation or (masked and lag < 0):
                assert P[i, j] == 0
                continue
            t = abs(lag) // dilation
            assert torch.sign(P[i, j]).item() == (-1) ** t
            assert P[i, j].item() == pytest.approx(lam**t, rel=1e-12)


def test_lag_lattice():
    t, on = lag_lattice(7, 2, masked=True)
    assert on[4, 0] == 1 and t[4, 0] == 2
    assert on[0, 4] == 0 and on[3, 0] == 0 and on[3, 3] == 0
    t, on = lag_lattice(7, 2, masked=False)
    assert on[0, 4] == 1 and t[0, 4] == 2
    assert torch.equal(t, t.round())  # integer exponents only


def test_build_rem_errors():
    with pytest.raises(ValueError):
        build_rem("nope", 4, lam=0.5)
    with pytest.raises(ValueError):
        build_rem("regular", 4)
    with pytest.raises(ValueError):
        build_rem("cyclic_cos", 4, gamma=0.5)
    with pytest.raises(ValueError):
        build_rem("regular", 0, lam=0.5)
    with pytest.raises(ValueError):
        build_rem("regular", 4, lam=0.5, dilation=0)


def test_build_rem_keeps_autograd():
    lam = torch.tensor(-0.6, dtype=torch.float64, requires_grad=True)
    P = build_rem("regular", 8, lam=lam, dilation=2)
    P.sum().backward()
    # d/dλ Σ λ^t over the lattice, t = 1, 2, 3 with 6, 4, 2 entries
    expected = 6 * 1 + 4 * 2 * (-0.6) + 2 * 3 * 0.36
    assert lam.grad.item() == pytest.approx(expected, rel=1e-12)


# -- nn.Module forms ------------------------------------------------------------------------------------
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("dilation", [1, 3])
def test_regular_module_matches_build_rem(masked, dilation):
    torch.manual_seed(1)
    T = 13
    m = RegularREM(4, dilation=dilation, masked=masked).double()
    out = m(T)
    assert out.shape == (4, T, T)
    for h in range(4):
        lam = torch.tanh(m.eta[h]).item()
        ref = build_rem("regular", T, lam=lam, dilation=dilation, masked=masked)
        torch.testing.assert_close(out[h], ref, atol=1e-12, rtol=0)
        assert m.values()[h]["lambda"] == pytest.approx(lam, abs=1e-15)


@pytest.mark.parametrize("cls", [CyclicCosREM, CyclicSinREM])
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("dilation", [1, 2])
def test_cyclic_modules_match_build_rem(cls, masked, dilation):
    torch.manual_seed(2)
    T = 13
    m = cls(3, dilation=dilation, masked=masked).double()
    with torch.no_grad():
        m.theta.uniform_(-math.pi, math.pi)
    out = m(T)
    assert out.shape == (3, T, T)
    for h in range(3):
        gamma = torch.sigmoid(m.nu[h]).item()
        theta = m.theta[h].item()
        ref = build_rem(cls.kind, T, gamma=gamma, theta=theta, dilation=dilation, masked=masked)
        torch.testing.assert_close(out[h], ref, atol=1e-12, rtol=0)
        vals = m.values()[h]
        assert vals["gamma"] == pytest.approx(gamma) and vals["theta"] == pytest.approx(theta)
        assert vals["lambda"] is None


def test_rem_kinds_registry():
    assert {"regular": RegularREM, "cyclic_cos": CyclicCosREM, "cyclic_sin": CyclicSinREM} == REM_KINDS


def test_initialisation_ranges():
    torch.manual_seed(3)
    reg = RegularREM(500)
    lam = reg.lam.detach()
    assert ((reg.eta.abs() >= 1.0) & (reg.eta.abs() <= 2.0)).all()
    assert ((lam.abs() >= math.tanh(1.0) - 1e-6) & (lam.abs() <= math.tanh(2.0) + 1e-6)).all()
    assert (lam > 0).any() and (lam < 0).any(), "η should get a random sign"
    for cls in (CyclicCosREM, CyclicSinREM):
        cyc = cls(500)
        g = cyc.gamma.detach()
        sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
        assert ((g >= sig(1.0) - 1e-6) & (g <= sig(2.0) + 1e-6)).all()
        th = cyc.theta.detach()
        assert ((th > 0) & (th < math.pi)).all(), "theta_init=None spreads θ over (0, π), ends excluded"
        assert CyclicSinREM(1).theta.item() == pytest.approx(math.pi / 2), "one head: θ = π/2, not π"
        assert len(set(th.tolist())) == 500
        fixed = cls(4, theta_init=0.5)
        assert torch.equal(fixed.theta.detach(), torch.full((4,), 0.5))


def test_every_head_has_its_own_parameters():
    torch.manual_seed(4)
    reg, cyc = RegularREM(3), CyclicCosREM(3)
    assert reg.eta.shape == (3,) and cyc.nu.shape == (3,) and cyc.theta.shape == (3,)
    assert len(set(reg.eta.tolist())) == 3 and len(set(cyc.nu.tolist())) == 3
    for m in (reg, cyc):
        out = m(9)
        out[1].sum().backward()
        for p in m.parameters():
            assert p.grad[1] != 0
            assert p.grad[0] == 0 and p.grad[2] == 0


HEAD_TYPES = [
    ("regular", 1),
    ("regular", 1),
    ("softmax", 1),
    ("cyclic_cos", 2),
    ("cyclic_sin", 1),
    ("regular", 3),
    ("softmax", 1),
    ("cyclic_sin", 2),
    ("regular", 1),
]


@pytest.mark.parametrize("masked", [True, False])
def test_rem_bank_places_heads_in_order(masked):
    torch.manual_seed(5)
    T = 11
    bank = REMBank(HEAD_TYPES, masked=masked).double()
    out = bank(T)
    assert out.shape == (len(HEAD_TYPES), T, T) and out.dtype == torch.float64
    values = bank.values()
    assert len(values) == len(HEAD_TYPES)
    for h, (kind, d) in enumerate(HEAD_TYPES):
        vals = values[h]
        if kind == "softmax":
            assert (out[h] == 0).all()
            assert vals == {"lambda": None, "gamma": None, "theta": None}
        elif kind == "regular":
            ref = build_rem(kind, T, lam=vals["lambda"], dilation=d, masked=masked)
            torch.testing.assert_close(out[h], ref, atol=1e-12, rtol=0)
            assert vals["gamma"] is None
        else:
            ref = build_rem(kind, T, gamma=vals["gamma"], theta=vals["theta"], dilation=d, masked=masked)
            torch.testing.assert_close(out[h], ref, atol=1e-12, rtol=0)
            assert vals["lambda"] is None
    # λ from the parameters, not only from values(): each head's own η
    lams = [v["lambda"] for v in values if v["lambda"] is not None]
    assert len(set(lams)) == len(lams) == 4


def test_rem_bank_heads_have_their_own_parameters():
    torch.manual_seed(6)
    bank = REMBank(HEAD_TYPES)
    n_reg = sum(k == "regular" for k, _ in HEAD_TYPES)
    n_cyc = sum(k.startswith("cyclic") for k, _ in HEAD_TYPES)
    assert sum(p.numel() for p in bank.parameters()) == n_reg + 2 * n_cyc
    T = 9
    base = bank(T).detach()
    for p in bank.parameters():
        for idx in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[idx] += 0.1
            changed = [h for h in range(len(HEAD_TYPES)) if not torch.equal(bank(T).detach()[h], base[h])]
            with torch.no_grad():
                p.view(-1)[idx] -= 0.1
            assert len(changed) == 1, f"a scalar parameter must move exactly one head, moved {changed}"


def test_rem_bank_gradients_flow():
    torch.manual_seed(7)
    bank = REMBank(HEAD_TYPES)
    (bank(10) ** 2).sum().backward()
    for name, p in bank.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert (p.grad != 0).all(), name


@pytest.mark.parametrize("dilation", [1, 3, 24])
def test_last_row_is_the_last_row_of_the_bank(dilation):
    types = [("regular", 1), ("cyclic_cos", dilation), ("cyclic_sin", dilation), ("softmax", 1)]
    torch.manual_seed(0)
    bank = REMBank(types, masked=True)
    torch.testing.assert_close(bank.last_row(50), bank(50)[:, -1])
    t, on = lag_row(50, dilation)
    full_t, full_on = lag_lattice(50, dilation, masked=True)
    torch.testing.assert_close(on, full_on[-1])
    torch.testing.assert_close(t * on, full_t[-1] * full_on[-1])
