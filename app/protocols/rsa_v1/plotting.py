"""PNG heatmaps of attention matrices. matplotlib (Agg, object API, no pyplot) is imported on first use.

How to read them (docs/examples/README.md has a worked example):

- **Colour scales.** Softmax weights are never negative and sum to 1 over the keys, so over L = 512 keys
  they sit near 1/512 ≈ 0.002: a sequential map (dark = small, bright = large) between the panel's 1st
  and 99th percentiles shows their structure, where a scale fixed at the extremes showed a flat field (or,
  with one weight of 1.0, one bright cell and the rest black). REM and mixed weights can be negative
  (alternating and cyclic memories): a diverging map centred on 0 (red positive, blue negative) up to
  the 99th percentile of their magnitude. Values beyond the limits take the end colours; the colour bar's
  arrows mark that.
- **The gate.** Each head mixes `(1 − g)·softmax + g·REM`; the figure says g once when every head of a
  layer has the same (the shipped model: 0.953, so "mixed" is 95% the REM and looks like it), else in
  each head's label.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from app.protocols.rsa_v1.schemas import (
    AttentionResponse,
    HeadAttention,
    KernelShare,
    LayerAttention,
    MatrixName,
)

_MAX_PANELS = 256  # a figure beyond this is unreadable anyway
_DPI = 100
_PERCENTILES = (1.0, 99.0)
_KIND = {"regular": "reg", "cyclic_cos": "cos", "cyclic_sin": "sin", "softmax": "softmax"}


def colour_scale(values: Any) -> tuple[str, float, float]:
    """The colour map and limits of a panel: sequential between the 1st and 99th percentiles of the
    positive weights for non-negative ones (softmax; a causal mask's zeros left out), diverging and
    symmetric up to the 99th percentile of |value| for signed ones (REM, mixed). Never an empty range."""
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    data = data[np.isfinite(data)]
    if data.size == 0:
        return "viridis", 0.0, 1.0
    if data.min() >= 0:
        # Over the weights a query can give (> 0): a causal mask's zeros would drag the low end to 0.
        positive = data[data > 0]
        low, high = (float(v) for v in np.percentile(positive if positive.size else data, _PERCENTILES))
        if high <= low:  # a constant panel (every weight 1/L): a range around it
            low, high = low - max(abs(low), 1e-12) * 0.05, high + max(abs(high), 1e-12) * 0.05
        return "viridis", low, high
    limit = float(np.percentile(np.abs(data), _PERCENTILES[1])) or float(np.abs(data).max()) or 1.0
    return "RdBu_r", -limit, limit


def _scale_label(cmap: str) -> str:
    return "1st-99th percentile" if cmap == "viridis" else "±99th percentile of |w|"


def _colour_bar(
    figure: Any, image: Any, ax: Any, cmap: str, *, shrink: float, size: float, ticks: bool = True
) -> None:
    """A panel's colour bar beside `ax`, labelled with its scale (`colour_scale`), its arrows marking the
    values beyond the limits; its tick labels at `size` too unless `ticks` is False."""
    bar = figure.colorbar(image, ax=ax, shrink=shrink, extend="both")
    bar.set_label(_scale_label(cmap), fontsize=size)
    if ticks:
        bar.ax.tick_params(labelsize=size)


def _png(figure: Any) -> bytes:
    """The figure as PNG bytes at the figures' resolution."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def shared_gate(layer: LayerAttention) -> float | None:
    """The gate every head of `layer` has, when they agree to 3 significant digits; else None."""
    gates = {f"{h.gate:.3g}" for h in layer.heads if h.gate is not None and h.kind != "softmax"}
    if len(gates) != 1:
        return None
    return next(h.gate for h in layer.heads if h.gate is not None and h.kind != "softmax")


def gate_legend(layers: Sequence[LayerAttention]) -> str:
    """One line saying what the gate does to 'mixed', per layer."""
    parts = []
    for layer in layers:
        g = shared_gate(layer)
        if g is None:
            parts.append(f"layer {layer.layer}: gate g per head (in its label)")
        else:
            parts.append(
                f"layer {layer.layer}: gate g = {g:.3g} on every REM head, so mixed = {1 - g:.3g}·softmax + "
                f"{g:.3g}·REM" + (": mixed looks like REM" if g >= 0.8 else "")
            )
    return "; ".join(parts)


def head_label(head: HeadAttention, with_gate: bool) -> str:
    """`12 cos γ=0.995 θ=0.262` (and `g=0.953` where gates differ): short enough to be read beside its row."""
    kind = _KIND.get(head.kind or "", head.kind or "?")
    if (head.dilation or 1) > 1:
        kind += f"/{head.dilation}"
    return f"{head.head} {kind} " + _describe(
        head.lambda_, head.gamma, head.theta, head.gate if with_gate else None
    )


def render_attention_png(result: AttentionResponse, matrices: list[MatrixName]) -> bytes:
    """One row of panels per (layer, head) (or per layer when heads are averaged), one column per matrix;
    for a model read at its last step, one heatmap of heads × lags per layer and matrix; for a global
    model, its lag weights and what makes its forecast (`render_global_png`)."""
    if result.readout is not None or result.sensitivity is not None:
        return render_global_png(result)
    if result.query == "last":
        return _render_rows(result, matrices)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows: list[tuple[str, dict[str, list[list[float]] | None]]] = []
    for layer in result.layers:
        if layer.mean is not None:
            rows.append((f"layer {layer.layer}\nmean of {len(layer.heads)} heads", layer.mean.model_dump()))
            continue
        with_gate = shared_gate(layer) is None
        for head in layer.heads:
            if head.matrices is None:
                continue
            label = f"layer {layer.layer}, head " + (
                head_label(head, with_gate) if head.kind else str(head.head)
            )
            rows.append((label, head.matrices.model_dump()))
    rows = rows[: max(1, _MAX_PANELS // max(1, len(matrices)))]
    n_rows, n_cols = max(1, len(rows)), len(matrices)
    figure = Figure(figsize=(3.6 * n_cols + 0.6, 3.2 * n_rows + 0.8), layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(
        f"{result.model} v{result.version}, channel {result.channel.name}\n{gate_legend(result.layers)}",
        fontsize=10,
    )
    axes = figure.subplots(n_rows, n_cols, squeeze=False)
    for r, (label, mats) in enumerate(rows):
        for c, name in enumerate(matrices):
            ax = axes[r][c]
            data = mats.get(name)
            if data is None:
                ax.set_axis_off()
                continue
            cmap, low, high = colour_scale(data)
            image = ax.imshow(data, cmap=cmap, vmin=low, vmax=high, interpolation="nearest")
            ax.set_title(f"{label}\n{name}", fontsize=9)
            ax.set_xlabel("key j", fontsize=8)
            ax.set_ylabel("query i", fontsize=8)
            ax.tick_params(labelsize=7)
            _colour_bar(figure, image, ax, cmap, shrink=0.8, size=7)
    return _png(figure)


def _render_rows(result: AttentionResponse, matrices: list[MatrixName]) -> bytes:
    """Last-query rows: per layer and matrix a heatmap with one line per head (labelled with its kind and
    parameters) and the lag from the last step along x; with `average_heads`, the mean row as a curve."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    L = result.input_length
    n_rows, n_cols = len(result.layers), len(matrices)
    n_heads = max(len(layer.heads) for layer in result.layers)
    averaged = all(layer.mean is not None for layer in result.layers)
    height = 2.8 if averaged else 1.4 + 0.3 * n_heads  # 30 px a head at 100 dpi: 8-point labels fit
    figure = Figure(figsize=(4.6 * n_cols + 3.0, height * n_rows + 1.0), layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(
        f"{result.model} v{result.version}, channel {result.channel.name}: the last step's attention over "
        f"the {L} lags\n{gate_legend(result.layers)}",
        fontsize=11,
    )
    axes = figure.subplots(n_rows, n_cols, squeeze=False)
    lags = np.arange(L - 1, -1, -1)  # key j sits at lag L-1-j from the last step
    for r, layer in enumerate(result.layers):
        with_gate = shared_gate(layer) is None
        for c, name in enumerate(matrices):
            ax = axes[r][c]
            ax.set_title(f"layer {layer.layer}: {name}", fontsize=10)
            if layer.mean is not None:
                ax.plot(lags, np.asarray(getattr(layer.mean, name)), lw=1)
                ax.set_xlim(L - 1, 0)
                ax.set_xlabel("lag from the last step", fontsize=8)
                ax.tick_params(labelsize=7)
                continue
            rows = np.asarray([getattr(h.matrices, name) for h in layer.heads])  # (heads, L)
            cmap, low, high = colour_scale(rows)
            image = ax.imshow(
                rows,
                aspect="auto",
                cmap=cmap,
                vmin=low,
                vmax=high,
                interpolation="nearest",
                extent=(L - 0.5, -0.5, len(rows) - 0.5, -0.5),
            )
            ax.set_xlabel("lag from the last step", fontsize=8)
            ax.set_yticks(range(len(layer.heads)))
            labels = [head_label(h, with_gate) for h in layer.heads]
            ax.set_yticklabels(labels if c == 0 else [], fontsize=8)
            ax.tick_params(axis="x", labelsize=8)
            _colour_bar(figure, image, ax, cmap, shrink=0.6, size=8)
    return _png(figure)


def kernel_label(kernel: KernelShare) -> str:
    """`3 cos/2 γ=0.9 θ=0.524`: a REM kernel of a global read-out, as a head is labelled."""
    kind = _KIND.get(kernel.kind or "", kernel.kind or "?")
    if (kernel.dilation or 1) > 1:
        kind += f"/{kernel.dilation}"
    return f"{kernel.index} {kind} " + _describe(kernel.lambda_, kernel.gamma, kernel.theta, None)


def render_global_png(result: AttentionResponse) -> bytes:
    """A global model's figure: the heatmap of its lag weights (lags × horizon steps, normalised units,
    diverging around 0) and, for a read-out, a bar of each term's share of the forecast (the kernels by
    kind and λ/γ/θ, the direct lags, the missing share, the bias, each covariate) and, for a hybrid, each
    member's weight; for a network, its lag effects alone."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    readout, sens, hybrid = result.readout, result.sensitivity, result.hybrid
    weights = np.asarray(readout.lag_weights if readout is not None else sens.lag_weights)  # type: ignore[union-attr]
    L, H = weights.shape
    bars: list[tuple[str, float]] = []
    if readout is not None:
        bars += [(kernel_label(k), k.share) for k in readout.kernels]
        bars += [(f"last {readout.direct_lags.lags} lags", readout.direct_lags.share)]
        bars += [("missing share", readout.missing.share), ("bias", readout.bias.share)]
        bars += [] if readout.lift is None else [(f"random layer ({readout.lift.width})", readout.lift.share)]
        bars += [(f"{c.name} ({c.kind})", c.share) for c in readout.covariates]
        bars += [] if readout.still is None else [("still window: its last cycle", readout.still.share)]
    n_panels = 1 + (readout is not None) + (hybrid is not None)
    height = max(4.0, 0.22 * len(bars) + 1.5)
    figure = Figure(figsize=(5.2 * n_panels + 1.0, height), layout="constrained")
    FigureCanvasAgg(figure)
    what = "lag weights" if readout is not None else "lag effects d forecast / d value (finite differences)"
    figure.suptitle(f"{result.model} v{result.version}: {what} per horizon step", fontsize=11)
    axes = figure.subplots(1, n_panels, squeeze=False)[0]
    cmap, low, high = colour_scale(weights)
    if cmap == "viridis":  # non-negative weights: still read around 0
        cmap, low, high = "RdBu_r", -max(abs(high), 1e-12), max(abs(high), 1e-12)
    image = axes[0].imshow(
        weights,
        aspect="auto",
        cmap=cmap,
        vmin=low,
        vmax=high,
        interpolation="nearest",
        extent=(0.5, H + 0.5, -0.5, L - 0.5),  # row 0 (the oldest value) at the top: lag L-1
    )
    ticks = list(range(0, L, max(1, L // 8)))  # y is the lag: row j (oldest first) sits at L - 1 - j
    axes[0].set_yticks(ticks)
    axes[0].set_yticklabels([str(t) for t in ticks], fontsize=8)
    axes[0].set_ylabel("lag from the last value", fontsize=9)
    axes[0].set_xlabel("horizon step", fontsize=9)
    axes[0].set_title("normalised units (value / window scale)", fontsize=9)
    _colour_bar(figure, image, axes[0], cmap, shrink=0.8, size=8, ticks=False)
    if readout is not None:
        ax = axes[1]
        ax.barh(range(len(bars)), [b[1] for b in bars], color="tab:blue")
        ax.set_yticks(range(len(bars)))
        ax.set_yticklabels([b[0] for b in bars], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("share of the forecast: Σ_h |weight × feature| / total", fontsize=8)
        ax.set_title("what the read-out's forecast is made of", fontsize=9)
    if hybrid is not None:
        ax = axes[-1]
        names = [m.name for m in hybrid.members]
        ax.bar(range(len(names)), [m.weight for m in hybrid.members], color="tab:orange")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(
            "hybrid: each member's weight" + ("" if hybrid.local_used else " (too short: read-out alone)"),
            fontsize=9,
        )
    return _png(figure)


def _describe(lam: float | None, gamma: float | None, theta: float | None, gate: float | None) -> str:
    parts = []
    if lam is not None:
        parts.append(f"λ={lam:.3g}")
    if gamma is not None:
        parts.append(f"γ={gamma:.3g}")
    if theta is not None:
        parts.append(f"θ={theta:.3g}")
    if gate is not None:
        parts.append(f"g={gate:.3g}")
    return " ".join(parts) or "-"
