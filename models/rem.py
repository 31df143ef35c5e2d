"""Recurrence Encoding Matrices (REM), rsa.md §1–2.

A REM P is the T×T matrix of a tiny linear RNN unrolled over the sequence: entry (i, j) weights
input j in the state at step i by f(t), t the lag i − j counted on the dilation lattice.

    regular      f(t) = λ^t             λ = tanh(η)
    cyclic_cos   f(t) = γ^t cos(tθ)     γ = sigmoid(ν)
    cyclic_sin   f(t) = γ^t sin(tθ)

Masked (causal): P_ij = f(i − j) for i > j, else 0.  Unmasked: P_ij = f(|i − j|) for i ≠ j, 0 on the
diagonal.  Dilation d: only lags that d divides are non-zero, with t = |i − j| / d.

Powers are always taken with integer exponents (never λ^(t/d)), so negative λ is exact and finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch
from torch import Tensor, nn

__all__ = [
    "REM_KINDS",
    "CyclicCosREM",
    "CyclicSinREM",
    "REMBank",
    "RegularREM",
    "build_rem",
    "cyclic_cos_kernel",
    "cyclic_sin_kernel",
    "lag_lattice",
    "lag_row",
    "regular_kernel",
]


def lag_lattice(
    length: int,
    dilation: int = 1,
    masked: bool = True,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """Lags on the dilation lattice and where the REM is non-zero.

    Returns (t, on): t [T, T] the lag |i − j| / d where d divides it (1 elsewhere, a harmless
    placeholder exponent), on [T, T] 1.0 where P_ij is non-zero, 0.0 elsewhere.
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    if dilation < 1:
        raise ValueError(f"dilation must be >= 1, got {dilation}")
    idx = torch.arange(length, device=device)
    lag = idx[:, None] - idx[None, :]  # (T, T) signed lag i − j, integer
    on = (lag != 0) & (lag % dilation == 0)
    if masked:
        on = on & (lag > 0)
    t = torch.where(on, lag.abs() // dilation, torch.ones_like(lag))
    return t.to(dtype), on.to(dtype)


def lag_row(
    length: int,
    dilation: int = 1,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """The last row of ``lag_lattice`` (query i = T − 1), masked or not alike (no j lies after it):
    (t [T], on [T]). A model read out at its last step needs only this row of each REM."""
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    if dilation < 1:
        raise ValueError(f"dilation must be >= 1, got {dilation}")
    lag = (length - 1) - torch.arange(length, device=device)  # (T,) lag of each key from the last query
    on = (lag > 0) & (lag % dilation == 0)
    t = torch.where(on, lag // dilation, torch.ones_like(lag))
    return t.to(dtype), on.to(dtype)


# One function per REM kind: parameters broadcast against the lag matrix, e.g. lam [n, 1, 1].
def regular_kernel(lam: Tensor, t: Tensor) -> Tensor:
    """f(t) = λ^t, exact for negative λ because t holds integers."""
    return torch.pow(lam, t)


def cyclic_cos_kernel(gamma: Tensor, theta: Tensor, t: Tensor) -> Tensor:
    """f(t) = γ^t cos(tθ): the real part of (γ e^{iθ})^t."""
    return torch.pow(gamma, t) * torch.cos(t * theta)


def cyclic_sin_kernel(gamma: Tensor, theta: Tensor, t: Tensor) -> Tensor:
    """f(t) = γ^t sin(tθ): the imaginary part of (γ e^{iθ})^t."""
    return torch.pow(gamma, t) * torch.sin(t * theta)


def _as_tensor(x: float | Tensor | None, name: str, kind: str, dtype: torch.dtype) -> Tensor:
    if x is None:
        raise ValueError(f"build_rem({kind!r}) needs {name}")
    return torch.as_tensor(x, dtype=dtype)


def build_rem(
    kind: str,
    length: int,
    *,
    lam: float | Tensor | None = None,
    gamma: float | Tensor | None = None,
    theta: float | Tensor | None = None,
    dilation: int = 1,
    masked: bool = True,
    dtype: torch.dtype = torch.float64,
) -> Tensor:
    """The [length, length] REM of one head.

    kind: "regular" (needs lam), "cyclic_cos" or "cyclic_sin" (need gamma and theta); dilation > 1
    gives the dilated type.  Parameters are the constrained values (λ ∈ (−1, 1), γ ∈ (0, 1)); tensors
    keep their autograd graph.
    """
    t, on = lag_lattice(length, dilation, masked, dtype=dtype)
    if kind == "regular":
        f = regular_kernel(_as_tensor(lam, "lam", kind, dtype), t)
    elif kind == "cyclic_cos":
        f = cyclic_cos_kernel(
            _as_tensor(gamma, "gamma", kind, dtype), _as_tensor(theta, "theta", kind, dtype), t
        )
    elif kind == "cyclic_sin":
        f = cyclic_sin_kernel(
            _as_tensor(gamma, "gamma", kind, dtype), _as_tensor(theta, "theta", kind, dtype), t
        )
    else:
        raise ValueError(f"unknown REM kind {kind!r}; expected one of {sorted(REM_KINDS)}")
    return f * on


class _REM(nn.Module):
    """n heads of one REM kind, each with its own parameters. forward(length) -> [n, T, T]."""

    kind: str

    def __init__(
        self,
        n_heads: int,
        dilation: int = 1,
        masked: bool = False,
        init: Sequence[tuple[float, float]] | None = None,
    ):
        super().__init__()
        self.n_heads, self.dilation, self.masked = n_heads, dilation, masked
        if init is not None and len(init) != n_heads:
            raise ValueError(f"init has {len(init)} values for {n_heads} heads")

    def kernel(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, length: int) -> Tensor:
        p = next(self.parameters())
        t, on = lag_lattice(length, self.dilation, self.masked, device=p.device, dtype=p.dtype)
        return self.kernel(t) * on  # (n, T, T)

    def last_row(self, length: int) -> Tensor:
        """Row T − 1 of forward(length), without forming the T×T matrix: (n, T)."""
        p = next(self.parameters())
        t, on = lag_row(length, self.dilation, device=p.device, dtype=p.dtype)
        return (self.kernel(t[None, :]) * on)[:, 0]  # kernel broadcasts (n, 1, 1) against (1, T)

    def values(self) -> list[dict[str, float | None]]:
        """The constrained parameters per head, for reports and the manifest."""
        raise NotImplementedError


class RegularREM(_REM):
    kind = "regular"

    def __init__(
        self,
        n_heads: int,
        dilation: int = 1,
        masked: bool = False,
        init: Sequence[tuple[float, float]] | None = None,
    ):
        super().__init__(n_heads, dilation, masked, init=init)
        if init is not None:  # λ given: η = atanh(λ)
            self.eta = nn.Parameter(torch.atanh(torch.tensor([a for a, _ in init], dtype=torch.float32)))
            return
        # η ~ U(1, 2) with a random sign: |λ| ≈ 0.76–0.96, decaying and alternating memories both.
        sign = torch.where(torch.rand(n_heads) < 0.5, -1.0, 1.0)
        self.eta = nn.Parameter(sign * torch.empty(n_heads).uniform_(1.0, 2.0))

    @property
    def lam(self) -> Tensor:
        return torch.tanh(self.eta)

    def kernel(self, t: Tensor) -> Tensor:
        return regular_kernel(self.lam[:, None, None], t)

    def values(self) -> list[dict[str, float | None]]:
        return [{"lambda": float(v), "gamma": None, "theta": None} for v in self.lam.detach().cpu()]


class _CyclicREM(_REM):
    """A REM with a rotation θ per head; θ starts at `theta_init` when given (and no `init`)."""

    def __init__(
        self,
        n_heads: int,
        dilation: int = 1,
        masked: bool = False,
        theta_init: float | None = None,
        init: Sequence[tuple[float, float]] | None = None,
    ):
        super().__init__(n_heads, dilation, masked, init=init)
        if init is not None:  # (γ, θ) given: ν = logit(γ)
            self.nu = nn.Parameter(torch.logit(torch.tensor([a for a, _ in init], dtype=torch.float32)))
            self.theta = nn.Parameter(torch.tensor([b for _, b in init], dtype=torch.float32))
            return
        self.nu = nn.Parameter(torch.empty(n_heads).uniform_(1.0, 2.0))  # γ ≈ 0.73–0.88
        if theta_init is None:  # spread over (0, π), ends excluded: θ = π makes sin(tθ) vanish
            theta = torch.arange(1, n_heads + 1, dtype=torch.float32) * (math.pi / (n_heads + 1))
        else:
            theta = torch.full((n_heads,), float(theta_init))
        self.theta = nn.Parameter(theta)

    @property
    def gamma(self) -> Tensor:
        return torch.sigmoid(self.nu)

    def values(self) -> list[dict[str, float | None]]:
        return [
            {"lambda": None, "gamma": float(g), "theta": float(th)}
            for g, th in zip(self.gamma.detach().cpu(), self.theta.detach().cpu(), strict=True)
        ]


class CyclicCosREM(_CyclicREM):
    kind = "cyclic_cos"

    def kernel(self, t: Tensor) -> Tensor:
        return cyclic_cos_kernel(self.gamma[:, None, None], self.theta[:, None, None], t)


class CyclicSinREM(_CyclicREM):
    kind = "cyclic_sin"

    def kernel(self, t: Tensor) -> Tensor:
        return cyclic_sin_kernel(self.gamma[:, None, None], self.theta[:, None, None], t)


REM_KINDS: dict[str, type[_REM]] = {
    "regular": RegularREM,
    "cyclic_cos": CyclicCosREM,
    "cyclic_sin": CyclicSinREM,
}


class REMBank(nn.Module):
    """The REMs of every head of a layer, in head order: forward(length) -> [n_heads, T, T].

    head_types is a list of (kind, dilation); kind "softmax" marks a plain head, whose REM is zero.
    Consecutive heads of one (kind, dilation) share a module, each head keeping its own parameters.
    """

    def __init__(
        self,
        head_types: Sequence[tuple[str, int]],
        masked: bool = False,
        theta_init: float | None = None,
        init: Sequence[tuple[float, float]] | None = None,
    ):
        """init: the starting (λ or γ, θ) of each REM head in head order (softmax heads skipped);
        None draws them at random (θ from theta_init)."""
        super().__init__()
        self.head_types = list(head_types)
        self.groups = nn.ModuleList()
        self.slots: list[tuple[int, int]] = []  # (first head, n heads) of each group
        h = 0
        while h < len(self.head_types):
            kind, dilation = self.head_types[h]
            n = 1
            while h + n < len(self.head_types) and self.head_types[h + n] == (kind, dilation):
                n += 1
            if kind != "softmax":
                done = sum(k for _, k in self.slots)  # REM heads before this group
                values = None if init is None else init[done : done + n]
                cls = REM_KINDS[kind]
                if issubclass(cls, _CyclicREM):  # θ is the cyclic kinds' alone
                    self.groups.append(cls(n, dilation, masked, theta_init=theta_init, init=values))
                else:
                    self.groups.append(cls(n, dilation, masked, init=values))
                self.slots.append((h, n))
            h += n
        self.n_heads = len(self.head_types)
        if not self.groups:
            raise ValueError("REMBank needs at least one REM head; a layer of plain heads has no bank")

    def _rems(self) -> list[_REM]:
        """The groups as what they are (a ModuleList's items read as plain Modules to a type checker)."""
        return cast("list[_REM]", list(self.groups))

    def forward(self, length: int) -> Tensor:
        p = next(self.parameters())
        out = torch.zeros(self.n_heads, length, length, device=p.device, dtype=p.dtype)
        for (first, n), group in zip(self.slots, self.groups, strict=True):
            out[first : first + n] = group(length)
        return out  # (H, T, T)

    def last_row(self, length: int) -> Tensor:
        """Row T − 1 of every head's REM: (H, T), zeros for softmax heads."""
        p = next(self.parameters())
        out = torch.zeros(self.n_heads, length, device=p.device, dtype=p.dtype)
        for (first, n), group in zip(self.slots, self._rems(), strict=True):
            out[first : first + n] = group.last_row(length)
        return out

    def values(self) -> list[dict[str, float | None]]:
        """Per head: λ/γ/θ (None where the kind has no such parameter, or for a softmax head)."""
        out: list[dict[str, float | None]] = [{"lambda": None, "gamma": None, "theta": None}] * self.n_heads
        for (first, n), group in zip(self.slots, self._rems(), strict=True):
            out[first : first + n] = group.values()
        return out
