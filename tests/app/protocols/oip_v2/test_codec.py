"""The OIP v2 REST codec on its own: compressed bodies, the binary header's length, JSON tensor data."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import orjson
import pytest

from app.core.errors import InvalidInput, PayloadTooLarge
from app.protocols.oip_v2 import codec
from app.protocols.oip_v2.codec import DTYPES, decode_inputs, decompress, layout, split_body

BODY = b'{"inputs": [{"name": "window", "shape": [1], "datatype": "FP32", "data": [1.0]}]}'


# -- decompress ------------------------------------------------------------------------------------


def test_multi_member_gzip_is_every_member_inflated() -> None:
    # RFC 1952: a gzip file is a series of members (what `cat a.gz b.gz` makes)
    assert decompress(gzip.compress(b"abc") + gzip.compress(b"def"), "gzip", 100) == b"abcdef"
    assert decompress(gzip.compress(b"abc"), "gzip", 100) == b"abc"


def test_the_limit_counts_every_member() -> None:
    body = gzip.compress(b"x" * 60) + gzip.compress(b"y" * 60)
    assert decompress(body, "gzip", 120) == b"x" * 60 + b"y" * 60
    with pytest.raises(PayloadTooLarge):
        decompress(body, "gzip", 119)


@pytest.mark.parametrize(
    ("encoding", "body"),
    [("gzip", gzip.compress(b"abc", mtime=0) + b"garbage"), ("deflate", zlib.compress(b"abc") + b"garbage")],
)
def test_trailing_garbage_after_the_stream_is_refused(encoding: str, body: bytes) -> None:
    with pytest.raises(InvalidInput) as info:
        decompress(body, encoding, 100)
    assert info.value.field == "body" and "7 bytes" in info.value.message


def test_a_truncated_member_is_refused() -> None:
    with pytest.raises(InvalidInput, match="truncated"):
        decompress(gzip.compress(b"abc") + gzip.compress(b"def")[:-4], "gzip", 100)


# -- Inference-Header-Content-Length -------------------------------------------------------------


@pytest.mark.parametrize("header", ["²", "1²", "٣", "-1", "x", str(len(BODY) + 1)])
def test_a_header_length_that_is_not_ascii_digits_within_the_body_is_400(header: str) -> None:
    # Starlette decodes header bytes as latin-1: a byte 0xB2 arrives as "²", which isdigit() but not int()
    with pytest.raises(InvalidInput) as info:
        split_body(BODY, header)
    assert info.value.field == "header Inference-Header-Content-Length"


def test_a_header_length_splits_the_body() -> None:
    request, binary = split_body(BODY + b"\x00\x01", f" {len(BODY)} ")
    assert request.inputs[0].name == "window" and binary == b"\x00\x01"


@pytest.mark.parametrize("inputs", [-8898083953, "window", {"name": "window"}, None])
def test_inputs_that_are_not_a_list_are_400_naming_the_field(inputs: object) -> None:
    # found by schemathesis: an integer `inputs` was iterated before pydantic saw it (a 500)
    with pytest.raises(InvalidInput) as info:
        split_body(orjson.dumps({"inputs": inputs}), None)
    assert info.value.field == "inputs"


# -- JSON tensor data ------------------------------------------------------------------------------


def _decode(data: object, datatype: str = "FP32", shape: list[int] | None = None) -> np.ndarray:
    item = {"name": "window", "shape": shape or [2], "datatype": datatype, "data": data}
    request, binary = split_body(orjson.dumps({"inputs": [item]}), None)
    return decode_inputs(request, binary)[0].array


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (["1.5", 2.0], 'data[0] = "1.5"'),
        ([True, False], "data[0] = true"),
        ([1.0, None], "data[1] = null"),
        ([[1.0], ["x"]], 'data[1] = "x"'),
        ([1.0, {"a": 1}], 'data[1] = {"a":1}'),
    ],
)
def test_fp32_data_must_be_json_numbers(data: list[object], named: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _decode(data, shape=[2] if not isinstance(data[0], list) else [2, 1])
    assert info.value.field == "inputs[0] (window).data"
    assert named in info.value.message and "FP32 data must be JSON numbers" in info.value.message


@pytest.mark.parametrize(("data", "named"), [([1, 2.5], "data[1] = 2.5"), ([True, 1.5], "data[0] = true")])
def test_int64_data_must_be_json_integers(data: list[object], named: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _decode(data, "INT64")
    assert named in info.value.message and "INT64 data must be JSON integers" in info.value.message


def test_int64_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidInput, match="outside the int64 range"):
        _decode([1, 2**63], "INT64")


def test_numbers_decode_to_the_declared_type() -> None:
    got = _decode([[1, 2.5], [3, -4]], shape=[2, 2])
    assert got.dtype == DTYPES["FP32"] and got.tolist() == [[1.0, 2.5], [3.0, -4.0]]
    got = _decode([7, -8], "INT64")
    assert got.dtype == DTYPES["INT64"] and got.tolist() == [7, -8]


def test_ragged_data_is_refused() -> None:
    with pytest.raises(InvalidInput, match="equal-length lists"):
        _decode([[1.0], [2.0, 3.0]], shape=[2, 1])


# -- the layout both transports decode against (REST here, gRPC in grpc_server.py) -------------------------


@pytest.mark.parametrize(
    ("datatype", "shape", "named"),
    [("FP16", [1], "is not served"), ("FP32", [2, -1], "has a negative dimension")],
)
def test_a_layout_refuses_what_no_transport_serves(datatype: str, shape: list[int], named: str) -> None:
    with pytest.raises(InvalidInput, match=named):
        layout(0, "window", datatype, shape)


def test_every_kind_of_payload_counts_against_the_shape() -> None:
    tensor = layout(0, "window", "FP32", [2, 3])
    np.testing.assert_array_equal(tensor.from_values([0.0] * 6, "contents").array, np.zeros((2, 3)))
    np.testing.assert_array_equal(tensor.from_json([[1, 2, 3], [4, 5, 6]]).array.reshape(-1), range(1, 7))
    np.testing.assert_array_equal(
        tensor.from_bytes(np.ones(6, "<f4").tobytes(), "raw").array, np.ones((2, 3))
    )
    for decode, source in [
        (lambda: tensor.from_json([1.0] * 5), "data"),
        (lambda: tensor.from_values([1.0] * 5, "contents"), "contents"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            decode()
        assert refused.value.message == f"inputs[0] (window): {source} has 5 values, but shape [2, 3] needs 6"
        assert refused.value.field == f"inputs[0] (window).{source}"
    with pytest.raises(
        InvalidInput, match=r"raw_input_contents\[0\] has 20 bytes; shape \[2, 3\] of FP32 needs 24"
    ):
        tensor.from_bytes(b"\0" * 20, "raw_input_contents[0]")


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 33])
def test_an_answer_in_pieces_is_the_bytes_of_one_call(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46: the answer's JSON arrays in pieces of JSON_CHUNK numbers (here 8), joined, are the bytes
    orjson writes for the whole answer; binary outputs follow the JSON part, whose length is given."""
    monkeypatch.setattr(codec, "JSON_CHUNK", 8)
    rng = np.random.default_rng(n)
    outputs = {f"out{k}": rng.normal(0, 1e3, (n, 1, 1)).astype(np.float32) for k in range(3)}
    result = codec.InferResult("m\u0000x", "1", "id-\x00", outputs, 2)
    body = {"model_name": "m\u0000x", "model_version": "1", "id": "id-\x00", "parameters": {"filled": 2}}
    entries = [
        {"name": k, "datatype": "FP32", "shape": [n, 1, 1], "data": v.reshape(-1)} for k, v in outputs.items()
    ]
    expected = orjson.dumps({**body, "outputs": entries}, option=orjson.OPT_SERIALIZE_NUMPY)
    pieces, none = codec.encode_pieces(result, set())
    assert b"".join(pieces) == expected and none is None
    assert len(pieces) >= 3 * (2 + -(-n // 8)) + 1  # every array in its pieces
    joined, length = codec.encode_response(result, {"out1"})
    assert length is not None and joined[length:] == outputs["out1"].tobytes()
    assert orjson.loads(joined[:length])["outputs"][1]["parameters"] == {"binary_data_size": 4 * n}
