"""OIP v2 REST bodies <-> tensors: JSON tensors (nested or flat), Triton's binary tensor data extension,
and compressed request bodies.

Binary extension (https://github.com/triton-inference-server/server/blob/main/docs/protocol/
extension_binary_data.md): the header `Inference-Header-Content-Length: N` says the body's first N bytes
are the JSON request; each input whose `parameters.binary_data_size` is set has its raw little-endian,
row-major bytes after it, in input order. Answers go the same way for the outputs asked in binary
(`outputs[i].parameters.binary_data`, or `parameters.binary_data_output` for all of them).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import orjson
from pydantic import ValidationError

from app.core.errors import InvalidInput, PayloadTooLarge
from app.core.numbers import decimal
from app.protocols.oip_v2.schemas import InferenceRequest
from app.protocols.validation_errors import first_problem

HEADER_LENGTH = "inference-header-content-length"

# The datatypes a tensor of this service can have, and their numpy dtype (little-endian, as the wire is).
DTYPES: dict[str, np.dtype] = {"FP32": np.dtype("<f4"), "INT64": np.dtype("<i8")}
DATATYPE_OF = {dtype: name for name, dtype in DTYPES.items()}


@dataclass(frozen=True)
class Tensor:
    """A decoded input: its name, its declared datatype and shape, and the array in that shape."""

    name: str
    datatype: str
    array: np.ndarray


@dataclass(frozen=True)
class InferResult:
    """What the handlers answer, for any transport: the version that ran, the request id, the outputs."""

    model_name: str
    model_version: str
    id: str | None
    outputs: dict[str, np.ndarray]
    # Missing values (NaN) filled in the request's windows, all windows together: the response's
    # `parameters.filled` when > 0 (a parameter is a scalar in the protocol), else no parameters.
    filled: int = 0


def decompress(raw: bytes, encoding: str | None, limit: int) -> bytes:
    """The body as sent under `Content-Encoding` gzip or deflate (zlib, as tritonclient writes it), at most
    `limit` bytes once inflated (413 above: a small compressed body may not expand without bound)."""
    if encoding is None or encoding.strip().lower() in ("", "identity"):
        return raw
    kind = encoding.strip().lower()
    if kind not in ("gzip", "deflate"):
        raise InvalidInput(
            f"header Content-Encoding {encoding!r} is not supported; use gzip or deflate",
            field="header Content-Encoding",
            limit=["gzip", "deflate"],
        )
    # 16 + MAX_WBITS: a gzip wrapper; MAX_WBITS: zlib's. Bounded: at most limit + 1 bytes are inflated in
    # all. A gzip body may hold several members, one after the other (RFC 1952 section 2.2, what `cat a.gz
    # b.gz` makes): each is inflated in turn. Anything else after a stream's end is refused, not dropped.
    wbits = 16 + zlib.MAX_WBITS if kind == "gzip" else zlib.MAX_WBITS
    parts: list[bytes] = []
    size, rest, members = 0, raw, 0
    while True:
        inflater = zlib.decompressobj(wbits)
        try:
            # max_length is never 0 here (which would mean unbounded): size <= limit
            part = inflater.decompress(rest, limit + 1 - size)
        except zlib.error as exc:
            after = f" after its {members} complete stream(s), {len(rest)} bytes" if members else ""
            raise InvalidInput(f"the {kind} body{after} cannot be inflated: {exc}", field="body") from None
        size += len(part)
        parts.append(part)
        if size > limit:
            raise PayloadTooLarge(
                f"the request body inflates to more than the limit of {limit} bytes",
                field="body",
                limit=limit,
            )
        if not inflater.eof:
            raise InvalidInput(f"the {kind} body is truncated", field="body")
        members += 1
        rest = inflater.unused_data
        if not rest:
            return b"".join(parts)
        if kind == "deflate":
            raise InvalidInput(
                f"the deflate body has {len(rest)} bytes after the end of its stream", field="body"
            )


def split_body(body: bytes, header_length: str | None) -> tuple[InferenceRequest, bytes]:
    """(the JSON request, the binary part after it) of a body, validated."""
    binary = b""
    if header_length is not None:
        cut = decimal(header_length.strip())
        if cut is None or cut > len(body):
            raise InvalidInput(
                f"header Inference-Header-Content-Length must be a byte count within the body's "
                f"{len(body)} bytes, got {header_length!r}",
                field="header Inference-Header-Content-Length",
                limit=len(body),
            )
        body, binary = body[:cut], body[cut:]
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"malformed JSON request: {exc}", field="body") from None
    # The tensors' `data` skip pydantic: walking a list[Any] of millions of numbers was most of the parse
    # (`_from_json` checks them, with numpy, as it builds the array).
    inputs = document.get("inputs") if isinstance(document, dict) else None
    if not isinstance(inputs, list):  # not a list: pydantic names the field below
        inputs = []
    data = [item.pop("data", None) if isinstance(item, dict) else None for item in inputs]
    try:
        request = InferenceRequest.model_validate(document)
    except ValidationError as exc:
        problem = first_problem(exc.errors(include_url=False))
        where = ".".join(str(p) for p in problem.loc) or "body"
        more = f" (and {problem.more} more)" if problem.more else ""
        raise InvalidInput(f"{where}: {problem.message}{more}", field=where) from None
    for item, values in zip(request.inputs, data, strict=True):
        item.data = values  # no validate_assignment: as parsed, for `_from_json`
    return request, binary


def parse_infer(
    raw: bytes, encoding: str | None, header_length: str | None, limit: int
) -> tuple[InferenceRequest, list[Tensor]]:
    """A whole infer body -> (the request, its inputs decoded): what the REST route runs, on the event
    loop or, for a large body, in the parse process (`app.core.offload`), since the JSON numbers cost
    about as much to parse there as /v1's. Module-level, so it pickles."""
    request, binary = split_body(decompress(raw, encoding, limit), header_length)
    tensors = decode_inputs(request, binary)
    for item in request.inputs:  # decoded: the lists would only be pickled back, at a second's cost
        item.data = None
    return request, tensors


