"""PNG heatmaps of attention matrices. matplotlib (Agg, object API, no pyplot) is imported on first use."""

from __future__ import annotations

import io

from app.protocols.rsa_v1.schemas import AttentionResponse, MatrixName

_MAX_PANELS = 256  # a figure beyond this is unreadable anyway


def render_attention_png(result: AttentionResponse, matrices: list[MatrixName]) -> bytes:
    """One row of panels per (layer, head) (or per layer when heads are averaged), one column per matrix;
    for a model read at its last step, one heatmap of heads × lags per layer and matrix."""
    if result.query == "last":
        return _render_rows(result, matrices)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows: list[tuple[str, dict[str, list[list[float]] | None]]] = []
    for layer in result.layers:
        if layer.mean is not None:
            rows.append((f"layer {layer.layer}\nmean of {len(layer.heads)} heads", layer.mean.model_dump()))
            continue
        for head in layer.heads:
            if head.matrices is None:
                continue
            label = f"layer {layer.layer}, head {head.head}"
            if head.kind:
                label += f": {head.kind}\n{_describe(head.lambda_, head.gamma, head.theta, head.gate)}"
            rows.append((label, head.matrices.model_dump()))
    rows = rows[: max(1, _MAX_PANELS // max(1, len(matrices)))]
    n_rows, n_cols = max(1, len(rows)), len(matrices)
    figure = Figure(figsize=(3.2 * n_cols + 0.6, 3.0 * n_rows + 0.4), layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(f"{result.model} v{result.version}, channel {result.channel.name}")
    axes = figure.subplots(n_rows, n_cols, squeeze=False)
    for r, (label, mats) in enumerate(rows):
        for c, name in enumerate(matrices):
            ax = axes[r][c]
            data = mats.get(name)
            if data is None:
                ax.set_axis_off()
                continue
            image = ax.imshow(data, cmap="viridis", interpolation="nearest")
            ax.set_title(f"{label}\n{name}", fontsize=8)
            ax.set_xlabel("key j", fontsize=7)
            ax.set_ylabel("query i", fontsize=7)
            ax.tick_params(labelsize=6)
            figure.colorbar(image, ax=ax, shrink=0.8)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


def _render_rows(result: AttentionResponse, matrices: list[MatrixName]) -> bytes:
    """Last-query rows: per layer and matrix a heatmap with one line per head (labelled with its kind,
    parameters and gate) and the lag from the last step along x, so 36 heads stay readable; with
    `average_heads`, the mean row as a curve."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    L = result.input_length
    n_rows, n_cols = len(result.layers), len(matrices)
    n_heads = max(len(layer.heads) for layer in result.layers)
    averaged = all(layer.mean is not None for layer in result.layers)
    height = 2.6 if averaged else 1.2 + 0.22 * n_heads
    figure = Figure(figsize=(5.0 * n_cols + 2.4, height * n_rows + 0.6), layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(
        f"{result.model} v{result.version}, channel {result.channel.name}: the last step's attention"
    )
    axes = figure.subplots(n_rows, n_cols, squeeze=False)
    lags = np.arange(L - 1, -1, -1)  # key j sits at lag L-1-j from the last step
    for r, layer in enumerate(result.layers):
        for c, name in enumerate(matrices):
            ax = axes[r][c]
            ax.set_title(f"layer {layer.layer}: {name}", fontsize=9)
            if layer.mean is not None:
                ax.plot(lags, np.asarray(getattr(layer.mean, name)), lw=1)
                ax.set_xlim(L - 1, 0)
                ax.set_xlabel("lag from the last step", fontsize=7)
                ax.tick_params(labelsize=6)
                continue
            rows = np.asarray([getattr(h.matrices, name) for h in layer.heads])  # (heads, L)
            image = ax.imshow(
                rows,
                aspect="auto",
                cmap="RdBu_r",
                interpolation="nearest",
                extent=(L - 0.5, -0.5, len(rows) - 0.5, -0.5),
            )
            limit = float(np.abs(rows).max()) or 1.0
            image.set_clim(-limit, limit)  # signed: alternating and cyclic memories are negative at some lags
            ax.set_xlabel("lag from the last step", fontsize=7)
            ax.set_yticks(range(len(layer.heads)))
            labels = [
                f"{h.head} {h.kind or ''}{'/d' + str(h.dilation) if (h.dilation or 1) > 1 else ''} "
                + _describe(h.lambda_, h.gamma, h.theta, h.gate)
                for h in layer.heads
            ]
            ax.set_yticklabels(labels if c == 0 else [], fontsize=6)
            ax.tick_params(axis="x", labelsize=6)
            figure.colorbar(image, ax=ax, shrink=0.6)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


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
