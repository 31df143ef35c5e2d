"""Domain errors survive the parse process: pickled, they keep the field and limit they name."""

from __future__ import annotations

import pickle

from app.core.errors import InvalidInput, ModelNotReady, PayloadTooLarge


def test_errors_pickle_whole() -> None:
    for error in (
        InvalidInput("inputs[0] (window): bad", field="inputs[0] (window).data", limit=[1, 2]),
        PayloadTooLarge("too large", field="body", limit=10),
        ModelNotReady("starting", retry_after_s=1),
    ):
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert (back.message, back.field, back.limit, back.retry_after_s) == (
            error.message,
            error.field,
            error.limit,
            error.retry_after_s,
        )
        assert str(back) == str(error)
