"""RSA forecaster: window [B, L, C] -> forecast [B, H, C].

Channel-independent: each channel is a separate univariate sequence through shared weights
(PatchTST/DLinear practice on ETT, where cross-channel mixing overfits).  Per-window normalisation
(RevIN) removes each window's level and scale; a linear map L→H on the normalised input runs beside
the attention stack, which learns the residual structure.  The baseline is the same network with no
REM heads and a learned positional encoding.

With ``cycle_period`` P > 0 the window first loses a learned seasonal cycle Q [P, C] (as in CycleNet,
Lin et al., NeurIPS 2024), aligned by ``phase`` [B], the position in the cycle of the window's first
row; the network forecasts what is left and Q's continuation is added back.  A window of 96 hourly
rows holds only four noisy days; Q is the daily profile learned from every training day.

Covariates (`ModelConfig.past_covariates`, `future_covariates`, `static_covariates`; issue 36) come in
standardised, as a `Covariates`: past-only values are extra input channels of each window step (a linear
embedding added to the step's token), future-known values become H horizon tokens appended after the
window (each its step's values embedded, plus a learned horizon position), whose outputs add one value
to their step's forecast (NeuralForecast's `futr_exog`, TFT's decoder inputs), and statics are embedded
and added to every token. Beside the attention, a linear map reads the flattened covariates, as the REM
read-out reads them (app/artifacts/covariates.py's layout: past step-major, then future step-major, then
the statics), so a least-squares start can solve for it with the linear path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from models.attention import RSAAttention
from models.config import ModelConfig

__all__ = ["Covariates", "EncoderLayer", "LastStepLayer", "RSAForecaster", "RevIN"]


@dataclass(frozen=True)
class Covariates:
    """A batch's standardised covariates: past [B, L, P], future [B, H, F], static [B, S]; None for a
    kind the model does not take."""

    past: Tensor | None = None
    future: Tensor | None = None
    static: Tensor | None = None

    def flat(self) -> Tensor:
        """[B, L·P + H·F + S]: past then future, each step-major, then the statics."""
        parts = [t.flatten(1) for t in (self.past, self.future, self.static) if t is not None]
        return torch.cat(parts, 1)


class RevIN(nn.Module):
    """Reversible instance normalisation over time, per sample and channel, with a learned affine."""

    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def normalise(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        mean = x.mean(dim=1, keepdim=True)  # (B, 1, C)
        d = x - mean
        std = torch.sqrt((d * d).mean(dim=1, keepdim=True) + self.eps)  # (B, 1, C); d*d, not Pow, in ONNX
        return d / std * self.weight + self.bias, mean, std

    def denormalise(self, y: Tensor, mean: Tensor, std: Tensor) -> Tensor:
        return (y - self.bias) / (self.weight + self.eps * self.eps) * std + mean


class EncoderLayer(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + ffn(ln(x))."""

    def __init__(self, attention: RSAAttention, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = attention
        self.ffn = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model)
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, return_attn: bool = False) -> tuple[Tensor, dict[str, Tensor] | None]:
        a, maps = self.attn(self.ln1(x), return_attn)
        x = x + self.drop(a)
        x = x + self.drop(self.ffn(self.ln2(x)))
        return x, maps


class LastStepLayer(nn.Module):
    """One RSA layer read out at its last step: x [B, T, d] -> x_T + attn(x)_T [B, d].

    No LayerNorm and no FFN: each REM head's output stays a linear function of the window, the state
    of its linear RNN after the last step, mixed with its softmax read through the head's gate."""

    def __init__(self, attention: RSAAttention):
        super().__init__()
        self.attn = attention

    def forward(self, x: Tensor, return_attn: bool = False) -> tuple[Tensor, dict[str, Tensor] | None]:
        a, maps = self.attn.forward_last(x, return_attn)
        return x[:, -1] + a, maps


