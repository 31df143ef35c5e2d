"""Tests for models/forecaster.py and models/config.py: shapes, folding, gradients, reports, validation."""

from __future__ import annotations

import math

import pytest
import torch

from models.attention import RSAAttention
from models.config import REM_TYPES, ModelConfig
from models.forecaster import Covariates, RevIN, RSAForecaster

SIX_TYPES = {"n_heads": 6, "rem_heads": (1, 1, 1, 1, 1, 1), "d_model": 12, "d_ff": 16, "dilation": 2}


def small_cfg(length=24, horizon=8, channels=2, **kw) -> ModelConfig:
    base = {"d_model": 8, "n_heads": 4, "d_ff": 16, "rem_heads": (1, 1, 1, 1, 0, 0), "dropout": 0.0}
    base.update(kw)
    return ModelConfig(input_length=length, horizon=horizon, channels=channels, **base)


def make_model(cfg: ModelConfig, seed: int = 0) -> RSAForecaster:
    torch.manual_seed(seed)
    return RSAForecaster(cfg).eval()


def window(batch: int, cfg: ModelConfig, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, cfg.input_length, cfg.channels, generator=g) * 3 + 1


def set_fused(model: RSAForecaster, fused: bool) -> None:
    for layer in model.layers:
        layer.attn.fused = fused


REM_PARAM_NAMES = ("eta", "nu", "theta", "mu")


def rem_params(model: RSAForecaster) -> dict[str, torch.nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if n.split(".")[-1] in REM_PARAM_NAMES}


# -- shapes ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(8, 4, 1), (24, 12, 3), (96, 96, 7), (33, 5, 2)], ids=str)
@pytest.mark.parametrize("baseline", [False, True], ids=["rsa", "baseline"])
def test_output_shapes(shape, baseline):
    L, H, C = shape
    cfg = small_cfg(L, H, C, d_model=16 if L == 96 else 8)
    if baseline:
        cfg = cfg.baseline()
    model = make_model(cfg)
    with torch.no_grad():
        y = model(window(2, cfg))
    assert y.shape == (2, H, C)
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("baseline", [False, True], ids=["rsa", "baseline"])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_return_attn_shapes(baseline, n_layers):
    cfg = small_cfg(length=16, horizon=4, channels=3, n_layers=n_layers)
    if baseline:
        cfg = cfg.baseline()
    model = make_model(cfg)
    B, L, C, N, Hh = 2, cfg.input_length, cfg.channels, n_layers, cfg.n_heads
    x = window(B, cfg)
    with torch.no_grad():
        y, maps = model(x, return_attn=True)
        torch.testing.assert_close(y, model(x), atol=1e-5, rtol=0)
    assert y.shape == (B, cfg.horizon, C)
    assert maps["softmax"].shape == (B, C, N, Hh, L, L)
    assert maps["mixed"].shape == (B, C, N, Hh, L, L)
    assert maps["rem"].shape == (N, Hh, L, L)
    torch.testing.assert_close(maps["softmax"].sum(-1), torch.ones(B, C, N, Hh, L))
    if baseline:
        assert (maps["rem"] == 0).all()
        assert torch.equal(maps["mixed"], maps["softmax"])
    else:
        for n, layer in enumerate(model.layers):
            torch.testing.assert_close(maps["rem"][n], layer.attn.rem(L).detach())