@dataclass(frozen=True)
class Layout:
    """An input's declared name, datatype and shape, checked: what every transport decodes its values
    against (REST's JSON `data` or binary part here, gRPC's `contents` or `raw_input_contents` in
    grpc_server.py), so that both answer a bad tensor with the same rule and message."""

    field: str  # how errors name the input: "inputs[0] (window)"
    name: str
    datatype: str
    dtype: np.dtype
    shape: list[int]

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    def from_bytes(self, raw: bytes, source: str, offset: int | None = None) -> Tensor:
        """From raw little-endian, row-major bytes: `raw[offset:offset + nbytes]` when `offset` is given
        (the caller checked they are there), else all of `raw`, which must be exactly that long (`source`
        names it in the error)."""
        if offset is None and len(raw) != self.nbytes:
            raise InvalidInput(
                f"{self.field}: {source} has {len(raw)} bytes; shape {self.shape} of {self.datatype} needs "
                f"{self.nbytes}",
                field=source,
                limit=self.nbytes,
            )
        array = np.frombuffer(raw, self.dtype, self.count, offset or 0)
        return self._tensor(array.reshape(self.shape))

    def from_json(self, data: object) -> Tensor:
        """From JSON numbers, nested or flat (REST's `data`)."""
        return self._tensor(_from_json(data, self, f"{self.field}.data"))

    def from_values(self, values: Sequence[float] | Sequence[int], source: str) -> Tensor:
        """From a flat sequence already of the datatype's kind (gRPC's typed `contents`)."""
        _check_count(len(values), self, f"{self.field}.{source}")
        return self._tensor(np.array(values, self.dtype).reshape(self.shape))

    def _tensor(self, array: np.ndarray) -> Tensor:
        return Tensor(self.name, self.datatype, array)


def layout(index: int, name: str, datatype: str, shape: Sequence[int]) -> Layout:
    """The checked layout of input `index`: a served datatype, no negative dimension."""
    field = f"inputs[{index}] ({name})"
    dtype = DTYPES.get(datatype)
    if dtype is None:
        raise InvalidInput(
            f"{field}: datatype {datatype!r} is not served; this service takes {sorted(DTYPES)}",
            field=f"inputs[{index}].datatype",
            limit=sorted(DTYPES),
        )
    dims = list(shape)
    if any(d < 0 for d in dims):
        raise InvalidInput(f"{field}: shape {dims} has a negative dimension", field=f"{field}.shape")
    return Layout(field, name, datatype, dtype, dims)


