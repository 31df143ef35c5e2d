"""Messages between front ends and the engine process: a small JSON header, then raw arrays.

A message is a ZeroMQ multipart message: frame 0 is the header (orjson), each further frame one array's
bytes, C order, little-endian, described in the header's `arrays` list ({name, dtype, shape}, in frame
order). Arrays never pass through JSON: a 256-series window batch of the default model is 3.7 MB of
float32 sent as one frame, without copies on the sending side (ZeroMQ takes the buffer).

Header fields: `op` (what is asked: one of the request classes below, by its OP; or catalog, pushed by
the engine), `id` (the request's number, echoed by its reply), the request's fields (a reservation as an
object: {id, name, version, rows}), and in a reply either `ok` with the results or `error` with a domain
error's class name, message, field, limit and Retry-After, rebuilt as the same exception on the front end.
A request is one of the typed classes (`Request`); `request_header` and `read_request` are its two ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, cast

import numpy as np
import orjson
import zmq
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.openmetrics.exposition import generate_latest

from app.core import errors as domain
from app.engine.api import Reservation

Frames = list[bytes | memoryview | np.ndarray]

# Only little-endian numerics cross: what the graphs take and give.
_DTYPES = {"<f4": np.float32, "<i8": np.int64, "<f8": np.float64}


# -- requests: what a front end asks of the engine -----------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """A front end's first message: its catalog comes back, and every later change is pushed to it."""

    OP: ClassVar[str] = "hello"


@dataclass(frozen=True)
class Ping:
    """The front end's heartbeat (any message from the engine answers it)."""

    OP: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Admit:
    """Reserve `rows` of a request whose body is still being read (Engine.admit)."""

    OP: ClassVar[str] = "admit"
    name: str
    version: int | None
    rows: int
    timeout_s: float
    since: float | None = None  # the request's arrival (perf_counter): judged behind earlier work only


@dataclass(frozen=True)
class Release:
    """The reserved rows stop counting (no answer is sent)."""

    OP: ClassVar[str] = "release"
    reservation: Reservation


@dataclass(frozen=True)
class Submit:
    """A feed (the message's arrays) through the version's batcher."""

    OP: ClassVar[str] = "submit"
    name: str
    version: int
    timeout_s: float
    reservation: Reservation | None = None
    evaluation: bool = False  # a backtest's or an anomaly check's windows: the evaluation queue


@dataclass(frozen=True)
class Inspect:
    """The inspection graph's outputs for a feed (the message's arrays)."""

    OP: ClassVar[str] = "inspect"
    name: str
    version: int


@dataclass(frozen=True)
class Stats:
    OP: ClassVar[str] = "stats"
    name: str
    version: int


@dataclass(frozen=True)
class Metrics:
    OP: ClassVar[str] = "metrics"


@dataclass(frozen=True)
class Index:
    OP: ClassVar[str] = "index"
    ready_only: bool = False


@dataclass(frozen=True)
class Load:
    OP: ClassVar[str] = "load"
    name: str


@dataclass(frozen=True)
class Unload:
    OP: ClassVar[str] = "unload"
    name: str


Request = Hello | Ping | Admit | Release | Submit | Inspect | Stats | Metrics | Index | Load | Unload
REQUESTS: dict[str, type[Request]] = {
    cls.OP: cls for cls in (Hello, Ping, Admit, Release, Submit, Inspect, Stats, Metrics, Index, Load, Unload)
}


def request_header(request: Request, rid: int | None) -> dict[str, Any]:
    """The header of a request numbered `rid` (None: one that gets no answer); a reservation crosses as
    an object."""
    header = {"op": request.OP, **asdict(request)}
    if rid is not None:
        header["id"] = rid
    return header


def read_request(header: Mapping[str, Any]) -> Request:
    """The request a header carries; ValueError for an unknown op."""
    cls = REQUESTS.get(str(header.get("op")))
    if cls is None:
        raise ValueError(f"unknown engine op {header.get('op')!r}")
    values = {f.name: header[f.name] for f in fields(cls) if f.name in header}
    if values.get("reservation") is not None:
        values["reservation"] = read_reservation(values["reservation"])
    return cls(**values)