def test_return_attn_maps_channels_to_their_own_sequences():
    """maps["softmax"][b, c] must be the attention of sample b, channel c: check via a one-channel run."""
    cfg = small_cfg(length=12, horizon=3, channels=3)
    model = make_model(cfg)
    x = window(2, cfg)
    with torch.no_grad():
        _, maps = model(x, return_attn=True)
        for b in range(2):
            for c in range(3):
                xb = x[b : b + 1].clone()
                xb = xb[:, :, [c, *[k for k in range(3) if k != c]]]  # channel c first
                _, mb = model(xb, return_attn=True)
                torch.testing.assert_close(maps["softmax"][b, c], mb["softmax"][0, 0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("baseline", [False, True], ids=["rsa", "baseline"])
def test_last_head_reads_the_last_step_which_sees_the_whole_window(baseline):
    # No linear path and no RevIN, so the forecast is the attention branch alone.
    cfg = small_cfg(
        length=12, horizon=5, channels=2, head="last", masked=True, linear_residual=False, revin=False
    )
    model = make_model(cfg.baseline() if baseline else cfg)
    assert model.head.in_features == cfg.d_model
    x = window(1, cfg)
    with torch.no_grad():
        y = model(x)
        assert y.shape == (1, 5, 2)
        for t in (0, 5, 11):  # causal attention carries even the first step to the last one
            x2 = x.clone()
            x2[0, t, 0] += 1.0
            assert (model(x2) - y)[0, :, 0].abs().max() > 1e-6, t
            torch.testing.assert_close(model(x2)[0, :, 1], y[0, :, 1])  # channels stay independent
        set_fused(model, False)
        torch.testing.assert_close(model(x), y, atol=1e-5, rtol=0)
        model.fold()
        torch.testing.assert_close(model(x), y, atol=1e-5, rtol=0)


# -- folding, paths, batch independence -------------------------------------------------------------------
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("gate", ["layer", "head"])
def test_fold_leaves_eval_outputs_unchanged(masked, gate):
    cfg = small_cfg(length=20, horizon=6, channels=2, n_layers=2, masked=masked, gate=gate)
    model = make_model(cfg)
    with torch.no_grad():
        for n, p in rem_params(model).items():
            if n.endswith("mu"):
                p.uniform_(-2.0, 2.0)
    x = window(3, cfg)
    with torch.no_grad():
        before = model(x)
        set_fused(model, False)
        explicit = model(x)
        set_fused(model, True)
        assert model.fold() is model
        after = model(x)
    torch.testing.assert_close(after, before, atol=1e-5, rtol=0)
    torch.testing.assert_close(explicit, before, atol=1e-5, rtol=0)
    assert all(layer.attn.folded_length == cfg.input_length for layer in model.layers)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("fused", [True, False])
def test_sample_independent_of_its_batch(masked, fused):
    cfg = small_cfg(length=16, horizon=4, channels=2, masked=masked)
    model = make_model(cfg)
    set_fused(model, fused)
    x = window(5, cfg)
    with torch.no_grad():
        alone = model(x[:1])
        batched = model(x)
    torch.testing.assert_close(alone[0], batched[0], atol=1e-5, rtol=0)


def test_folded_sample_independent_of_its_batch():
    cfg = small_cfg(length=16, horizon=4, channels=2)
    model = make_model(cfg).fold()
    x = window(4, cfg)
    with torch.no_grad():
        torch.testing.assert_close(model(x[:1])[0], model(x)[0], atol=1e-5, rtol=0)


# -- gradients ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gate", ["layer", "head"])
@pytest.mark.parametrize("fused", [True, False])
def test_gradients_reach_eta_nu_theta_mu(gate, fused):
    cfg = ModelConfig(input_length=16, horizon=4, channels=2, gate=gate, **SIX_TYPES)
    model = make_model(cfg).train()
    set_fused(model, fused)
    x = window(3, cfg)
    target = torch.randn(3, cfg.horizon, cfg.channels)
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    params = rem_params(model)
    kinds = {n.split(".")[-1] for n in params}
    assert kinds == set(REM_PARAM_NAMES)
    # six REM modules per layer: regular, cos, sin and the dilated three
    assert sum(n.endswith(".eta") for n in params) == 2
    assert sum(n.endswith(".nu") for n in params) == 4
    for name, p in params.items():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert (p.grad != 0).all(), name  # every head is a REM head: every μ gets a gradient too
    mu = next(p for n, p in params.items() if n.endswith("mu"))
    assert mu.shape == ((6,) if gate == "head" else (1,))
    assert (mu.grad != 0).all()


def test_training_step_moves_rem_parameters():
    cfg = ModelConfig(input_length=16, horizon=4, channels=1, **SIX_TYPES)
    model = make_model(cfg).train()
    before = {n: p.detach().clone() for n, p in rem_params(model).items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = window(4, cfg)
    loss = (model(x) - 1.0).pow(2).mean()
    loss.backward()
    opt.step()
    for n, p in rem_params(model).items():
        assert not torch.equal(p.detach(), before[n]), n


# -- baseline and config --------------------------------------------------------------------------------
def test_baseline_has_no_rem_and_a_positional_encoding():
    cfg = small_cfg()
    base = cfg.baseline()
    assert base.rem_heads == (0, 0, 0, 0, 0, 0) and base.positional == "learned"
    assert base.d_model == cfg.d_model and base.n_heads == cfg.n_heads
    rsa, baseline = make_model(cfg), make_model(base)
    assert rem_params(baseline) == {}
    assert not any("rem" in n for n, _ in baseline.named_parameters())
    assert all(not layer.attn.has_rem for layer in baseline.layers)
    assert baseline.pos is not None and baseline.pos.shape == (1, cfg.input_length, cfg.d_model)
    assert rsa.pos is None
    assert rem_params(rsa)
    # the REM adds a handful of scalars per layer, the baseline a positional table
    n_rsa = sum(p.numel() for p in rsa.parameters())
    n_base = sum(p.numel() for p in baseline.parameters())
    n_rem = sum(p.numel() for p in rem_params(rsa).values())
    assert n_base - n_rsa == cfg.input_length * cfg.d_model - n_rem


def test_baseline_layer_is_plain_attention():
    cfg = small_cfg().baseline()
    model = make_model(cfg)
    for layer in model.layers:
        assert isinstance(layer.attn, RSAAttention)
        assert [k for k, _ in layer.attn.head_types] == ["softmax"] * cfg.n_heads


@pytest.mark.parametrize(
    "kw",
    [
        {"d_model": 10, "n_heads": 4, "rem_heads": (1, 0, 0, 0, 0, 0)},  # not divisible
        {"d_model": 8, "n_heads": 2, "rem_heads": (1, 1, 1, 0, 0, 0)},  # too many REM heads
        {"d_model": 8, "n_heads": 4, "rem_heads": (1, 1, 1, 1, 1, 0)},  # too many REM heads
        {"dilation": 0},
        {"dilation": -2},
        {"rem_heads": (1, 1)},
        {"rem_heads": (1, -1, 0, 0, 0, 0)},
        {"input_length": 0},
        {"horizon": 0},
        {"token_kernel": 2},
        {"dropout": 1.0},
        {"attn_dropout": -0.1},
        {"cycle_period": 1},
        {"cycle_period": -24},
        {"head": "mean"},
    ],
)
def test_config_validation(kw):
    base = {"d_model": 8, "n_heads": 4, "rem_heads": (1, 1, 0, 0, 0, 0)}
    base.update(kw)
    with pytest.raises(ValueError):
        ModelConfig(**base)


def test_config_head_types_order():
    cfg = ModelConfig(d_model=16, n_heads=8, rem_heads=(2, 1, 0, 1, 0, 1), dilation=3)
    assert cfg.head_types == [
        ("regular", 1),
        ("regular", 1),
        ("cyclic_cos", 1),
        ("regular", 3),
        ("cyclic_sin", 3),
        ("softmax", 1),
        ("softmax", 1),
        ("softmax", 1),
    ]
    assert [k for k, _ in REM_TYPES] == ["regular", "cyclic_cos", "cyclic_sin"] * 2
    assert cfg.baseline().head_types == [("softmax", 1)] * 8


def test_config_round_trip():
    cfg = small_cfg(gate="head", theta_init=None, masked=True)
    d = cfg.to_dict()
    assert isinstance(d["rem_heads"], tuple)
    d["rem_heads"] = list(d["rem_heads"])  # as after JSON
    assert ModelConfig.from_dict(d) == cfg


def test_config_theta_init_reaches_cyclic_heads():
    cfg = small_cfg(rem_heads=(0, 1, 1, 0, 0, 0))
    model = make_model(cfg)
    thetas = [p for n, p in model.named_parameters() if n.endswith("theta")]
    assert len(thetas) == 2
    for th in thetas:
        torch.testing.assert_close(th.detach(), torch.full_like(th, 2 * math.pi / 24))


def test_config_masked_and_gate_reach_attention():
    cfg = small_cfg(masked=True, gate="head", mu_init=1.25, n_layers=2)
    model = make_model(cfg)
    for layer in model.layers:
        assert layer.attn.masked and layer.attn.mu.shape == (cfg.n_heads,)
        assert (layer.attn.mu == 1.25).all()
        for group in layer.attn.rem.groups:
            assert group.masked
            assert group.dilation in (1, cfg.dilation)


# -- report ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gate", ["layer", "head"])
def test_recurrence_report(gate):
    cfg = ModelConfig(input_length=12, horizon=3, channels=1, n_layers=2, gate=gate, **SIX_TYPES)
    model = make_model(cfg)
    report = model.recurrence_report()
    assert [r["layer"] for r in report] == [0, 1]
    for layer_report, layer in zip(report, model.layers, strict=True):
        assert layer_report["gate_mode"] == gate
        heads = layer_report["heads"]
        assert [(h["kind"], h["dilation"]) for h in heads] == cfg.head_types
        g = torch.sigmoid(layer.attn.mu.detach()).expand(cfg.n_heads)
        for i, h in enumerate(heads):
            assert h["head"] == i
            assert h["gate"] == pytest.approx(g[i].item())
            if h["kind"] == "regular":
                assert -1 < h["lambda"] < 1 and abs(h["lambda"]) >= math.tanh(1.0) - 1e-6
                assert h["gamma"] is None and h["theta"] is None
            else:
                assert 0 < h["gamma"] < 1 and h["theta"] == pytest.approx(2 * math.pi / 24)
                assert h["lambda"] is None
    base_report = make_model(cfg.baseline()).recurrence_report()
    assert all(h["kind"] == "softmax" and h["gate"] == 0 for r in base_report for h in r["heads"])


def test_report_gates_for_softmax_heads_are_zero():
    cfg = small_cfg(rem_heads=(1, 0, 0, 0, 0, 0), gate="head")
    heads = make_model(cfg).recurrence_report()[0]["heads"]
    assert heads[0]["gate"] == pytest.approx(0.5)
    assert [h["gate"] for h in heads[1:]] == [0.0, 0.0, 0.0]


# -- RevIN ----------------------------------------------------------------------------------------------
def test_revin_round_trip():
    torch.manual_seed(0)
    rev = RevIN(3)
    with torch.no_grad():
        rev.weight.uniform_(0.5, 2.0)
        rev.bias.uniform_(-1.0, 1.0)
    x = torch.randn(4, 20, 3) * 5 + 2
    z, mean, std = rev.normalise(x)
    torch.testing.assert_close(rev.denormalise(z, mean, std), x, atol=1e-4, rtol=0)


def test_forecast_is_scale_and_shift_equivariant():
    """With RevIN, shifting and scaling a window shifts and scales its forecast (eval)."""
    cfg = small_cfg(length=16, horizon=4, channels=2)
    model = make_model(cfg)
    x = window(2, cfg)
    with torch.no_grad():
        torch.testing.assert_close(model(3 * x + 7), 3 * model(x) + 7, atol=1e-3, rtol=1e-4)


# -- seasonal cycle -----------------------------------------------------------------------------------
def test_cycle_is_removed_from_the_window_and_continued_in_the_forecast():
    cfg = small_cfg(length=10, horizon=6, channels=2, cycle_period=4)
    model = make_model(cfg)
    with torch.no_grad():
        model.cycle.copy_(torch.arange(8.0).view(4, 2) * 10)  # Q[p, c] = 10·(2p + c)
    phase = torch.tensor([0, 3])
    rows = model.cycle_rows(phase, 6, offset=10)  # (2, 6, 2)
    # window 1 starts at phase 3: forecast row k sits at phase (3 + 10 + k) mod 4
    for k in range(6):
        assert rows[1, k].tolist() == model.cycle[(3 + 10 + k) % 4].tolist()
    # Shift equivariance survives the cycle: Q is removed before RevIN and added back after it.
    x = model.cycle_rows(phase, 10)
    y = model(x, phase=phase)
    y_shifted = model(x + 5.0, phase=phase)
    torch.testing.assert_close(y_shifted - y, torch.full_like(y, 5.0), rtol=0, atol=1e-4)


def test_phase_shift_equals_rolled_cycle():
    """Shifting every phase by s is the same as rolling the table by s."""
    cfg = small_cfg(length=12, horizon=5, channels=3, cycle_period=6)
    model = make_model(cfg)
    with torch.no_grad():
        model.cycle.normal_()
    x, phase = window(4, cfg), torch.tensor([0, 1, 4, 5])
    y = model(x, phase=(phase + 2) % 6)
    with torch.no_grad():
        model.cycle.copy_(torch.roll(model.cycle, shifts=-2, dims=0))
    torch.testing.assert_close(model(x, phase=phase), y)


def test_cycle_gets_gradients_and_phase_is_required():
    cfg = small_cfg(cycle_period=24)
    model = make_model(cfg).train()
    x = window(3, cfg)
    model(x, phase=torch.tensor([0, 5, 23])).square().mean().backward()
    assert model.cycle.grad is not None and float(model.cycle.grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="pass phase"):
        model(x)


# -- the "state" head: one layer read at its last step (rsa.md §7) ------------------------------------
BANK = (
    ("regular", 1, 0.995, 0.0),
    ("regular", 1, -0.6, 0.0),
    ("cyclic_cos", 1, 0.97, 2 * math.pi / 24),
    ("cyclic_sin", 1, 0.97, 2 * math.pi / 24),
    ("regular", 24, 0.9, 0.0),
)
STATE = ModelConfig(
    input_length=60,
    horizon=12,
    channels=3,
    d_model=6,
    n_heads=6,
    rem_heads=(0, 0, 0, 0, 0, 0),
    rem_bank=BANK,
    masked=True,
    gate="head",
    mu_init=3.0,
    head="state",
    linear_residual=False,
    dropout=0.0,
)


def test_state_head_is_the_last_step_of_the_layer_without_norms():
    """Reading only the last query row gives what the whole layer gives at its last step."""
    torch.manual_seed(0)
    model = RSAForecaster(STATE).eval()
    x = torch.randn(2, 60, 3)
    layer = model.layers[0]
    z = model.embed(x.transpose(1, 2).reshape(-1, 1, 60)).transpose(1, 2)
    full, _ = layer.attn(z)
    want = z[:, -1] + full[:, -1]
    got, _ = layer(z)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_state_head_shapes_fold_and_bank_values():
    torch.manual_seed(0)
    model = RSAForecaster(STATE).eval()
    x = torch.randn(4, 60, 3)
    y, maps = model(x, return_attn=True)
    assert y.shape == (4, 12, 3)
    assert maps["softmax"].shape == maps["mixed"].shape == (4, 3, 1, 6, 60)
    assert maps["rem"].shape == (1, 6, 60)
    heads = model.recurrence_report()[0]["heads"]
    assert [h["kind"] for h in heads] == [
        "regular",
        "regular",
        "cyclic_cos",
        "cyclic_sin",
        "regular",
        "softmax",
    ]
    assert heads[0]["lambda"] == pytest.approx(0.995, abs=1e-6) and heads[4]["dilation"] == 24
    assert heads[0]["gate"] == pytest.approx(1 / (1 + math.exp(-3.0)), abs=1e-6) and heads[5]["gate"] == 0.0
    # The dilated head's REM row is non-zero only at lags 24 and 48 from the last step.
    assert torch.nonzero(maps["rem"][0, 4]).flatten().tolist() == [59 - 48, 59 - 24]
    folded = RSAForecaster(STATE).eval()
    folded.load_state_dict(model.state_dict())
    folded.fold()
    torch.testing.assert_close(folded(x), y)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"head": "state", "n_layers": 2}, "one layer"),
        ({"rem_bank": BANK, "rem_heads": (1, 0, 0, 0, 0, 0)}, "not both"),
        ({"rem_bank": (("regular", 1, 1.0, 0.0),)}, "λ must be"),
        ({"rem_bank": (("cyclic_cos", 1, 0.0, 0.3),)}, "γ must be"),
        ({"rem_bank": (("pyramid", 1, 0.5, 0.0),)}, "kind must be"),
        ({"rem_bank": BANK * 2}, "n_heads"),
    ],
)
def test_state_and_bank_config_validation(kw, match):
    base = dict(d_model=6, n_heads=6, rem_heads=(0, 0, 0, 0, 0, 0))
    with pytest.raises(ValueError, match=match):
        ModelConfig(**{**base, **kw})


