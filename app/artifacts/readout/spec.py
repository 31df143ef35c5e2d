"""The global read-out's settings, as a version's manifest carries them (its `readout` block): the REM
heads and their kernels over a window, the input length, the fewest values forecast and how the fit runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
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
class Lift:
    """A fixed random layer over the read-out's features, an extreme learning machine's hidden layer (Huang
    et al. 2006): relu(((f − mean) / std) @ R + b) is appended to the features f and the ridge reads both,
    so the read-out is nonlinear in the window and still fitted in closed form (refittable on request).
    R [F, width] and b [width] are drawn from `seed` (`random_layer`); `mean` and `std` [F] are the
    training windows' features' (fixed once the model is fitted: a refit keeps them)."""

    width: int
    seed: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    def apply(self, f: np.ndarray) -> np.ndarray:
        """The layer's outputs [n, width] of features f [n, F]."""
        R, b = random_layer(len(self.mean), self.width, self.seed)
        z = (f - np.asarray(self.mean)) / np.asarray(self.std)
        return np.maximum(z @ R + b, 0.0)

    @classmethod
    def from_json(cls, d: Any) -> Lift:
        return cls(int(d["width"]), int(d["seed"]), tuple(map(float, d["mean"])), tuple(map(float, d["std"])))


@lru_cache(maxsize=8)
def random_layer(n_in: int, width: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(R [n_in, width] with unit-variance entries scaled by 1/sqrt(n_in), b [width] uniform in [-1, 1]),
    drawn by splitmix64 from `seed`: the same numbers on every machine and numpy version (numpy's own
    generators promise no stream across versions, and the graph's constant must equal a refit's)."""
    n = n_in * width + width
    z = np.uint64(seed) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53 * 2.0 - 1.0  # uniform in [-1, 1)
    R = u[: n_in * width].reshape(n_in, width) * np.sqrt(3.0 / n_in)  # variance 1 / n_in
    R.setflags(write=False)
    b = u[n_in * width :].copy()
    b.setflags(write=False)
    return R, b


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
    lift: Lift | None = None  # a fixed random layer over the features (None: the features alone)
    # A window below zero read as its mirror image (readout.window_scales): set where no training series
    # went below zero, so that such a model forecasts a series below zero as the mirror of one above.
    # False in a manifest written before it (the block without the field).
    mirror: bool = False


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
                lift=None if d.get("lift") is None else Lift.from_json(d["lift"]),
                mirror=bool(d.get("mirror", False)),
            )
            heads = tuple((str(k), int(dl), float(v), float(th)) for k, dl, v, th in d["heads"])
            return cls(heads, int(d["input_length"]), int(d["min_history"]), fit)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"the readout block is incomplete or malformed: {e!r}") from None