def read_reservation(wire: Mapping[str, Any]) -> Reservation:
    return Reservation(**wire)


def encode(header: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> Frames:
    """The header, then each array's bytes (no copy for a C-contiguous little-endian array)."""
    frames: Frames = []
    described = []
    for name, array in (arrays or {}).items():
        data = np.ascontiguousarray(array)
        if data.dtype.byteorder == ">" or data.dtype.str not in _DTYPES:
            data = data.astype(data.dtype.newbyteorder("<"))
        described.append({"name": name, "dtype": data.dtype.str, "shape": list(data.shape)})
        frames.append(data)
    return [orjson.dumps({**header, "arrays": described}, option=orjson.OPT_SERIALIZE_NUMPY), *frames]


def decode(frames: Sequence[bytes | memoryview]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, arrays by name). Arrays are views of the frames' bytes (read-only)."""
    header = orjson.loads(frames[0])
    described = header.get("arrays") or []
    if len(described) != len(frames) - 1:
        raise ValueError(f"{len(described)} arrays described, {len(frames) - 1} sent")
    arrays: dict[str, np.ndarray] = {}
    for spec, frame in zip(described, frames[1:], strict=True):
        dtype = _DTYPES.get(spec["dtype"])
        if dtype is None:
            raise ValueError(f"array {spec['name']!r}: dtype {spec['dtype']!r} does not cross")
        arrays[spec["name"]] = np.frombuffer(frame, dtype=dtype).reshape(spec["shape"])
    return header, arrays


def error_header(exc: domain.ServiceError) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": exc.message,
        "field": exc.field,
        "limit": exc.limit,
        "retry_after_s": exc.retry_after_s,
    }


def raise_error(error: Mapping[str, Any]) -> None:
    """Raise the domain error a reply carries, as the engine raised it (an unknown class: InferenceError)."""
    cls = getattr(domain, str(error.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, domain.ServiceError)):
        cls = domain.InferenceError
    raise cls(
        str(error.get("message")),
        field=error.get("field"),
        limit=error.get("limit"),
        retry_after_s=error.get("retry_after_s"),
    )


class _Fixed:
    """A collector of families already made."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def openmetrics_text(families: Iterable[Metric]) -> str:
    """The engine's metric families as they cross to a front end: OpenMetrics text, which unlike the
    Prometheus text format keeps each family's type (info, counter)."""
    registry = CollectorRegistry()
    registry.register(_Fixed(families))
    return generate_latest(registry).decode()


class Channel:
    """A ZeroMQ socket driven by the event loop itself: every message goes to `on_message` as it arrives,
    and sends go out at once, with no future or task per message (pyzmq's asyncio sockets make a few of
    each: about half of a round trip's CPU here). ZeroMQ's FD is edge-triggered, so the socket is drained
    on every wake-up and looked at again after each send. No high-water mark: what is in flight is bounded
    by admission, and a send never waits."""

    def __init__(self, socket: zmq.Socket[Any], on_message: Callable[[list[zmq.Frame]], None]) -> None:
        self.socket = socket
        for option in (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER):
            socket.setsockopt(option, 0)
        self._on_message = on_message
        self._loop = asyncio.get_running_loop()
        self._fd = socket.fileno()  # zmq.FD
        self._loop.add_reader(self._fd, self._drain)
        self._loop.call_soon(self._drain)

    def send(self, frames: Frames) -> None:
        # numpy types ndarray.__buffer__ for Python 3.12+ only; arrays export the buffer protocol on 3.11 too
        self.socket.send_multipart(frames, copy=False)  # type: ignore[arg-type]
        if self._readable():  # the send may have taken the FD's edge
            self._loop.call_soon(self._drain)

    def drain(self) -> None:
        """Hand every message already received to `on_message` now (before judging a silence)."""
        self._drain()

    def _drain(self) -> None:
        while self._readable():
            self._on_message(self.socket.recv_multipart(zmq.NOBLOCK, copy=False))

    def _readable(self) -> bool:
        # getsockopt is typed int | bytes for any option; EVENTS is an int bit field
        return bool(cast(int, self.socket.getsockopt(zmq.EVENTS)) & zmq.POLLIN)

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        self.socket.close(linger=0)