def test_bank_round_trips_and_baseline_drops_it():
    assert ModelConfig.from_dict(STATE.to_dict()) == STATE
    base = STATE.baseline()
    assert base.rem_bank == () and all(kind == "softmax" for kind, _ in base.head_types)


# -- covariates (issue 36) ------------------------------------------------------------------------


def covariates_for(cfg: ModelConfig, batch: int, seed: int = 2) -> Covariates:
    g = torch.Generator().manual_seed(seed)

    def draw(*shape: int) -> torch.Tensor | None:
        return torch.randn(batch, *shape, generator=g) if shape[-1] else None

    return Covariates(
        past=draw(cfg.input_length, cfg.past_covariates),
        future=draw(cfg.horizon, cfg.future_covariates),
        static=draw(cfg.static_covariates),
    )


def covariate_cfg(**kw) -> ModelConfig:
    return small_cfg(past_covariates=2, future_covariates=3, static_covariates=4, masked=True, **kw)


@pytest.mark.parametrize("head", ["flatten", "last"])
def test_each_kind_of_covariate_moves_the_forecast(head):
    cfg = covariate_cfg(head=head)
    model = make_model(cfg)
    x, cov = window(3, cfg), covariates_for(cfg, 3)
    y = model(x, covariates=cov)
    assert y.shape == (3, cfg.horizon, cfg.channels)
    for kind in ("past", "future", "static"):
        t = getattr(cov, kind).clone()
        t[1] += 1.0
        moved = model(x, covariates=Covariates(**{**cov.__dict__, kind: t}))
        assert torch.equal(moved[[0, 2]], y[[0, 2]]), kind  # another series' covariates never leak
        assert (moved[1] - y[1]).abs().max() > 1e-4, kind


