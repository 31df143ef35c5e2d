"""A deterministic bank of REM heads from a compact spec (the ``model.rem_bank`` setting).

    rem_bank:
      regular: [0.5, 0.9, -0.5]                    # λ per head (dilation 1)
      cyclic: {harmonics: [1, 2], gamma: [0.9]}     # a cos and a sin head per (harmonic, γ), θ = 2πk/period
                                                    # (no sin head at k = period / 2: it would be 0)
      dilated: {lambda: [0.5, 0.9]}                 # regular heads on the lattice of one period

The period is the model's seasonal cycle (``cycle_period``, itself possibly read off the data), so one
spec serves hourly, daily or any other data; ``dilation`` in ``dilated`` overrides it.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["expand_bank"]

_KEYS = {"regular", "cyclic", "dilated"}


def expand_bank(spec: Any, period: int) -> list[list[Any]]:
    """The spec as ModelConfig.rem_bank rows [kind, dilation, λ or γ, θ]; a list passes through."""
    if isinstance(spec, list):
        return spec
    if not isinstance(spec, dict) or set(spec) - _KEYS:
        raise ValueError(f"model.rem_bank must be a list of heads or a mapping with keys {sorted(_KEYS)}")
    cyclic = spec.get("cyclic") or {}
    dilated = spec.get("dilated") or {}
    needs_period = bool(cyclic) or (bool(dilated) and "dilation" not in dilated)
    if needs_period and period < 2:
        raise ValueError(
            "model.rem_bank's cyclic and dilated heads follow the seasonal period; "
            "set model.cycle_period (or auto) to a period of at least 2"
        )
    rows: list[list[Any]] = [["regular", 1, float(lam), 0.0] for lam in spec.get("regular") or []]
    harmonics, gammas = cyclic.get("harmonics", []), cyclic.get("gamma", [])
    pairs = [(k, 2 * math.pi * k / period, float(g)) for k in harmonics for g in gammas]
    # All cos heads, then all sin heads: heads of one kind in a row share one module (models.rem.REMBank).
    # At the Nyquist harmonic (2k = period, θ = π) the sine head is γ^t·sin(tπ) = 0: no head at all.
    rows += [["cyclic_cos", 1, gamma, theta] for _, theta, gamma in pairs]
    rows += [["cyclic_sin", 1, gamma, theta] for k, theta, gamma in pairs if 2 * k != period]
    step = int(dilated.get("dilation", period))
    rows += [["regular", step, float(lam), 0.0] for lam in dilated.get("lambda", [])]
    return rows
