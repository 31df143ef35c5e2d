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
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from models.attention import RSAAttention
from models.config import ModelConfig

__all__ = ["EncoderLayer", "LastStepLayer", "RSAForecaster", "RevIN"]


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

    def cycle_rows(self, phase: Tensor, length: int, offset: int = 0) -> Tensor:
        """Q at rows offset..offset+length-1 of windows starting at ``phase`` [B] -> [B, length, C]."""
        assert self.cycle is not None
        steps = torch.arange(length, device=phase.device)
        idx = (phase.reshape(-1, 1) + offset + steps) % self.cfg.cycle_period  # (B, length)
        return self.cycle[idx]

    def encode(
        self, x: Tensor, phase: Tensor | None = None, return_attn: bool = False
    ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor] | None, list[dict[str, Tensor] | None]]:
        """x [B, L, C] -> (the features the head reads [B*C, F], the normalised input u [B*C, L],
        RevIN's (mean, std) [B, 1, C] or None, each layer's attention maps)."""
        cfg = self.cfg
        L = cfg.input_length
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
        z = self.drop(z)
        maps = []
        for layer in self.layers:
            z, m = layer(z, return_attn)  # (B*C, L, d); (B*C, d) for the "state" head
            maps.append(m)
        z = self.norm(z)
        if cfg.head == "flatten":
            return z.flatten(1), u, stats, maps
        return (z if cfg.head == "state" else z[:, -1]), u, stats, maps

    def forward(
        self, x: Tensor, return_attn: bool = False, *, phase: Tensor | None = None
    ) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        """x [B, L, C] (and phase [B] int64 when the model has a cycle) -> [B, H, C]; with return_attn
        also the attention matrices: softmax and mixed [B, C, N, Hh, L, L], rem [N, Hh, L, L] (for the
        "state" head, their last rows only: [B, C, 1, Hh, L] and [1, Hh, L])."""
        cfg = self.cfg
        L, C = cfg.input_length, cfg.channels
        features, u, stats, maps = self.encode(x, phase, return_attn)
        y = self.head(features)  # (B*C, H)
        if self.linear is not None:
            y = y + self.linear(u)
        y = y.reshape(-1, C, cfg.horizon).transpose(1, 2)  # (B, H, C)
        if self.revin is not None and stats is not None:  # stats come from RevIN
            y = self.revin.denormalise(y, *stats)
        if self.cycle is not None:
            assert phase is not None  # encode refused a cycle without phase
            y = y + self.cycle_rows(phase, cfg.horizon, offset=L)
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
            attn.fold(self.cfg.input_length, last_row=self.cfg.head == "state")
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
