"""The attention answer's JSON encoding, before and after, side by side in one run:

    .venv/bin/python -m bench.attention_encoding [model_repository/etth1-rsa/4] [--repeats 50]

- pydantic: what `/attention` did before, each matrix made a list (`ndarray.tolist()`), the answer
  built as `AttentionResponse` and written by pydantic-core's `to_json`;
- orjson: what it does now, `encode_attention` straight from the float32 arrays
  (app/protocols/rsa_v1/wire.py).
Both start from the same document: the service's own answer (`python -m app` serving this version alone,
bench.harness.servers) to one attention request on a random window, all three matrices, every head of
every layer, channel 0, each matrix read back as the float32 array it encoded. The rounds are
interleaved so that machine noise hits both alike. Prints median milliseconds, bytes and the ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.artifacts.manifest import load_manifest
from app.protocols.rsa_v1.schemas import (
    AttentionResponse,
    ChannelRef,
    HeadAttention,
    LayerAttention,
    MatrixSet,
)
from app.protocols.rsa_v1.wire import encode_attention
from bench.harness import REPO
from bench.harness.measure import interleaved
from bench.harness.report import format_table
from bench.harness.servers import local_server, served_repository


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


def served_document(version_dir: Path, seed: int = 0) -> dict[str, Any]:
    """The service's attention answer (all three matrices, every head of every layer, channel 0) for one
    random window, from `python -m app` serving this version alone, each matrix back as the float32 array
    the service encoded (the shortest float32 form reads back exactly)."""
    manifest = load_manifest(version_dir / "manifest.json")
    L, C = manifest.input_length, manifest.n_channels
    series: dict[str, Any] = {"values": np.random.default_rng(seed).standard_normal((L, C)).tolist()}
    if manifest.cycle is not None:
        series["start"] = "2016-07-01T00:00:00"  # any start: the phase changes no matrix's size
    repository = served_repository(version_dir.parent, [int(version_dir.name)])
    env = {"RSA_MODEL_REPOSITORY": str(repository), "RSA_INTRA_OP_THREADS": "1"}
    path = f"/v1/models/{version_dir.parent.name}/versions/{version_dir.name}/attention"
    with local_server(env) as live:
        answer = httpx.post(live.url + path, json={"series": series}, timeout=60)
    answer.raise_for_status()
    return document_of(answer.json())


def document_of(answer: dict[str, Any]) -> dict[str, Any]:
    """An attention answer, parsed, as the document the handlers encode: each matrix a float32 array."""
    document = json.loads(json.dumps(answer))  # a copy
    for layer in document["layers"]:
        for sets in [h["matrices"] for h in layer["heads"]] + [layer["mean"]]:
            if sets is not None:
                for m, values in sets.items():
                    sets[m] = None if values is None else np.asarray(values, np.float32)
    return document


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.attention_encoding", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("version_dir", nargs="?", default=str(REPO / "model_repository" / "etth1-rsa" / "4"))
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args(argv)
    vdir = Path(args.version_dir)
    document = served_document(vdir)
    cases = {"pydantic": pydantic_json, "orjson": encode_attention}
    sizes = {name: len(encode(document)) for name, encode in cases.items()}  # and a warm-up
    times = interleaved(
        {name: partial(encode, document) for name, encode in cases.items()},
        repeats=args.repeats,
        budget_s=math.inf,
        warmup=0,
    )
    n_heads = sum(len(layer["heads"]) for layer in document["layers"])
    L = document["input_length"]
    print(f"{vdir}: {n_heads} heads, query {document['query']}, L={L}, {args.repeats} rounds")
    base = statistics.median(times["pydantic"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        # three figures, not two decimals: one slow pydantic median on a busy host (599 ms, 8.55 ms here
        # otherwise) printed orjson's ratio 0.0024 as 0.00
        rows.append([name, f"{med * 1e3:.2f}", sizes[name], f"{med / base:.3g}"])
    print(format_table(["encoder", "median ms", "bytes", "ratio"], rows))


if __name__ == "__main__":
    main()
