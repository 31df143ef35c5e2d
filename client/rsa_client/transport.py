"""The client's transport: the HTTP session (`_Session`: retries on 503 and 429 after the server's
Retry-After and on a dropped connection, a bound on each request as a whole), the errors an answer
raises (`ServiceError`), reading an answer (JSON, OIP v2's binary tensors) and the connection that keeps
the request's deadline.

Faults: `timeout_s` bounds each request as a whole, from connecting to the answer's last byte (a server
that drips its answer cannot hold a call longer); an answer that is not what the API documents (not JSON,
another shape, tensors that do not fit) is a `ServiceError` naming the call and what was wrong; a
`Retry-After` that is no finite number of seconds is read as absent.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import httpcore
import httpx
import numpy as np

_WINDOW_ROW = re.compile(r"window\[(\d+)\]")
# A connection refused, reset or closed before any answer: most often a front end killed or starting again
# (docs/service.md, "One process or several front ends"; the kernel resets what was queued on its socket).
# The client's calls can be sent twice (forecasts, backtests, fits answered and not kept, model loads and
# unloads) except a fit that publishes, which is sent again only where it never left (refused); after
# 0.25 and 0.5 s: twice only, so that a wrong URL fails within a second.
_DROPPED_RETRIES = 2
_S = TypeVar("_S", bound="_Session")


class ServiceError(Exception):
    """An answer the client does not retry: the status, the server's message, and the series (ids) of
    the request it refused: the one the message names when it names a window, else all of them. Where the
    server's error names them: its `code` (e.g. "evaluation_too_long"), the request `field` it refused
    and the `limit` that field takes now (else None)."""

    def __init__(
        self,
        status: int,
        message: str,
        series: Sequence[Any] = (),
        *,
        code: str | None = None,
        field: str | None = None,
        limit: int | None = None,
    ) -> None:
        self.status = status
        self.message = message
        self.series = list(series)
        self.code = code
        self.field = field
        self.limit = limit
        shown = ", ".join(repr(s) for s in self.series[:5])
        more = f" and {len(self.series) - 5} more" if len(self.series) > 5 else ""
        where = f" (series {shown}{more})" if self.series else ""
        super().__init__(f"HTTP {status}{where}: {message}")


class _Session:
    """The HTTP session a `Client` talks through (`Client`'s arguments)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        concurrency: int = 4,
        max_retries: int = 8,
        max_wait_s: float = 30.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.concurrency = max(1, concurrency)
        self.max_retries = max_retries
        self.max_wait_s = max_wait_s
        self.timeout_s = timeout_s
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        self.http = httpx.Client(
            base_url=url.rstrip("/"),
            headers=headers,
            timeout=timeout_s,
            limits=limits,
            transport=_bounded_transport(limits),
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------------------------
    def _send(
        self, method: str, path: str, series: Sequence[Any] = (), *, idempotent: bool = True, **kwargs: Any
    ) -> httpx.Response:
        """One call, retried on 503 and 429 after the server's Retry-After (bounded) and on a connection
        refused, reset or closed before its answer (twice; refused only, where not `idempotent`); any other
        error status raises ServiceError naming `series`. Each request is bounded by `timeout_s` as a
        whole (httpx.TimeoutException past it, whatever the server trickles)."""
        busy = dropped = 0  # the retries so far: of a 503 or 429, of a dropped connection
        while True:
            _DEADLINE.at = time.monotonic() + self.timeout_s
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.TimeoutException as e:
                raise type(e)(
                    f"{method} {path}: no complete answer within timeout_s = {self.timeout_s:g} s ({e})"
                ) from e
            except (httpx.NetworkError, httpx.RemoteProtocolError) as e:
                sent = not isinstance(e, httpx.ConnectError)  # it may have reached the server
                if dropped >= min(self.max_retries, _DROPPED_RETRIES) or (sent and not idempotent):
                    raise
                time.sleep(min(0.25 * 2**dropped, self.max_wait_s))
                dropped += 1
                continue
            finally:
                _DEADLINE.at = None
            if response.status_code < 400:
                return response
            if response.status_code in (429, 503) and busy < self.max_retries:
                time.sleep(self._wait(response, busy))
                busy += 1
                continue
            raise _error(response, series)

    def _wait(self, response: httpx.Response, attempt: int) -> float:
        """Seconds before the next try: the answer's Retry-After when it is a finite number (an HTTP date,
        text, nan or inf read as absent), else a backoff doubling from 0.25 s; at most `max_wait_s`."""
        wait = 0.25 * 2**attempt
        raw = response.headers.get("retry-after")
        try:
            given = float(raw) if raw is not None else math.nan
        except ValueError:
            given = math.nan
        if math.isfinite(given):
            wait = given
        return min(max(wait, 0.0), self.max_wait_s)


def _decode(response: httpx.Response) -> dict[str, np.ndarray]:
    raw = response.content
    cut = response.headers.get("inference-header-content-length")
    head, binary = (raw[: int(cut)], raw[int(cut) :]) if cut is not None else (raw, b"")
    document = json.loads(head)
    out: dict[str, np.ndarray] = {}
    offset = 0
    for item in document["outputs"]:
        dtype = np.dtype("<f4") if item["datatype"] == "FP32" else np.dtype("<i8")
        size = (item.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            array = np.frombuffer(binary, dtype, size // dtype.itemsize, offset)
            offset += size
        else:
            array = np.asarray(item["data"], dtype)
        out[item["name"]] = array.reshape(item["shape"])
    return out


def _error(response: httpx.Response, series: Sequence[Any]) -> ServiceError:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    code = field = limit = None
    if isinstance(body, dict):
        error = body.get("error", body.get("message", body))
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            # /v1's structured error: {"code", "message", "field", "limit"}
            code, field = _text(error.get("code")), _text(error.get("field"))
            given = error.get("limit")
            limit = given if isinstance(given, int) and not isinstance(given, bool) else None
        message = error if isinstance(error, str) else json.dumps(error)
    else:
        message = str(body)
    named = _WINDOW_ROW.search(message)
    if named is not None and int(named.group(1)) < len(series):
        series = [series[int(named.group(1))]]
    return ServiceError(response.status_code, message, series, code=code, field=field, limit=limit)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# -- answers that are not what the API documents ---------------------------------------------------------

# What reading a wrong-shaped answer raises: a missing key, a wrong type, a list too short, a value that
# is no number, arrays that do not fit.
_SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError)


def _unreadable(response: httpx.Response, what: str, series: Sequence[Any] = ()) -> ServiceError:
    request = response.request
    begins = response.content[:120]
    return ServiceError(
        response.status_code,
        f"the answer to {request.method} {request.url.path} is {what}; it begins {begins!r}",
        series,
    )


def _json(response: httpx.Response, series: Sequence[Any] = ()) -> Any:
    """A successful answer's JSON, or ServiceError saying it is none (a proxy's HTML page, a cut body)."""
    try:
        return json.loads(response.content)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError alike
        raise _unreadable(response, f"not JSON ({e})", series) from None


@contextmanager
def _reading(response: httpx.Response, series: Sequence[Any] = ()) -> Iterator[None]:
    """Reading an answer: an error its shape causes is a ServiceError naming the call and what was wrong."""
    try:
        yield
    except ServiceError:
        raise
    except _SHAPE_ERRORS as e:
        what = str(e) if not isinstance(e, KeyError) else f"missing {e}"
        raise _unreadable(
            response, f"not what the API documents ({type(e).__name__}: {what})", series
        ) from None


# -- a bound on each request as a whole ------------------------------------------------------------------


class _Deadline(threading.local):
    """The monotonic time by which the request this thread is sending must be over (None: no bound)."""

    at: float | None = None


_DEADLINE = _Deadline()


def _left(timeout: float | None, kind: type[Exception]) -> float | None:
    """A socket operation's timeout: httpx's own (per read, write or connect) or the time left before the
    request's deadline, whichever is shorter; `kind` (an httpcore timeout) once the deadline has passed."""
    at = _DEADLINE.at
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise kind("timed out: the request's deadline (timeout_s) passed")
    return left if timeout is None else min(timeout, left)


class _BoundedStream(httpcore.NetworkStream):
    """A connection whose every read, write and TLS handshake waits at most until the request's deadline:
    a server trickling a byte at a time meets it, where httpx's timeouts bound each operation alone."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        sock = self._inner.get_extra_info("socket")
        if sock is None or _DEADLINE.at is None:
            self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))
            return
        # httpcore's own loop, the timeout taken again before each send: a server reading a byte at a
        # time would otherwise keep one write going for as long as it pleases.
        view = memoryview(buffer)
        try:
            while view:
                sock.settimeout(_left(timeout, httpcore.WriteTimeout))
                view = view[sock.send(view) :]
        except TimeoutError as e:
            raise httpcore.WriteTimeout(e) from e
        except OSError as e:
            raise httpcore.WriteError(e) from e

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        stream = self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout))
        return _BoundedStream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _BoundedBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        limit = _left(timeout, httpcore.ConnectTimeout)
        return _BoundedStream(self._inner.connect_tcp(host, port, limit, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        limit = _left(timeout, httpcore.ConnectTimeout)
        return _BoundedStream(self._inner.connect_unix_socket(path, limit, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _bounded_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """httpx's transport, its connections opened through `_BoundedBackend` (httpcore's pool takes a network
    backend; httpx does not pass one through, so it is set on the pool httpx built)."""
    transport = httpx.HTTPTransport(limits=limits)
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:  # another httpx: each read bounded by timeout_s, not the request
        return transport
    pool._network_backend = _BoundedBackend(backend)  # type: ignore[union-attr]
    return transport
