"""Engine messages: typed requests cross as headers and come back as the same objects."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from app.engine.api import Reservation
from app.engine.wire import (
    REQUESTS,
    Admit,
    Index,
    Ping,
    Release,
    Request,
    Submit,
    decode,
    encode,
    read_request,
    request_header,
)


@pytest.mark.parametrize(
    "request_",
    [
        Ping(),
        Admit("toy", None, 300, 2.5),
        Release(Reservation(7, "toy", 2, 300)),
        Submit("toy", 2, 1.5, Reservation(7, "toy", 2, 300)),
        Submit("toy", 2, 1.5),
        Index(ready_only=True),
    ],
)
def test_a_request_crosses_as_itself(request_: Request) -> None:
    feed = {"window": np.arange(6, dtype=np.float32).reshape(2, 3, 1)}
    header, arrays = decode(encode(request_header(request_, 4), feed))
    assert header["id"] == 4 and read_request(header) == request_
    np.testing.assert_array_equal(arrays["window"], feed["window"])


def test_a_reservation_crosses_as_an_object_and_a_release_without_an_id() -> None:
    header = request_header(Release(Reservation(7, "toy", 2, 300)), None)
    assert "id" not in header
    crossed = orjson.loads(orjson.dumps(header))["reservation"]
    assert crossed == {"id": 7, "name": "toy", "version": 2, "rows": 300}


def test_every_op_has_one_class_and_an_unknown_op_is_refused() -> None:
    ops = "hello ping admit release submit inspect stats metrics index load unload"
    assert sorted(REQUESTS) == sorted(ops.split())
    with pytest.raises(ValueError, match="unknown engine op"):
        read_request({"op": "reboot", "id": 1})
