"""A last-step model's read-out in closed form: its features for every window, computed exactly as the
network computes them but cheaply, and ridge read-outs refitted on them (refit ablations, bank sweeps,
rolling-origin validation).

The network of `model.head: state` (rsa.md §7) embeds each channel's normalised window u [L] with a
3-tap convolution and projects it to q, k, v; a linear map of a 3-tap filter is a 3-tap filter, so
q, k and v of every head are 3-tap filters of u (plus a bias, plus a per-step term with a positional
encoding). The features the head reads are then

    z_T + proj( (1 − g_h) · softmax_h · v_h + g_h · P_h · v_h )      (P_h: the REM's last row)

where P_h · v_h is the state of head h's linear RNN after the window. Computing it this way costs 3
multiply-adds per step and head instead of the network's d per step and head (30× less at d = 90),
and it is exact (tests/export/test_readout.py checks it against `RSAForecaster.encode`).

Every fit here is `export.ridge`'s weighted ridge regression on the model's own loss (the MSE on
the scaled data); `mode` chooses what the read-out sees:

- ``model``: the network as it is (its gates): the step-0 model's read-out, as `fit_head` fits it;
- ``rem``: the REM heads' recurrences alone (softmax weight 0, REM weight 1), the read-out refitted;
- ``both``: the two halves mixed as RSA mixes them, at the gate σ(3) ≈ 0.953 of the REM heads
  (`BOTH_MU`), the read-out refitted;
- ``softmax``: the softmax half alone (REM weight 0, softmax weight 1), the read-out refitted;
- ``window``: the normalised window itself (full least squares L → H, the same RevIN and cycle);
- ``last``: the window's last normalised value alone (a level forecast, refitted).

Rolling origins (what variants are chosen on): the validation windows fall in `ORIGINS` consecutive
blocks; for block k the read-out is refitted on the training windows and every validation window whose
targets end before the block's first target step, then scored on the block. Origin 0 is the plain
train-only fit. Test windows are scored with the train-only fit and never used to choose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from export.data import Dataset, Split
from export.ridge import NormalEquations, normalised_problem
from models import RSAForecaster

__all__ = [
    "ABLATION_MODES",
    "BOTH_MU",
    "MODES",
    "ORIGINS",
    "Features",
    "fit_readout",
    "last_step_features",
    "origin_blocks",
    "readout_report",
    "split_features",
]

Mode = Literal["model", "rem", "both", "softmax", "window", "last"]
MODES: tuple[str, ...] = ("model", "rem", "both", "softmax", "window", "last")
# What a training run reports beside its own step 0 (export.train, `readout_ablation`).
ABLATION_MODES: tuple[str, ...] = ("rem", "both", "softmax", "last")
ORIGINS = 4
# The REM weight σ(μ) of mode "both": σ(3) ≈ 0.953, the gate RSA's long-window recipe started its REM
# heads at (version 4); the softmax half gets the rest. A refitted read-out absorbs any overall scale,
# so what this weighs is how much of each half reaches the head through the mixing.
BOTH_MU = 3.0


@dataclass(frozen=True)
class Features:
    """One split's read-out problem: features [n·C, F], normalised targets [n·C, H] and their weights
    [n·C, 1] (row r is window r // C, channel r % C), as `export.ridge.normalised_problem` defines them."""

    f: Tensor
    t: Tensor
    w: Tensor
    channels: int

    def rows(self, first: int, last: int) -> slice:
        """The rows of windows [first, last)."""
        return slice(first * self.channels, last * self.channels)


def _weights(model: RSAForecaster, mode: str) -> tuple[Tensor, Tensor]:
    """(REM weight, softmax weight) per head for a feature mode."""
    attn = model.attentions()[0]
    g = attn.gates().detach()
    is_rem = torch.tensor([kind != "softmax" for kind, _ in attn.head_types], dtype=g.dtype)
    if mode == "model":
        return g, 1.0 - g
    if mode == "rem":
        return is_rem, torch.zeros_like(g)
    if mode == "both":
        both = is_rem * torch.sigmoid(torch.tensor(BOTH_MU, dtype=g.dtype))
        return both, 1.0 - both
    if mode == "softmax":
        return torch.zeros_like(g), torch.ones_like(g)
    raise ValueError(f"no network features for mode {mode!r}")


@torch.no_grad()
def last_step_features(model: RSAForecaster, u: Tensor, mode: str = "model") -> Tensor:
    """The features [N, d] a `head: state` model's head reads for normalised inputs u [N, L] (after
    cycle and RevIN, as `RSAForecaster.encode` forms them), with the gates of `mode`."""
    cfg = model.cfg
    if cfg.head != "state":
        raise ValueError(
            f"closed-form features need a model read at its last step (head 'state'), not {cfg.head!r}"
        )
    attn = model.attentions()[0]
    d, n_heads, hd = cfg.d_model, attn.n_heads, attn.head_dim
    L, k = u.shape[1], cfg.token_kernel
    rem_w, soft_w = _weights(model, mode)
    we, be = model.embed.weight[:, 0, :], model.embed.bias  # [d, k], [d]
    assert be is not None  # the embedding is an nn.Conv1d with its default bias
    wqkv, bqkv = attn.qkv.weight, attn.qkv.bias  # [3d, d], [3d]
    taps, bias = wqkv @ we, wqkv @ be + bqkv  # q, k, v as 3-tap filters of u: [3d, k], [3d]
    pos = model.pos[0] if model.pos is not None else None  # [L, d]
    u_pad = F.pad(u[:, None, :], (k // 2, k // 2), mode="replicate")  # [N, 1, L + k - 1]
    z_last = u_pad[:, 0, L - 1 :] @ we.T + be  # the embedding at the last step [N, d]
    if pos is not None:
        z_last = z_last + pos[-1]
    y = torch.zeros(u.shape[0], d, dtype=u.dtype)
    if bool((rem_w != 0).any()):
        # P_h · v_h without forming v: Σ_t A_v[·, t] (P_h · u shifted by t) + c_v Σ_j P_h[j].
        _, P = attn.last_kernels(L)  # [Hh, L]
        P = P.detach().to(u.dtype)
        per_dim = torch.arange(d) // hd  # the head of each of the d value dimensions
        av, cv = taps[2 * d :], bias[2 * d :]
        state = (
            sum((u_pad[:, 0, t : t + L] @ P.T)[:, per_dim] * av[:, t] for t in range(k))
            + cv * P.sum(1)[per_dim]
        )
        if pos is not None:
            state = state + (P @ (pos @ wqkv[2 * d :].T))[per_dim, torch.arange(d)]
        y = y + rem_w[per_dim] * state
    if bool((soft_w != 0).any()):
        kv = F.conv1d(u_pad, taps[d:, None, :], bias[d:])  # [N, 2d, L]
        if pos is not None:
            kv = kv + (pos @ wqkv[d:].T).T
        q = u_pad[:, 0, L - 1 :] @ taps[:d].T + bias[:d]  # the last query [N, d]
        if pos is not None:
            q = q + pos[-1] @ wqkv[:d].T
        keys, values = kv[:, :d].view(-1, n_heads, hd, L), kv[:, d:].view(-1, n_heads, hd, L)
        scores = (q.view(-1, n_heads, hd, 1) * keys).sum(2) / math.sqrt(hd)  # [N, Hh, L]
        soft = (torch.softmax(scores, -1)[:, :, None, :] * values).sum(-1).reshape(-1, d)
        y = y + soft_w[torch.arange(d) // hd] * soft
    return z_last + attn.proj(y)


@torch.no_grad()
def split_features(model: RSAForecaster, split: Split, mode: str = "model", batch: int = 64) -> Features:
    """Every window of `split` as a read-out problem for `mode` (the model in eval mode, as it is)."""
    was_training = model.training
    model.eval()
    fs, ts, ws = [], [], []
    for idx in torch.arange(split.num_windows).split(batch):
        _, _, t, w, u = normalised_problem(model, split, idx)
        if mode == "window":
            f = u
        elif mode == "last":
            f = u[:, -1:]
        else:
            f = last_step_features(model, u, mode)
        fs.append(f)
        ts.append(t)
        ws.append(w)
    model.train(was_training)
    return Features(torch.cat(fs), torch.cat(ts), torch.cat(ws), split.data.shape[1])


def _equations(parts: list[Features | tuple[Features, slice]], chunk: int = 8192) -> NormalEquations:
    first = parts[0] if isinstance(parts[0], Features) else parts[0][0]
    eq = NormalEquations(first.f.shape[1], first.t.shape[1])
    for part in parts:
        feats, rows = (part, slice(None)) if isinstance(part, Features) else part
        f, t, w = feats.f[rows], feats.t[rows], feats.w[rows]
        for i in range(0, f.shape[0], chunk):
            eq.add(f[i : i + chunk], t[i : i + chunk], w[i : i + chunk])
    return eq


def fit_readout(train: Features, ridge: float) -> tuple[Tensor, float]:
    """The ridge read-out [F + 1, H] (last row the bias) on `train`, and its MSE there."""
    return _equations([train]).solve(ridge)


def mse(sol: Tensor, feats: Features, rows: slice = slice(None)) -> float:
    """MSE on the scaled data of the read-out `sol` over `rows` (every step and channel)."""
    f, t, w = feats.f[rows].double(), feats.t[rows].double(), feats.w[rows].double()
    err = f @ sol[:-1] + sol[-1] - t
    return float((err * err * w).sum() / err.numel())


def origin_blocks(n_windows: int, origins: int = ORIGINS) -> list[tuple[int, int]]:
    """The validation windows' `origins` consecutive blocks [first, last)."""
    edges = [round(k * n_windows / origins) for k in range(origins + 1)]
    return list(pairwise(edges))


def rolling_origins(train: Features, val: Features, horizon: int, ridge: float) -> list[float]:
    """Per origin block of `val`, the MSE of the read-out refitted on the training windows and every
    validation window whose targets end before the block's first target step."""
    out = []
    n = val.f.shape[0] // val.channels
    for first, last in origin_blocks(n):
        seen = max(0, first - horizon + 1)  # window i's targets end at i + H - 1 < first
        parts: list[Features | tuple[Features, slice]] = [train]
        if seen:
            parts.append((val, val.rows(0, seen)))
        sol, _ = _equations(parts).solve(ridge)
        out.append(mse(sol, val, val.rows(first, last)))
    return out


def readout_report(
    model: RSAForecaster,
    ds: Dataset,
    ridge: float,
    modes: tuple[str, ...] = MODES,
    features: Callable[[RSAForecaster, Split, str], Features] = split_features,
) -> dict[str, dict[str, float | list[float]]]:
    """Per mode, the read-out refitted on the training windows: train, validation (every window, and
    per rolling origin with their mean) and test MSE; the test MSE is reported, never used to choose."""
    out: dict[str, dict[str, float | list[float]]] = {}
    for mode in modes:
        train = features(model, ds.train, mode)
        sol, train_mse = fit_readout(train, ridge)
        val = features(model, ds.val, mode)
        origins = rolling_origins(train, val, ds.val.horizon, ridge)
        del train
        out[mode] = {
            "features": int(val.f.shape[1]),
            "train_mse": train_mse,
            "val_mse": mse(sol, val),
            "val_origins": origins,
            "val_origins_mean": sum(origins) / len(origins),
            "test_mse": mse(sol, features(model, ds.test, mode)),
        }
    return out
