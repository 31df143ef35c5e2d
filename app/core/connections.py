"""uvicorn's HTTP/1.1 protocol (httptools) with the guards against slow and idle clients it lacks.

uvicorn closes an idle keep-alive connection after `timeout_keep_alive`, but nothing else: a connection
that sends nothing after connecting, or trickles its headers or its body, stays open for ever, and its
`limit_concurrency` counts every open connection, so 1,024 such connections answered every real request
with 503 (issue 32). `guarded_protocol` returns its protocol with, per connection:

- **Headers within `header_timeout_s`**, from the connection's start or from the first byte of a later
  request on it (a keep-alive connection between requests is uvicorn's `timeout_keep_alive`); else it is
  closed, with a 408 when part of a request had come.
- **A body of at least `body_min_bytes_s` bytes a second** on average, judged once `body_grace_s` has passed
  since its headers, time with reading paused by the server (the app not reading yet) not counted; else
  408 and closed (as Kestrel's MinRequestBodyDataRate).
- **Slots for requests, not for idle sockets.** At most `max_requests` requests in flight (uvicorn's 503
  above, as `limit_concurrency` did for its tasks). At most `max_connections` connections open: a new
  one past that closes the connection that has waited longest without a request in flight (idle
  keep-alive, or still sending its headers), so idle connections never shut anyone out; a connection
  with a request in flight is never closed for this.

Timers cost nothing on the common path: a request whose headers (and body) come in one read arms none
after the connection's first.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import monotonic
from typing import Any, ClassVar

from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

# How often a body's rate is judged once its grace period has passed.
BODY_CHECK_S = 1.0
# After a 408, how long what the client still sends is read and dropped before the socket closes.
LINGER_S = 2.0

# Set in the scope of a request whose connection answered 408 for its body: the app's ClientDisconnect is
# then that timeout (app/protocols/http.py `read_body`), counted as the 408 the client read.
BODY_TIMED_OUT = "rsa.body_timed_out"

TIMEOUT_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 15\r\n"
    b"connection: close\r\n\r\nRequest Timeout"
)


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    body_min_bytes_s: float  # bytes a second, on average; 0: no minimum
    body_grace_s: float
    max_connections: int
    max_requests: int


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """One connection; the class attributes are set per server by `guarded_protocol`."""

    limits: ClassVar[ConnectionLimits]
    # Connections without a request in flight, the longest waiting first (a dict keeps insertion order).
    waiting: ClassVar[dict[GuardedHttpToolsProtocol, None]]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limit_concurrency = None  # uvicorn's own check counts idle connections: ours is below
        self._in_headers = False  # a request has begun and its headers are not complete
        self._in_body = False  # headers complete, body not
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_bytes = 0
        self._body_since = 0.0  # monotonic(): when the body's rate is counted from
        self._lingering = False  # answered 408: reading only to drop it, until closed

    # -- the connection ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_late)
        self._wait()
        if len(self.connections) > self.limits.max_connections:
            oldest = next((c for c in self.waiting if c is not self), None)
            if oldest is not None:
                oldest._close(respond=oldest._in_headers)

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.pop(self, None)
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        super().data_received(data)
        # what is still incomplete after this read gets its timer (none if the request came whole)
        if self._in_headers and self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_late)
        elif self._in_body and self._body_timer is None and self.limits.body_min_bytes_s > 0:
            self._body_timer = self.loop.call_later(self.limits.body_grace_s, self._judge_body)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._wait()

    # -- parser callbacks --------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True

    def on_headers_complete(self) -> None:
        self._in_headers, self._in_body = False, True
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self.waiting.pop(self, None)
        self._body_bytes, self._body_since = 0, monotonic()
        self.app = (
            service_unavailable if len(self.tasks) >= self.limits.max_requests else self.config.loaded_app
        )
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_body = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    # -- guards ------------------------------------------------------------------------------------
    def _wait(self) -> None:
        """No request in flight from now: the last in line to be closed for a new connection."""
        self.waiting.pop(self, None)
        self.waiting[self] = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._in_headers or self.cycle is None:  # still no complete request (or none at all yet)
            self._close(respond=self._in_headers)

    def _judge_body(self) -> None:
        self._body_timer = None
        if not self._in_body or self.transport.is_closing():
            return
        now = monotonic()
        if self.flow.read_paused:  # the server is not reading (the app has not asked yet): not the client's
            self._body_since += BODY_CHECK_S
        elif self._body_bytes < self.limits.body_min_bytes_s * (now - self._body_since):
            self._close(respond=self.cycle is None or not self.cycle.response_started)
            return
        self._body_timer = self.loop.call_later(BODY_CHECK_S, self._judge_body)

    def _close(self, respond: bool) -> None:
        self.waiting.pop(self, None)  # never chosen again to make room while it closes
        if self.transport.is_closing() or self._lingering:
            return
        self._cancel_timers()
        if not respond:
            self.transport.close()
            return
        # The 408, then a lingering close (as nginx's lingering_close): the client may still be sending,
        # and a socket closed with bytes unread resets the connection, which loses the answer with it.
        if self.cycle is not None:
            self.cycle.scope[BODY_TIMED_OUT] = True  # type: ignore[literal-required]
        self._lingering = True
        self.transport.write(TIMEOUT_408)
        self.transport.write_eof()
        self.flow.resume_reading()
        self.loop.call_later(LINGER_S, self.transport.close)

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = None


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for one server (uvicorn's `http=`), with these limits."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"limits": limits, "waiting": {}, "__module__": __name__},
    )
