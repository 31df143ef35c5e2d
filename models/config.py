"""Model configuration: one frozen dataclass, the only object the top-level forecaster takes."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

# Head types of the paper, in the order of the counts k1..k6 (rsa.md §2).
REM_TYPES: tuple[tuple[str, bool], ...] = (
    ("regular", False),
    ("cyclic_cos", False),
    ("cyclic_sin", False),
    ("regular", True),  # dilated
    ("cyclic_cos", True),
    ("cyclic_sin", True),
)


@dataclass(frozen=True)
class ModelConfig:
    input_length: int = 96  # L: the window the model reads; the REM is L×L
    horizon: int = 96  # H: steps forecast
    channels: int = 7  # C: processed independently with shared weights
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 1
    d_ff: int = 64
    dropout: float = 0.1
    # Dropout on the T×T attention matrix: off by default, since drawing a mask for every entry
    # costs more than the whole rest of a training step on a CPU.
    attn_dropout: float = 0.0
    # k1..k6: heads per REM type (regular, cyclic-cos, cyclic-sin, then the dilated three);
    # the remaining n_heads - sum heads are plain softmax heads. All zeros = the baseline.
    rem_heads: tuple[int, int, int, int, int, int] = (2, 1, 1, 0, 0, 0)
    dilation: int = 2  # d of the dilated heads
    masked: bool = False  # encoder over the whole window: symmetric (unmasked) REM
    gate: Literal["layer", "head"] = "layer"  # one μ per layer (paper) or one per head
    mu_init: float = 0.0  # σ(0) = 0.5: start with an even mix of softmax and REM
    # Cyclic heads start at the daily period of hourly data (2π/24); None spreads θ over (0, π).
    theta_init: float | None = 2 * math.pi / 24
    # The baseline replaces the REM with a learned positional encoding; RSA models use none
    # (the REM itself carries the order information).
    positional: Literal["none", "learned"] = "none"
    revin: bool = True  # per-window normalisation (RevIN style) with a learned affine
    linear_residual: bool = True  # a linear map L→H on the normalised input beside the attention stack
    token_kernel: int = 3  # width of the Conv1d that embeds each step with its neighbours
    # Seasonal cycle (CycleNet's residual cycle forecasting): a learned table Q [period, channels] is
    # subtracted from the window and added back to the forecast, aligned by the window's phase.
    # 0: no cycle, and forward takes no phase.
    cycle_period: int = 0
    # How the attention branch reads its tokens out: "flatten" maps all L×d features to H (PatchTST's
    # flatten head); "last" maps only the last step's d features, so the branch must carry the
    # window's history to the last step through attention (the state of an RNN, for the REM heads).
    # "state": one layer read out at the last step only, with no LayerNorm and no FFN: for one layer
    # this is exact and costs O(L) per head (only the last query row is formed), and the REM heads'
    # outputs are the states of their linear RNNs after the whole window (rsa.md §7).
    head: Literal["flatten", "last", "state"] = "flatten"
    # Explicit REM heads, each (kind, dilation, λ or γ, θ): their kinds and starting values, in head
    # order, in place of the rem_heads counts' random starts (a deterministic bank of memories);
    # heads beyond them are plain softmax heads. Empty: rem_heads decides.
    rem_bank: tuple[tuple[str, int, float, float], ...] = ()
    # Covariates (issue 36), standardised by the caller; 0: none of that kind, and forward takes none.
    # Past-only ones are input channels of every window step (added to the step's token), future-known
    # ones make H horizon tokens appended after the window's L (their outputs add to each step's
    # forecast), statics are added to every token; a linear map beside the attention reads all of them
    # as the REM read-out does (models/forecaster.py).
    past_covariates: int = 0  # P: values per window step
    future_covariates: int = 0  # F: values per horizon step (calendar columns included)
    static_covariates: int = 0  # S: values per series (categorical ones one-hot)

    def __post_init__(self) -> None:
        for name in ("input_length", "horizon", "channels", "d_model", "n_heads", "n_layers", "d_ff"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if len(self.rem_heads) != 6 or any(k < 0 for k in self.rem_heads):
            raise ValueError(f"rem_heads must be six non-negative counts, got {self.rem_heads}")
        if sum(self.rem_heads) > self.n_heads:
            raise ValueError(f"sum(rem_heads)={sum(self.rem_heads)} exceeds n_heads={self.n_heads}")
        if self.dilation < 1:
            raise ValueError(f"dilation must be >= 1, got {self.dilation}")
        if self.cycle_period < 0 or self.cycle_period == 1:
            raise ValueError(f"cycle_period must be 0 (off) or >= 2, got {self.cycle_period}")
        if self.token_kernel < 1 or self.token_kernel % 2 == 0:
            raise ValueError(f"token_kernel must be odd and >= 1, got {self.token_kernel}")
        if self.head not in ("flatten", "last", "state"):
            raise ValueError(f"head must be 'flatten', 'last' or 'state', got {self.head!r}")
        if self.head == "state" and self.n_layers != 1:
            raise ValueError(f"head 'state' reads one layer at its last step; n_layers is {self.n_layers}")
        for name in ("past_covariates", "future_covariates", "static_covariates"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.future_covariates and self.head == "state":
            raise ValueError(
                "head 'state' reads the last window step only: it has no horizon tokens for future covariates"
            )
        if self.rem_bank and any(self.rem_heads):
            raise ValueError("set rem_bank or rem_heads, not both")
        if len(self.rem_bank) > self.n_heads:
            raise ValueError(f"rem_bank has {len(self.rem_bank)} heads; n_heads is {self.n_heads}")
        for i, spec in enumerate(self.rem_bank):
            _check_bank_head(i, spec)
        for name in ("dropout", "attn_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")

    @property
    def covariate_width(self) -> int:
        """The covariates' values per window, flattened step-major: L·P + H·F + S."""
        return (
            self.input_length * self.past_covariates
            + self.horizon * self.future_covariates
            + self.static_covariates
        )

    @property
    def sequence_length(self) -> int:
        """Tokens the attention sees: the window's L, and H horizon tokens with future covariates."""
        return self.input_length + (self.horizon if self.future_covariates else 0)

    @property
    def head_types(self) -> list[tuple[str, int]]:
        """(kind, dilation) per head; kind "softmax" for a plain head."""
        if self.rem_bank:
            bank = [(kind, dilation) for kind, dilation, _, _ in self.rem_bank]
            return bank + [("softmax", 1)] * (self.n_heads - len(bank))
        types = [
            (kind, self.dilation if dilated else 1)
            for (kind, dilated), k in zip(REM_TYPES, self.rem_heads, strict=True)
            for _ in range(k)
        ]
        return types + [("softmax", 1)] * (self.n_heads - len(types))

    def baseline(self) -> ModelConfig:
        """The same network without REM heads, with a positional encoding instead."""
        return dataclasses.replace(self, rem_heads=(0, 0, 0, 0, 0, 0), rem_bank=(), positional="learned")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        d = dict(d)
        if "rem_heads" in d:
            d["rem_heads"] = tuple(d["rem_heads"])
        if "rem_bank" in d:
            d["rem_bank"] = tuple((str(k), int(dil), float(a), float(b)) for k, dil, a, b in d["rem_bank"])
        return cls(**d)


def _check_bank_head(i: int, spec: tuple[str, int, float, float]) -> None:
    kind, dilation, a, _ = spec
    if kind not in ("regular", "cyclic_cos", "cyclic_sin"):
        raise ValueError(f"rem_bank[{i}]: kind must be regular, cyclic_cos or cyclic_sin, got {kind!r}")
    if dilation < 1:
        raise ValueError(f"rem_bank[{i}]: dilation must be >= 1, got {dilation}")
    if kind == "regular" and not -1.0 < a < 1.0:
        raise ValueError(f"rem_bank[{i}]: λ must be in (-1, 1), got {a}")
    if kind != "regular" and not 0.0 < a < 1.0:
        raise ValueError(f"rem_bank[{i}]: γ must be in (0, 1), got {a}")