class RSAForecaster(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        L, H, d = cfg.input_length, cfg.horizon, cfg.d_model
        self.revin = RevIN(cfg.channels) if cfg.revin else None
        # Each step is embedded with its neighbours (as Informer's TokenEmbedding); replicate padding
        # keeps the window's edges from seeing the other end.
        self.embed = nn.Conv1d(
            1, d, cfg.token_kernel, padding=cfg.token_kernel // 2, padding_mode="replicate"
        )
        self.pos = nn.Parameter(torch.randn(1, L, d) * 0.02) if cfg.positional == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        rem_init = [(a, b) for _, _, a, b in cfg.rem_bank] or None

        def attention() -> RSAAttention:
            return RSAAttention(
                d,
                cfg.head_types,
                masked=cfg.masked,
                gate=cfg.gate,
                mu_init=cfg.mu_init,
                theta_init=cfg.theta_init,
                dropout=cfg.attn_dropout,
                rem_init=rem_init,
            )

        if cfg.head == "state":
            self.layers = nn.ModuleList([LastStepLayer(attention())])
            self.norm: nn.Module = nn.Identity()
        else:
            self.layers = nn.ModuleList(
                EncoderLayer(attention(), d, cfg.d_ff, cfg.dropout) for _ in range(cfg.n_layers)
            )
            self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(L * d if cfg.head == "flatten" else d, H)
        self.linear = nn.Linear(L, H) if cfg.linear_residual else None
        self.cycle = nn.Parameter(torch.zeros(cfg.cycle_period, cfg.channels)) if cfg.cycle_period else None
        P, F, S = cfg.past_covariates, cfg.future_covariates, cfg.static_covariates
        self.past_embed = nn.Linear(P, d, bias=False) if P else None
        self.static_embed = nn.Linear(S, d, bias=False) if S else None
        self.future_embed = nn.Linear(F, d) if F else None
        self.horizon_pos = nn.Parameter(torch.randn(1, H, d) * 0.02) if F else None
        self.future_head = nn.Linear(d, 1) if F else None
        width = cfg.covariate_width
        self.covariate_linear = nn.Linear(width, H, bias=False) if width else None

    def _check_covariates(self, covariates: Covariates | None) -> Covariates | None:
        cfg = self.cfg
        want = {"past": cfg.past_covariates, "future": cfg.future_covariates, "static": cfg.static_covariates}
        if not any(want.values()):
            if covariates is not None:
                raise ValueError("this model takes no covariates")
            return None
        given = covariates or Covariates()
        for kind, n in want.items():
            t = getattr(given, kind)
            if (t is None) != (n == 0) or (t is not None and t.shape[-1] != n):
                got = "none" if t is None else f"{t.shape[-1]}"
                raise ValueError(f"this model takes {n} {kind} covariates, got {got}")
        return given

    def cycle_rows(self, phase: Tensor, length: int, offset: int = 0) -> Tensor:
        """Q at rows offset..offset+length-1 of windows starting at ``phase`` [B] -> [B, length, C]."""
        assert self.cycle is not None
        steps = torch.arange(length, device=phase.device)
        idx = (phase.reshape(-1, 1) + offset + steps) % self.cfg.cycle_period  # (B, length)
        return self.cycle[idx]

    def encode(
        self,
        x: Tensor,
        phase: Tensor | None = None,
        return_attn: bool = False,
        covariates: Covariates | None = None,
    ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor] | None, list[dict[str, Tensor] | None]]:
        """x [B, L, C] -> (the features the head reads [B*C, F], the normalised input u [B*C, L],
        RevIN's (mean, std) [B, 1, C] or None, each layer's attention maps). With future covariates the
        features end with the H horizon tokens' outputs [B*C, H, d], flattened."""
        cfg = self.cfg
        L, C = cfg.input_length, cfg.channels
        if self.cycle is not None:
            if phase is None:
                raise ValueError(f"this model has a seasonal cycle of period {cfg.cycle_period}: pass phase")
            x = x - self.cycle_rows(phase, L)
        stats = None
        if self.revin is not None:
            x, mean, std = self.revin.normalise(x)  # (B, L, C)
            stats = (mean, std)
        u = x.transpose(1, 2).reshape(-1, L)  # (B*C, L): one univariate sequence per channel
        z = self.embed(u.unsqueeze(1)).transpose(1, 2)  # (B*C, L, d)
        if self.pos is not None:
            z = z + self.pos
        if covariates is not None:
            z = self._with_covariates(z, covariates, C)
        z = self.drop(z)
        maps = []
        for layer in self.layers:
            z, m = layer(z, return_attn)  # (B*C, L, d); (B*C, d) for the "state" head
            maps.append(m)
        z = self.norm(z)
        if cfg.head == "state":
            return z, u, stats, maps
        window, horizon = z[:, :L], z[:, L:]
        head_in = window.flatten(1) if cfg.head == "flatten" else window[:, -1]
        return torch.cat([head_in, horizon.flatten(1)], 1), u, stats, maps

    def _with_covariates(self, z: Tensor, cov: Covariates, channels: int) -> Tensor:
        """The window's tokens z [B*C, L, d] with the covariates' embeddings added, and the horizon
        tokens appended: [B*C, sequence_length, d]. Every channel reads the same covariates."""

        def per_channel(t: Tensor) -> Tensor:
            return t.repeat_interleave(channels, dim=0)

        static = None
        if self.static_embed is not None and cov.static is not None:
            static = per_channel(self.static_embed(cov.static)).unsqueeze(1)  # (B*C, 1, d)
            z = z + static
        if self.past_embed is not None and cov.past is not None:
            z = z + per_channel(self.past_embed(cov.past))  # (B*C, L, d)
        if self.future_embed is not None and self.horizon_pos is not None and cov.future is not None:
            h = per_channel(self.future_embed(cov.future)) + self.horizon_pos  # (B*C, H, d)
            z = torch.cat([z, h if static is None else h + static], 1)
        return z

    def forward(
        self,
        x: Tensor,
        return_attn: bool = False,
        *,
        phase: Tensor | None = None,
        covariates: Covariates | None = None,
    ) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        """x [B, L, C] (and phase [B] int64 when the model has a cycle, covariates when it takes them)
        -> [B, H, C]; with return_attn also the attention matrices: softmax and mixed
        [B, C, N, Hh, T, T], rem [N, Hh, T, T], T = cfg.sequence_length (for the "state" head, their last
        rows only: [B, C, 1, Hh, L] and [1, Hh, L])."""
        cfg = self.cfg
        C, H = cfg.channels, cfg.horizon
        cov = self._check_covariates(covariates)
        features, u, stats, maps = self.encode(x, phase, return_attn, cov)
        if self.future_head is not None:
            features, horizon = features[:, : -H * cfg.d_model], features[:, -H * cfg.d_model :]
            y = self.head(features) + self.future_head(horizon.reshape(-1, H, cfg.d_model))[..., 0]
        else:
            y = self.head(features)  # (B*C, H)
        if self.linear is not None:
            y = y + self.linear(u)
        if self.covariate_linear is not None and cov is not None:
            y = y + self.covariate_linear(cov.flat()).repeat_interleave(C, dim=0)
        y = y.reshape(-1, C, cfg.horizon).transpose(1, 2)  # (B, H, C)
        if self.revin is not None and stats is not None:  # stats come from RevIN
            y = self.revin.denormalise(y, *stats)
        if self.cycle is not None:
            assert phase is not None  # encode refused a cycle without phase
            y = y + self.cycle_rows(phase, cfg.horizon, offset=cfg.input_length)
        if not return_attn:
            return y
        layer_maps = [m for m in maps if m is not None]  # asked for, every layer returned its maps

        def per_channel(name: str) -> Tensor:
            s = torch.stack([m[name] for m in layer_maps], dim=1)  # (B*C, N, Hh, L, L)
            return s.reshape(-1, C, *s.shape[1:])  # (B, C, N, Hh, L, L)

        rem = torch.stack([m["rem"] for m in layer_maps], dim=0)  # (N, Hh, L, L)
        return y, {"softmax": per_channel("softmax"), "rem": rem, "mixed": per_channel("mixed")}

    def fold(self) -> RSAForecaster:
        """Freeze every REM and gate for the model's input length (export, fast inference)."""
        for attn in self.attentions():
            attn.fold(self.cfg.sequence_length, last_row=self.cfg.head == "state")
        return self

    def attentions(self) -> list[RSAAttention]:
        """Each layer's attention, in layer order."""
        return [cast(RSAAttention, layer.attn) for layer in self.layers]

    def recurrence_report(self) -> list[dict]:
        """Per layer, per head: kind, dilation, λ/γ/θ and gate: how much recurrence the model uses."""
        return [
            {"layer": i, "gate_mode": self.cfg.gate, "heads": attn.head_report()}
            for i, attn in enumerate(self.attentions())
        ]
