"""Answer checks: every answer a benchmark gets is compared with ONNX Runtime's forecast of the same window.

- `ForecastChecker`: a `/v1` forecast answer (ids in order, finite numbers, close to the reference);
- `OipBinaryChecker`: an OIP v2 infer answer with the forecast as a binary tensor;
- `FixedAnswer`: a peer with no model (the floor) answers one fixed `/v1` answer, every time the same.

A checker is called with (index of the request body, answer bytes) and returns None or a `Failure`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from bench.harness.load import Failure

MEMO_VARIANTS = 8  # verified answers kept per request body (a batch-dependent last bit makes a few)
FP32 = np.dtype("<f4")  # the wire's FP32: little-endian whatever this machine is


class AnswerCheck(Protocol):
    """A checker a cell reports on: how many answers it parsed, and the sizes of those it verified."""

    parsed: int

    def __call__(self, b: int, payload: bytes) -> Failure | None: ...

    def answer_sizes(self) -> list[int]: ...


def forecast_answer(payload: bytes) -> dict[str, Any] | Failure:
    """The answer parsed, if it is JSON with a `forecasts` list; else what is wrong with it."""
    try:
        data = json.loads(payload)
    except ValueError as e:
        return Failure("bad_body", f"not JSON: {e}")
    if not isinstance(data, dict) or not isinstance(data.get("forecasts"), list):
        return Failure("bad_body", f"no `forecasts` list in {payload[:120]!r}")
    return data


@dataclass
class ForecastChecker:
    """Checks a `/v1` forecast answer against the ids and reference forecasts of the body it answers.

    A body's answer that is byte-identical to one this checker already passed for the same body passes
    again without being parsed: the check is a pure function of (body, answer), so this is memoisation,
    not sampling, and it keeps the client's CPU for sending. Any other answer is parsed and compared.
    """

    model: str
    version: int
    ids: list[list[str]]  # per body
    expected: list[np.ndarray]  # per body, [series, H, C] float32 from onnxruntime
    rtol: float = 1e-4
    atol: float = 1e-4
    verified: dict[int, list[bytes]] = field(default_factory=dict, repr=False)
    parsed: int = 0
    memo_hits: int = 0

    def __call__(self, b: int, payload: bytes) -> Failure | None:
        known = self.verified.get(b, ())
        if any(payload == v for v in known):
            self.memo_hits += 1
            return None
        self.parsed += 1
        problem = self._check(b, payload)
        if problem is None and len(known) < MEMO_VARIANTS:
            self.verified.setdefault(b, []).append(payload)
        return problem

    def fresh(self) -> ForecastChecker:
        """The same references and tolerances, an empty memo: one per server (and protocol)."""
        return type(self)(self.model, self.version, self.ids, self.expected, self.rtol, self.atol)

    def answer_sizes(self) -> list[int]:
        """The sizes of the distinct answers verified so far."""
        return [len(p) for answers in self.verified.values() for p in answers]

    def _check(self, b: int, payload: bytes) -> Failure | None:
        data = forecast_answer(payload)
        if isinstance(data, Failure):
            return data
        if (data.get("model"), data.get("version")) != (self.model, self.version):
            return Failure("bad_body", f"answered by {data.get('model')!r} v{data.get('version')!r}")
        forecasts, ids, expected = data["forecasts"], self.ids[b], self.expected[b]
        if len(forecasts) != len(ids):
            return Failure("bad_body", f"{len(forecasts)} forecasts for {len(ids)} series")
        for k, (f, want_id) in enumerate(zip(forecasts, ids, strict=True)):
            if not isinstance(f, dict) or f.get("id") != want_id:
                got = f.get("id") if isinstance(f, dict) else f
                return Failure("bad_body", f"forecasts[{k}] id {got!r}, expected {want_id!r}")
            try:
                values = np.array(f.get("forecast"))
            except ValueError as e:  # ragged lists
                return Failure("bad_body", f"forecasts[{k}].forecast is not an array: {e}")
            if values.dtype.kind not in "if" or values.shape != expected.shape[1:]:
                return Failure(
                    "bad_body",
                    f"forecasts[{k}].forecast is {values.dtype} {values.shape}, "
                    f"expected numbers {expected.shape[1:]}",
                )
            if not np.isfinite(values).all():
                return Failure("bad_body", f"forecasts[{k}].forecast has non-finite values")
            if not np.allclose(values, expected[k], rtol=self.rtol, atol=self.atol):
                worst = float(np.abs(values - expected[k]).max())
                return Failure(
                    "mismatch", f"forecasts[{k}] ({want_id}) off the reference by up to {worst:.3g}"
                )
        return None


@dataclass
class FixedAnswer:
    """The floor's check: its first answer is a `/v1` answer, and every later one is that same answer."""

    answer: bytes | None = None
    parsed: int = 0

    def __call__(self, b: int, payload: bytes) -> Failure | None:
        if self.answer is None:
            self.parsed += 1
            problem = forecast_answer(payload)
            if isinstance(problem, Failure):
                return problem
            self.answer = payload
        elif payload != self.answer:
            return Failure("bad_body", f"not the fixed answer: {payload[:120]!r}")
        return None

    def answer_sizes(self) -> list[int]:
        return [len(self.answer)] if self.answer is not None else []


@dataclass
class OipBinaryChecker(ForecastChecker):
    """Checks an OIP v2 infer answer whose `forecast` is binary (Triton's binary tensor data extension):
    the JSON header, then the tensor's raw little-endian float32 bytes, which `expected[b]` says the size
    of. Same references, tolerances and memo as ForecastChecker; a tensor has no series ids (its rows are
    the request's, in order): `ids` only name a row in a failure.
    """

    def _check(self, b: int, payload: bytes) -> Failure | None:
        expected = self.expected[b]
        size = FP32.itemsize * expected.size
        cut = len(payload) - size
        if cut <= 0:
            return Failure("bad_body", f"{len(payload)} bytes: no room for a header and {size} binary bytes")
        try:
            header = json.loads(payload[:cut])
        except ValueError as e:  # also a binary part of another size, which moves the cut
            return Failure("bad_body", f"no JSON header before the last {size} bytes: {e}")
        if not isinstance(header, dict):
            return Failure("bad_body", f"the header is not a JSON object: {payload[:120]!r}")
        if (header.get("model_name"), header.get("model_version")) != (self.model, str(self.version)):
            got = f"{header.get('model_name')!r} v{header.get('model_version')!r}"
            return Failure("bad_body", f"answered by {got}")
        outputs = header.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != 1 or not isinstance(outputs[0], dict):
            return Failure("bad_body", f"outputs {outputs!r}: expected `forecast` alone")
        out = outputs[0]
        described = (out.get("name"), out.get("datatype"), out.get("shape"))
        if described != ("forecast", "FP32", list(expected.shape)):
            return Failure("bad_body", f"output {described}, expected forecast FP32 {list(expected.shape)}")
        said = (out.get("parameters") or {}).get("binary_data_size")
        if said != size:
            return Failure("bad_body", f"binary_data_size {said!r}, expected {size}")
        values = np.frombuffer(payload, FP32, offset=cut).reshape(expected.shape)
        if not np.isfinite(values).all():
            return Failure("bad_body", "the forecast has non-finite values")
        close = np.isclose(values, expected, rtol=self.rtol, atol=self.atol).all(axis=(1, 2))
        if not close.all():
            k = int(np.argmin(close))
            worst = float(np.abs(values[k] - expected[k]).max())
            return Failure(
                "mismatch", f"forecast[{k}] ({self.ids[b][k]}) off the reference by up to {worst:.3g}"
            )
        return None
