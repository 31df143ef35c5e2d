"""Per-channel standardisation fitted on the training rows."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["StandardScaler"]


class StandardScaler:
    """Per-channel standardisation ``(x - mean) / std`` over the last axis (numpy, float64 stats).

    ``std`` is the population std (ddof=0, as sklearn and Time-Series-Library); a constant channel
    gets std 1.0 so it maps to 0 instead of dividing by zero. ``transform``/``inverse_transform``
    return the input's float dtype (float64 for non-float input).
    """

    def __init__(self, mean: np.ndarray | None = None, std: np.ndarray | None = None) -> None:
        self.mean: np.ndarray | None = None if mean is None else np.asarray(mean, dtype=np.float64)
        self.std: np.ndarray | None = None if std is None else np.asarray(std, dtype=np.float64)
        if (self.mean is None) != (self.std is None):
            raise ValueError("give both mean and std, or neither")
        if self.mean is not None and self.std is not None:
            if self.mean.ndim != 1 or self.mean.shape != self.std.shape:
                raise ValueError(f"mean {self.mean.shape} and std {self.std.shape} must be equal 1-D shapes")
            if not (np.isfinite(self.mean).all() and np.isfinite(self.std).all() and (self.std > 0).all()):
                raise ValueError("mean must be finite and std finite and > 0")

    def fit(self, x: Any) -> StandardScaler:
        """Compute per-channel mean and std of ``x`` [rows, C] (or [..., C])."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] == 0:
            raise ValueError(f"cannot fit a scaler on shape {x.shape}")
        flat = x.reshape(-1, x.shape[-1])
        if flat.shape[0] == 0:
            raise ValueError("cannot fit a scaler on zero rows")
        mean = flat.mean(axis=0)
        std = flat.std(axis=0)
        # Exactly constant channels: the computed std can be a rounding residue (~1e-17), so test the
        # range instead of std == 0, and use the value itself as the mean so it maps to exactly 0.
        constant = np.ptp(flat, axis=0) == 0
        self.mean = np.where(constant, flat[0], mean)
        self.std = np.where(constant, 1.0, std)
        return self

    def _stats(self, x: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.dtype]:
        if self.mean is None or self.std is None:
            raise RuntimeError("StandardScaler is not fitted")
        arr = np.asarray(x)
        dtype = arr.dtype if np.issubdtype(arr.dtype, np.floating) else np.dtype(np.float64)
        if arr.ndim < 1 or arr.shape[-1] != self.mean.shape[0]:
            raise ValueError(f"expected last dimension {self.mean.shape[0]}, got shape {arr.shape}")
        return arr, self.mean, self.std, dtype

    def transform(self, x: Any) -> np.ndarray:
        """Scale ``x`` [..., C]."""
        arr, mean, std, dtype = self._stats(x)
        return ((arr - mean) / std).astype(dtype, copy=False)

    def inverse_transform(self, x: Any) -> np.ndarray:
        """Undo :meth:`transform` on ``x`` [..., C]."""
        arr, mean, std, dtype = self._stats(x)
        return (arr * std + mean).astype(dtype, copy=False)

    def to_dict(self) -> dict[str, list[float]]:
        """JSON-serialisable ``{"mean": [...], "std": [...]}``."""
        if self.mean is None or self.std is None:
            raise RuntimeError("StandardScaler is not fitted")
        return {"mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StandardScaler:
        """Inverse of :meth:`to_dict`."""
        try:
            return cls(mean=d["mean"], std=d["std"])
        except KeyError as exc:
            raise ValueError(f"scaler dict lacks {exc.args[0]!r}") from None

    def __repr__(self) -> str:
        channels = None if self.mean is None else self.mean.shape[0]
        return f"StandardScaler(channels={channels})"