def test_horizon_tokens_alone_carry_future_covariates_through_the_attention():
    """With the linear map off, a future covariate reaches the forecast only through its horizon token:
    the token is in the attention (causal: the window's tokens never see it)."""
    cfg = small_cfg(future_covariates=2, masked=True)
    model = make_model(cfg)
    assert model.covariate_linear is not None
    with torch.no_grad():
        model.covariate_linear.weight.zero_()
    x, cov = window(2, cfg), covariates_for(cfg, 2)
    _, maps = model(x, return_attn=True, covariates=cov)
    T = cfg.input_length + cfg.horizon
    assert maps["softmax"].shape[-2:] == (T, T)
    assert cov.future is not None
    later = cov.future.clone()
    later[:, -1] += 1.0  # the last horizon step's covariates
    y, y2 = model(x, covariates=cov), model(x, covariates=Covariates(future=later))
    assert torch.allclose(y[:, :-1], y2[:, :-1], atol=1e-6)  # causal: earlier steps never see it
    assert (y[:, -1] - y2[:, -1]).abs().max() > 1e-4


@pytest.mark.parametrize("head", ["flatten", "last"])
def test_fold_leaves_covariate_outputs_unchanged(head):
    cfg = covariate_cfg(head=head)
    model = make_model(cfg)
    x, cov = window(4, cfg), covariates_for(cfg, 4)
    want = model(x, covariates=cov)
    set_fused(model, False)
    assert torch.allclose(model(x, covariates=cov), want, atol=1e-5)
    model.fold()
    assert model.attentions()[0].folded_length == cfg.input_length + cfg.horizon
    assert torch.allclose(model(x, covariates=cov), want, atol=1e-5)