def _check_count(found: int, tensor: Layout, where: str) -> None:
    if found != tensor.count:
        what = where.rsplit(".", 1)[-1]
        raise InvalidInput(
            f"{tensor.field}: {what} has {found} values, but shape {tensor.shape} needs {tensor.count}",
            field=where,
            limit=tensor.count,
        )


def decode_inputs(request: InferenceRequest, binary: bytes) -> list[Tensor]:
    """Every input as an array of its declared shape and datatype, from JSON `data` or the binary part."""
    tensors, offset = [], 0
    for i, item in enumerate(request.inputs):
        tensor = layout(i, item.name, item.datatype, item.shape)
        field = tensor.field
        size = (item.parameters or {}).get("binary_data_size")
        if size is not None:
            if item.data is not None:
                raise InvalidInput(f"{field}: give `data` or `binary_data_size`, not both", field=field)
            if isinstance(size, bool) or not isinstance(size, int) or size != tensor.nbytes:
                raise InvalidInput(
                    f"{field}: binary_data_size {size!r} does not fit shape {item.shape} of "
                    f"{item.datatype} ({tensor.nbytes} bytes)",
                    field=f"{field}.parameters.binary_data_size",
                    limit=tensor.nbytes,
                )
            if offset + size > len(binary):
                raise InvalidInput(
                    f"{field}: the body's binary part ends after {len(binary) - offset} of its {size} bytes",
                    field=f"{field}.parameters.binary_data_size",
                    limit=len(binary) - offset,
                )
            tensors.append(tensor.from_bytes(binary, "binary part", offset))
            offset += size
        elif item.data is None:
            raise InvalidInput(f"{field}: no `data` and no `binary_data_size`", field=f"{field}.data")
        else:
            tensors.append(tensor.from_json(item.data))
    if offset != len(binary):
        raise InvalidInput(
            f"the body's binary part has {len(binary)} bytes, but the inputs' binary_data_size add up to "
            f"{offset}",
            field="body",
            limit=offset,
        )
    return tensors


def _from_json(data: object, tensor: Layout, where: str) -> np.ndarray:
    """Nested or flat JSON numbers -> an array of the tensor's shape; integers only for an integer
    datatype.

    numpy infers the array's type from the JSON values themselves (no dtype given): a string or a null
    among them, or booleans only, leave it non-numeric and are refused, where `np.asarray(data, float64)`
    would have read "1.5" and true as numbers and null as NaN. (numpy promotes a boolean among numbers to
    1 or 0; finding one would mean walking every value in Python, several times the parse.)"""
    field, dtype, shape = tensor.field, tensor.dtype, tensor.shape
    if not isinstance(data, list):
        raise InvalidInput(f"{field}: data must be a list of numbers, flat or nested", field=where)
    try:
        values = np.asarray(data)
    except ValueError:  # ragged nesting
        raise InvalidInput(
            f"{field}: data must be numbers, flat or nested in equal-length lists", field=where
        ) from None
    integers = dtype.kind != "f"
    if values.dtype.kind not in "fiu" or (integers and values.dtype.kind == "f" and values.size):
        bad = _first_not_of(data, integers)
        if bad is None:  # integers only, some beyond int64: numpy holds int64 with uint64 as float64
            raise InvalidInput(f"{field}: a value is outside the int64 range", field=where)
        raise InvalidInput(
            f"{field}: {DATATYPE_OF[dtype]} data must be JSON {'integers' if integers else 'numbers'}, "
            f"but data[{bad[0]}] = {_json(bad[1])}",
            field=where,
        )
    flat = values.reshape(-1)
    _check_count(flat.size, tensor, where)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # out of float32 range: refused by the range check after
            return flat.astype(dtype).reshape(shape)
    if values.dtype.kind == "u" and flat.max() > np.iinfo(np.int64).max:  # numpy's type for 2**63 and up
        raise InvalidInput(f"{field}: a value is outside the int64 range", field=where)
    return flat.astype(dtype).reshape(shape)


def _leaves(data: list[object]) -> Iterator[object]:
    for item in data:
        if isinstance(item, list):
            yield from _leaves(item)
        else:
            yield item


