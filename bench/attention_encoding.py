"""The attention answer's JSON encoding, before and after, side by side in one run:

    .venv/bin/python -m bench.attention_encoding [model_repository/etth1-rsa/4] [--repeats 50]

- pydantic: what `/attention` did before, each matrix made a list (`ndarray.tolist()`), the answer
  built as `AttentionResponse` and written by pydantic-core's `to_json`;
- orjson: what it does now, `encode_attention` straight from the float32 arrays
  (app/protocols/rsa_v1/wire.py).
Both start from the same document (the handlers' `_layer_attention`, all three matrices, every head of
every layer, channel 0) of one inspect.onnx call on a random window; the rounds are interleaved so that
machine noise hits both alike. Prints median milliseconds, bytes and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from app.artifacts.manifest import load_manifest
from app.protocols.rsa_v1.handlers import _layer_attention
from app.protocols.rsa_v1.schemas import (
    AttentionResponse,
    ChannelRef,
    HeadAttention,
    LayerAttention,
    MatrixName,
    MatrixSet,
)
from app.protocols.rsa_v1.wire import encode_attention

REPO = Path(__file__).resolve().parents[1]
MATRICES: list[MatrixName] = ["softmax", "rem", "mixed"]


def _matrix_set(matrices: dict[str, Any] | None) -> MatrixSet | None:
    if matrices is None:
        return None
    return MatrixSet.model_construct(**{m: a.tolist() for m, a in matrices.items() if a is not None})


def pydantic_json(document: dict[str, Any]) -> bytes:
    """The answer as the pydantic path wrote it: lists from the arrays, the schema's models (matrices
    by `model_construct`, the rest validated), pydantic-core's JSON. Also the reference the attention
    tests compare the served bytes with."""
    layers = []
    for layer in document["layers"]:
        heads = [
            HeadAttention(
                **{k: v for k, v in head.items() if k != "matrices"}, matrices=_matrix_set(head["matrices"])
            )
            for head in layer["heads"]
        ]
        layers.append(
            LayerAttention(
                layer=layer["layer"],
                gate_mode=layer["gate_mode"],
                heads=heads,
                mean=_matrix_set(layer["mean"]),
            )
        )
    response = AttentionResponse(
        model=document["model"],
        version=document["version"],
        provider=document["provider"],
        channel=ChannelRef(**document["channel"]),
        input_length=document["input_length"],
        query=document["query"],
        layers=layers,
    )
    return AttentionResponse.__pydantic_serializer__.to_json(response)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("version_dir", nargs="?", default=str(REPO / "model_repository" / "etth1-rsa" / "4"))
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args(argv)
    vdir = Path(args.version_dir)
    manifest = load_manifest(vdir / "manifest.json")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(str(vdir / "inspect.onnx"), opts, providers=["CPUExecutionProvider"])
    L, C = manifest.input_length, manifest.n_channels
    feed = {"window": np.random.default_rng(0).standard_normal((1, L, C)).astype(np.float32)}
    if manifest.cycle is not None:
        feed["phase"] = np.zeros(1, np.int64)
    softmax, rem, mixed = session.run(["attn_softmax", "attn_rem", "attn_mixed"], feed)
    arrays = {"softmax": softmax[0, 0], "rem": rem, "mixed": mixed[0, 0]}
    document = {
        "model": manifest.name,
        "version": manifest.version,
        "provider": "CPUExecutionProvider",
        "channel": {"index": 0, "name": manifest.channels[0]},
        "input_length": L,
        "query": "last" if rem.ndim == 3 else "all",
        "layers": [_layer_attention(manifest, n, arrays, MATRICES, False) for n in range(rem.shape[0])],
    }
    cases = {"pydantic": pydantic_json, "orjson": encode_attention}
    sizes = {name: len(encode(document)) for name, encode in cases.items()}  # and a warm-up
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, encode in cases.items():
            t = time.perf_counter()
            encode(document)
            times[name].append(time.perf_counter() - t)
    n_heads = sum(len(layer["heads"]) for layer in document["layers"])
    print(f"{vdir}: {n_heads} heads, query {document['query']}, L={L}, {args.repeats} rounds")
    print(f"{'encoder':<10}{'median ms':>10}{'bytes':>10}{'ratio':>8}")
    base = statistics.median(times["pydantic"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<10}{med * 1e3:>10.2f}{sizes[name]:>10}{med / base:>8.2f}")


if __name__ == "__main__":
    main()
