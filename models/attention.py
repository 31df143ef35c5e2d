"""RSA multi-head self-attention, rsa.md §3:

    RSA_h(X) = [ (1 − σ(μ)) · softmax(Q_h K_hᵀ / √d_k + mask) + σ(μ) · P_h ] · V_h

Heads with a REM type mix in their REM P_h through the gate σ(μ); the remaining heads are plain
softmax heads.  With no REM head at all this is standard multi-head attention (the baseline).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.rem import REMBank

__all__ = ["RSAAttention"]


class RSAAttention(nn.Module):
    """Multi-head self-attention with per-head REMs mixed in through a learnable gate.

    Args:
        d_model: model width; split evenly over the heads.
        head_types: (kind, dilation) per head, kind in regular / cyclic_cos / cyclic_sin / softmax.
        masked: causal attention and strictly lower-triangular REMs; else bidirectional with
            symmetric REMs (zero diagonal in both).
        gate: "layer" for one μ shared by the layer's REM heads (the paper), "head" for one per head.
        mu_init: initial μ (σ(μ) is the weight of the REM).
        theta_init: initial θ of the cyclic heads (None spreads them over (0, π), ends excluded).
        dropout: dropout on the mixed attention matrix.
        rem_init: starting (λ or γ, θ) per REM head, in head order (None: random starts).
    """

    # Buffers registered by name (register_buffer), declared here for the type checker: is_rem when
    # the layer has REM heads; softmax_scale, rem_scaled and rem_folded between fold() and unfold().
    is_rem: Tensor
    softmax_scale: Tensor
    rem_scaled: Tensor
    rem_folded: Tensor

    def __init__(
        self,
        d_model: int,
        head_types: Sequence[tuple[str, int]],
        masked: bool = False,
        gate: str = "layer",
        mu_init: float = 0.0,
        theta_init: float | None = None,
        dropout: float = 0.0,
        rem_init: Sequence[tuple[float, float]] | None = None,
    ):
        super().__init__()
        self.n_heads = len(head_types)
        if d_model % self.n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by the number of heads ({self.n_heads})")
        if gate not in ("layer", "head"):
            raise ValueError(f"gate must be 'layer' or 'head', got {gate!r}")
        self.head_dim = d_model // self.n_heads
        self.masked = masked
        self.head_types = list(head_types)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        is_rem = torch.tensor([kind != "softmax" for kind, _ in self.head_types], dtype=torch.float32)
        self.has_rem = bool(is_rem.any())
        if self.has_rem:
            self.rem = REMBank(self.head_types, masked=masked, theta_init=theta_init, init=rem_init)
            self.mu = nn.Parameter(torch.full((1 if gate == "layer" else self.n_heads,), float(mu_init)))
            self.register_buffer("is_rem", is_rem, persistent=False)
        # Training fast path through F.scaled_dot_product_attention (equal math; the explicit path
        # below is the reference, and the one used when matrices are returned, folded or exported).
        self.fused = True
        # Set by fold(): the REM and gate as constants for one length (export, fast inference).
        self.folded_length: int | None = None

    # -- the REM side ----------------------------------------------------------------------------
    def gates(self) -> Tensor:
        """g_h per head [H]: σ(μ) for REM heads, 0 for plain softmax heads."""
        if not self.has_rem:
            return torch.zeros(self.n_heads, device=self.qkv.weight.device)
        return torch.sigmoid(self.mu).expand(self.n_heads) * self.is_rem

    def kernels(self, length: int) -> tuple[Tensor, Tensor]:
        """(g [H], P [H, T, T]) for the current parameters."""
        if not self.has_rem:
            z = self.qkv.weight.new_zeros(self.n_heads, length, length)
            return self.gates(), z
        return self.gates(), self.rem(length)

    def last_kernels(self, length: int) -> tuple[Tensor, Tensor]:
        """(g [H], P's last row [H, T]): all that a read-out at the last step uses of the REM."""
        if not self.has_rem:
            return self.gates(), self.qkv.weight.new_zeros(self.n_heads, length)
        return self.gates(), self.rem.last_row(length)

    @torch.no_grad()
    def fold(self, length: int, last_row: bool = False) -> None:
        """Freeze REM and gate for sequences of `length` into two buffers (rsa.md §4):
        softmax_scale = 1 − g  [H, 1, 1] and rem_scaled = g · P  [H, T, T]; with `last_row`, only
        what forward_last uses: [H, 1] and [H, T]."""
        if last_row:
            g, P = self.last_kernels(length)
            scale = (1.0 - g)[:, None]
        else:
            g, P = self.kernels(length)
            scale = (1.0 - g)[:, None, None]
        self.register_buffer("softmax_scale", scale.clone(), persistent=False)
        self.register_buffer("rem_scaled", (g.view(-1, *[1] * (P.dim() - 1)) * P).clone(), persistent=False)
        self.register_buffer("rem_folded", P.clone(), persistent=False)
        self.folded_length = length

    def unfold(self) -> None:
        for name in ("softmax_scale", "rem_scaled", "rem_folded"):
            self._buffers.pop(name, None)
        self.folded_length = None

    # -- forward ----------------------------------------------------------------------------------
    def forward(self, x: Tensor, return_attn: bool = False) -> tuple[Tensor, dict[str, Tensor] | None]:
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)

        # Attention dropout acts on the whole mixed matrix, which the fused path never forms.
        dropout_on = self.training and self.attn_drop.p > 0
        if self.fused and not return_attn and self.folded_length is None and not dropout_on:
            # Fast path, same math: softmax(·)·V never materialises the T×T matrix, and the REM side
            # (g·P)·V is one small batched matmul.
            return self.proj(self._fused(q, k, v).transpose(1, 2).reshape(B, T, D)), None

        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))  # (B, H, T, T)
        if self.masked:
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(causal, float("-inf"))
        attn = F.softmax(scores, dim=-1)  # (B, H, T, T)

        # The one place where the gate mixes the two attention matrices.
        if not self.has_rem:
            P, mixed = None, attn
        elif self.folded_length is not None:
            if self.folded_length != T:
                raise ValueError(f"folded for length {self.folded_length}, got a sequence of {T}")
            P = self.rem_folded
            mixed = self.softmax_scale * attn + self.rem_scaled
        else:
            g, P = self.kernels(T)
            g = g[:, None, None]  # (H, 1, 1)
            mixed = (1.0 - g) * attn + g * P  # (B, H, T, T)

        y = self.attn_drop(mixed) @ v  # (B, H, T, hd)
        y = y.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        y = self.proj(y)
        if not return_attn:
            return y, None
        if P is None:
            P = torch.zeros(self.n_heads, T, T, device=x.device, dtype=x.dtype)
        return y, {"softmax": attn, "rem": P, "mixed": mixed}

    def forward_last(self, x: Tensor, return_attn: bool = False) -> tuple[Tensor, dict[str, Tensor] | None]:
        """The output at the last step only, x [B, T, D] -> [B, D]: exactly row T − 1 of forward (the
        last query sees every key, masked or not), in O(T) per head. With return_attn, the rows that
        made it: softmax and mixed [B, H, T], rem [H, T]."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q = q[:, -1].view(B, self.n_heads, 1, self.head_dim)  # (B, H, 1, hd)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        scores = (q @ k.transpose(-2, -1)).squeeze(2) * (1.0 / math.sqrt(self.head_dim))  # (B, H, T)
        attn = F.softmax(scores, dim=-1)
        if not self.has_rem:
            P, mixed = None, attn
        elif self.folded_length is not None:
            if self.folded_length != T or self.rem_folded.dim() != 2:
                raise ValueError(f"folded for length {self.folded_length} and full rows; got {T}, last row")
            P = self.rem_folded
            mixed = self.softmax_scale * attn + self.rem_scaled
        else:
            g, P = self.last_kernels(T)
            mixed = (1.0 - g)[:, None] * attn + g[:, None] * P  # (B, H, T)
        y = (mixed.unsqueeze(2) @ v).reshape(B, D)  # (B, H, 1, hd) -> (B, D)
        y = self.proj(y)
        if not return_attn:
            return y, None
        if P is None:
            P = torch.zeros(self.n_heads, T, device=x.device, dtype=x.dtype)
        return y, {"softmax": attn, "rem": P, "mixed": mixed}

    def _fused(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.masked)  # (B, H, T, hd)
        if not self.has_rem:
            return y
        g, P = self.kernels(q.shape[2])
        g = g[:, None, None]  # (H, 1, 1)
        # (g·P)·V as one matmul per head over the whole batch; broadcasting P over B would copy it B times.
        B, H, T, hd = v.shape
        rem_v = torch.bmm(g * P, v.permute(1, 2, 0, 3).reshape(H, T, B * hd))  # (H, T, B*hd)
        return (1.0 - g) * y + rem_v.view(H, T, B, hd).permute(2, 0, 1, 3)  # (B, H, T, hd)

    def head_report(self) -> list[dict]:
        """Per head: kind, dilation, λ/γ/θ and gate g_h, for reports and the manifest."""
        values = (
            self.rem.values()
            if self.has_rem
            else [{"lambda": None, "gamma": None, "theta": None}] * self.n_heads
        )
        gates = self.gates().detach().cpu().tolist()
        return [
            {"head": h, "kind": kind, "dilation": dilation, **values[h], "gate": gates[h]}
            for h, (kind, dilation) in enumerate(self.head_types)
        ]
