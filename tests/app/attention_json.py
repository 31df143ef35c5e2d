"""The attention answer's JSON against what the pydantic encoder wrote before orjson took over
(`bench.attention_encoding.pydantic_json`, from the same document): the same parsed JSON, each weight
the same float32 (the pydantic path widened them to 17 digits; orjson writes their shortest float32
form)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
from fastapi.testclient import TestClient

import app.protocols.rsa_v1.handlers as handlers
from bench.attention_encoding import pydantic_json


def _split(answer: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The answer without its matrices, and the matrices (None where absent), in order."""
    rest = json.loads(json.dumps(answer))
    matrices: list[Any] = []
    for layer in rest["layers"]:
        for head in layer["heads"]:
            sets = head.pop("matrices")
            matrices.append(sets and [sets[m] for m in ("softmax", "rem", "mixed")])
        mean = layer.pop("mean")
        matrices.append(mean and [mean[m] for m in ("softmax", "rem", "mixed")])
    return rest, matrices


def assert_encoded_as_before(client: TestClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body`, capture the document the handlers encoded, and check the served bytes parse to what
    the pydantic path writes for it. Returns the served answer."""
    documents: list[dict[str, Any]] = []
    real = handlers.encode_attention

    def capture(document: dict[str, Any]) -> bytes:
        documents.append(document)
        return real(document)

    handlers.encode_attention = capture
    try:
        r = client.post(url, json=body)
    finally:
        handlers.encode_attention = real
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    (document,) = documents
    served, before = orjson.loads(r.content), json.loads(pydantic_json(document))
    served_rest, served_matrices = _split(served)
    before_rest, before_matrices = _split(before)
    assert served_rest == before_rest  # every key, string, int, null and manifest float, exactly
    assert len(served_matrices) == len(before_matrices)
    n_numbers = 0
    for new, old in zip(served_matrices, before_matrices, strict=True):
        assert (new is None) == (old is None)
        for a, b in zip(new or [], old or [], strict=True):
            assert (a is None) == (b is None)
            if a is None:
                continue
            wide = np.asarray(b, np.float64)
            assert np.array_equal(wide, wide.astype(np.float32).astype(np.float64))  # float32 values
            assert np.array_equal(np.asarray(a, np.float32), wide.astype(np.float32))
            n_numbers += wide.size
    assert n_numbers > 0
    assert len(r.content) < len(pydantic_json(document))  # shortest float32 forms: fewer bytes
    return served