def test_covariate_linear_reads_the_flat_layout():
    """The linear map's input is past then future, each step-major, then the statics: the layout the
    service feeds (app/artifacts/covariates.py)."""
    cfg = covariate_cfg()
    cov = covariates_for(cfg, 2)
    flat = cov.flat()
    assert flat.shape == (2, cfg.covariate_width)
    L, P, H, F = cfg.input_length, cfg.past_covariates, cfg.horizon, cfg.future_covariates
    assert cov.past is not None and cov.future is not None and cov.static is not None
    assert torch.equal(flat[:, 1 * P + 0], cov.past[:, 1, 0])  # step 1, covariate 0
    assert torch.equal(flat[:, L * P + 2 * F + 1], cov.future[:, 2, 1])  # horizon step 2, column 1
    assert torch.equal(flat[:, L * P + H * F :], cov.static)


def test_covariates_are_checked_against_the_config():
    cfg = covariate_cfg()
    model = make_model(cfg)
    x, cov = window(2, cfg), covariates_for(cfg, 2)
    with pytest.raises(ValueError, match="takes 2 past covariates, got none"):
        model(x, covariates=Covariates(future=cov.future, static=cov.static))
    with pytest.raises(ValueError, match="takes 3 future covariates, got 1"):
        model(x, covariates=Covariates(past=cov.past, future=cov.future[..., :1], static=cov.static))
    with pytest.raises(ValueError, match="takes 2 past covariates"):
        model(x)
    plain = make_model(small_cfg())
    with pytest.raises(ValueError, match="takes no covariates"):
        plain(window(2, small_cfg()), covariates=cov)
    with pytest.raises(ValueError, match="no horizon tokens"):
        small_cfg(head="state", n_layers=1, future_covariates=1)
    with pytest.raises(ValueError, match="static_covariates must be >= 0"):
        small_cfg(static_covariates=-1)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
