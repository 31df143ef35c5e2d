"""An ONNX graph with some of its constant tensors replaced, without the `onnx` package (the service does
not install it): the refitted global read-out's graph is its source version's graph with new `readout`
and `bias` constants (export/global_models/onnx.py builds both; the rest of the graph depends only on the
bank, the input length and the horizon, which a refit keeps).

Only the protobuf wire format is read: ModelProto field 7 is the graph, GraphProto field 5 its
initializers, TensorProto field 8 a name and field 9 its raw bytes. A replacement must have the
initializer's byte length (the same shape and dtype), so the bytes are overwritten in place and every
length prefix stays valid.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

__all__ = ["read_initializers", "replace_initializers"]

_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_NAME, _TENSOR_RAW = 7, 5, 8, 9


def _varint(data: bytes | bytearray, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes | bytearray, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, payload start, payload end) of each field of the message data[start:end]."""
    i = start
    while i < end:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, j = _varint(data, i)
            yield number, wire, i, j
        elif wire == 1:
            j = i + 8
            yield number, wire, i, j
        elif wire == 2:
            size, i = _varint(data, i)
            j = i + size
            yield number, wire, i, j
        elif wire == 5:
            j = i + 4
            yield number, wire, i, j
        else:
            raise ValueError(f"not an ONNX model: protobuf wire type {wire} at byte {i}")
        i = j


def _initializers(data: bytes | bytearray) -> Iterator[tuple[int, int]]:
    """(start, end) of each initializer's TensorProto in the ONNX model `data`: the graph's field 5."""
    for number, wire, g0, g1 in _fields(data, 0, len(data)):
        if number == _MODEL_GRAPH and wire == 2:
            for field, kind, t0, t1 in _fields(data, g0, g1):
                if field == _GRAPH_INITIALIZER and kind == 2:
                    yield t0, t1


def replace_initializers(model: bytes, values: Mapping[str, np.ndarray]) -> bytes:
    """`model` (ONNX bytes) with the raw data of the named initializers replaced by `values` (each
    little-endian, of the initializer's byte length). ValueError when one is missing or of another
    size."""
    out = bytearray(model)
    found: set[str] = set()
    for t0, t1 in _initializers(out):
        name, raw = None, None
        for f, k, a, b in _fields(out, t0, t1):
            if f == _TENSOR_NAME and k == 2:
                name = bytes(out[a:b]).decode()
            elif f == _TENSOR_RAW and k == 2:
                raw = (a, b)
        if name is not None and name in values:
            new = np.ascontiguousarray(values[name]).astype(values[name].dtype.newbyteorder("<")).tobytes()
            if raw is None or raw[1] - raw[0] != len(new):
                size = "no raw data" if raw is None else f"{raw[1] - raw[0]} bytes"
                raise ValueError(f"initializer {name!r} holds {size}; the replacement {len(new)}")
            out[raw[0] : raw[1]] = new
            found.add(name)
    missing = sorted(set(values) - found)
    if missing:
        raise ValueError(f"the graph has no initializer {missing}")
    return bytes(out)


_TENSOR_DIMS, _TENSOR_TYPE = 1, 2
_ONNX_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 11: np.float64}  # TensorProto.DataType


def read_initializers(model: bytes, names: set[str] | frozenset[str]) -> dict[str, np.ndarray]:
    """The named initializers of `model` (ONNX bytes) as numpy arrays, read from their raw data (as
    `onnx.numpy_helper.from_array` writes them); names the graph lacks are left out. ValueError for an
    initializer without raw data or of a type not read here."""
    out: dict[str, np.ndarray] = {}
    for t0, t1 in _initializers(model):
        name, raw, dtype, dims = None, None, None, []
        for f, k, a, b in _fields(model, t0, t1):
            if f == _TENSOR_NAME and k == 2:
                name = bytes(model[a:b]).decode()
            elif f == _TENSOR_RAW and k == 2:
                raw = (a, b)
            elif f == _TENSOR_TYPE and k == 0:
                dtype = _varint(model, a)[0]
            elif f == _TENSOR_DIMS and k == 0:
                dims.append(_varint(model, a)[0])
            elif f == _TENSOR_DIMS and k == 2:  # packed
                i = a
                while i < b:
                    d, i = _varint(model, i)
                    dims.append(d)
        if name is None or name not in names:
            continue
        if raw is None or dtype not in _ONNX_DTYPES:
            raise ValueError(f"initializer {name!r}: no raw data, or data type {dtype} not read here")
        array = np.frombuffer(model[raw[0] : raw[1]], dtype=np.dtype(_ONNX_DTYPES[dtype]).newbyteorder("<"))
        out[name] = array.reshape(dims).astype(array.dtype.newbyteorder("="))
    return out
