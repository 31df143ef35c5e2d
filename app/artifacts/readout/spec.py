"""The global read-out's settings, as a version's manifest carries them (its `readout` block): the REM
heads and their kernels over a window, the input length, the fewest values forecast and how the fit runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

READOUT_SCHEMA = 1  # of the manifest's `readout` block


def rem_kernels(heads: Sequence[Sequence[Any]], length: int) -> np.ndarray:
    """The last rows [K, L] of REM heads (rows [kind, dilation, λ or γ, θ], export/bank.py's
    `expand_bank`) over a window of `length` steps, as models/rem.py computes them (`lag_row`: lag > 0 on
    each head's lattice; λ^t, γ^t·cos(tθ), γ^t·sin(tθ)), each row scaled to unit norm so that one ridge
    penalty treats them alike."""
    rows = []
    lag = (length - 1) - np.arange(length)
    for kind, dilation, value, theta in heads:
        on = (lag > 0) & (lag % int(dilation) == 0)
        t = np.where(on, lag // int(dilation), 1).astype(np.float64)
        if kind == "regular":
            k = np.power(float(value), t)
        elif kind == "cyclic_cos":
            k = np.power(float(value), t) * np.cos(t * float(theta))
        else:
            k = np.power(float(value), t) * np.sin(t * float(theta))
        k = np.where(on, k, 0.0)
        norm = float(np.linalg.norm(k))
        rows.append(k / norm if norm > 0 else k)
    return np.array(rows, dtype=np.float64).reshape(-1, length)


@dataclass(frozen=True)
class FitSettings:
    """How the read-out is fitted (export/global_models/config.py's `PanelConfig` says why each is what it
    is)."""

    horizon: int
    period: int
    n_lags: int
    ridge: float
    weighting: str  # "series" or "window"
    train_min: int  # observed values a training window needs
    row_scale: str  # "level" or "mase"
    mase_floor: float
    irls: int
    irls_floor: float


@dataclass(frozen=True)
class ReadoutSpec:
    """What a refit needs, as the manifest's `readout` block: the REM heads, the input length, the
    fewest values forecast, and the fit's settings."""

    heads: tuple[tuple[str, int, float, float], ...]
    input_length: int
    min_history: int
    fit: FitSettings

    def kernels(self) -> np.ndarray:
        return rem_kernels(self.heads, self.input_length)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": READOUT_SCHEMA,
            "heads": [list(h) for h in self.heads],
            "input_length": self.input_length,
            "min_history": self.min_history,
            **asdict(self.fit),
        }

    @classmethod
    def from_json(cls, d: Any) -> ReadoutSpec:
        """ValueError saying what is wrong when `d` is not a `readout` block of this schema."""
        if not isinstance(d, dict) or d.get("schema") != READOUT_SCHEMA:
            found = d.get("schema") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"not a readout block of schema {READOUT_SCHEMA} (found {found!r})")
        try:
            fit = FitSettings(
                horizon=int(d["horizon"]),
                period=int(d["period"]),
                n_lags=int(d["n_lags"]),
                ridge=float(d["ridge"]),
                weighting=str(d["weighting"]),
                train_min=int(d["train_min"]),
                row_scale=str(d["row_scale"]),
                mase_floor=float(d["mase_floor"]),
                irls=int(d["irls"]),
                irls_floor=float(d["irls_floor"]),
            )
            heads = tuple((str(k), int(dl), float(v), float(th)) for k, dl, v, th in d["heads"])
            return cls(heads, int(d["input_length"]), int(d["min_history"]), fit)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"the readout block is incomplete or malformed: {e!r}") from None