def _first_not_of(data: list[object], integers: bool) -> tuple[int, object] | None:
    """The first value, in row-major order, that is not a JSON integer (`integers`) or number, to name it
    in the error (a bool is an int to Python, never to JSON)."""
    allowed: tuple[type, ...] = (int,) if integers else (int, float)
    for index, value in enumerate(_leaves(data)):
        if isinstance(value, bool) or not isinstance(value, allowed):
            return index, value
    return None


def _json(value: object) -> str:
    """A value as the client wrote it in JSON (null, true, "1.5"), for the error message."""
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def binary_outputs(request: InferenceRequest, names: list[str]) -> set[str]:
    """The outputs to answer in binary: those asked with `binary_data`, else all when the request's
    `binary_data_output` says so (tritonclient's default when it names no output)."""
    everything = bool((request.parameters or {}).get("binary_data_output", False))
    asked = {o.name: o.parameters or {} for o in request.outputs or []}
    return {name for name in names if bool(asked.get(name, {}).get("binary_data", everything))}


# Numbers per orjson call when an answer's array is written as JSON: orjson holds the GIL for a whole
# call, and a 720-window answer of etth1-rsa (5.3 million numbers, 48 MB) in one call held it (and the
# event loop) for about 110 ms, its final copy into one buffer 30-200 ms more (issue 46's
# bench.big_bodies); in pieces of this size, sent one by one, the loop gets the GIL back between them.
JSON_CHUNK = 1 << 16
# Where each JSON array goes in the answer's JSON: a byte orjson never writes (it escapes control
# characters in strings), so splitting the encoded answer at it finds exactly the arrays' places.
_SLOT = b"\x00"


def _json_pieces(flat: np.ndarray) -> list[bytes]:
    """`flat`'s JSON list in pieces of JSON_CHUNK numbers: joined, the bytes orjson writes for the whole
    array."""
    pieces = [b"["]
    for i in range(0, len(flat), JSON_CHUNK):
        numbers = orjson.dumps(flat[i : i + JSON_CHUNK], option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
        pieces.append(b"," + numbers if i else numbers)
    pieces.append(b"]")
    return pieces


def json_numbers(result: InferResult, binary: set[str]) -> int:
    """The numbers an answer writes as JSON (its outputs not asked in binary): what decides whether it is
    encoded off the event loop, in pieces. Binary outputs cost a copy each (`tobytes`)."""
    return sum(int(array.size) for name, array in result.outputs.items() if name not in binary)


def encode_pieces(result: InferResult, binary: set[str]) -> tuple[list[bytes], int | None]:
    """(the body in pieces, the JSON part's length when a binary part follows it, else None): each JSON
    array in pieces of JSON_CHUNK numbers, each binary output a piece. Arrays go to orjson as they are:
    each float32 in its shortest exact form, as `/v1` writes them."""
    outputs: list[dict[str, object]] = []
    chunks: list[bytes] = []
    arrays: list[np.ndarray] = []
    for name, array in result.outputs.items():
        data = np.ascontiguousarray(array)
        entry: dict[str, object] = {
            "name": name,
            "datatype": DATATYPE_OF[data.dtype],
            "shape": list(data.shape),
        }
        if name in binary:
            chunks.append(data.tobytes())
            entry["parameters"] = {"binary_data_size": len(chunks[-1])}
        else:
            entry["data"] = orjson.Fragment(_SLOT)
            arrays.append(data.reshape(-1))
        outputs.append(entry)
    body: dict[str, object] = {"model_name": result.model_name, "model_version": result.model_version}
    if result.id is not None:
        body["id"] = result.id
    if result.filled:
        body["parameters"] = {"filled": result.filled}
    body["outputs"] = outputs
    between = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY).split(_SLOT)
    pieces = [between[0]]
    for flat, after in zip(arrays, between[1:], strict=True):
        pieces += _json_pieces(flat)
        pieces.append(after)
    if not chunks:
        return pieces, None
    return pieces + chunks, sum(len(p) for p in pieces)


def encode_response(result: InferResult, binary: set[str]) -> tuple[bytes, int | None]:
    """(body, the JSON part's length when a binary part follows it, else None): `encode_pieces` joined."""
    pieces, header_length = encode_pieces(result, binary)
    return b"".join(pieces), header_length
