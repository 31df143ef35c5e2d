"""Load generation: a bounded HTTP/1.1 keep-alive client on loopback, every answer handed to a checker.

`run_load` (URL, request bodies, answer checker, count, concurrency, time limit) returns a `LoadResult`.
The client is raw asyncio streams with request bytes built once, one connection per worker coroutine,
one event loop: measured on the 2-core development machine it costs ~0.04 ms of CPU per request
(`httpx.AsyncClient` 1-3.4 ms), so the server, not the client, is what a table measures (bench.loadgen's
docstring has the numbers).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from bench.harness.measure import process_cpu_s

if TYPE_CHECKING:
    from bench.harness.workloads import Workload

LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_BODY_BYTES = 64 * 2**20  # an answer larger than this is a broken server, not a forecast
MAX_ERROR_SAMPLES = 10


@dataclass(frozen=True)
class Failure:
    """Why an answer is wrong: `kind` is counted, `detail` kept for the first few."""

    kind: str
    detail: str


# (index of the request body that was sent, response body) -> None when the answer is right.
Checker = Callable[[int, bytes], Failure | None]


@dataclass
class LoadResult:
    url: str
    requests: int  # asked for, measured phase
    completed: int  # measured requests sent and finished (answered, or failed in transport)
    checked: int  # 200 answers passed to the checker, warm-up included
    errors: dict[str, int]  # by kind, warm-up included: status_<code>, transport, bad_body, mismatch, ...
    error_samples: list[str]
    warmup: int
    concurrency: int
    series_per_request: int
    duration_s: float  # measured phase
    time_limit_s: float
    stopped_by_time_limit: bool
    latencies_ms: list[float] = field(repr=False)  # measured answers (any status), in completion order
    client_cpu_s: float  # this process, measured phase
    server_cpu_s: float | None = None  # the server process, measured phase, when its pid was given
    server_exit_code: int | None = None  # set by whoever started the server
    statuses: list[int] = field(repr=False, default_factory=list)  # status of each measured answer

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def passed(self) -> bool:
        sent_all = self.completed == self.requests and not self.stopped_by_time_limit
        server_ok = self.server_exit_code in (None, 0)
        return sent_all and self.error_count == 0 and server_ok

    @property
    def throughput(self) -> float:
        return self.completed / self.duration_s if self.duration_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else math.nan

    def summary(self) -> dict[str, Any]:
        """Everything but the raw latencies, plus the derived numbers: what `--json` prints."""
        out = {k: v for k, v in asdict(self).items() if k not in ("latencies_ms", "statuses")}
        out.update(
            passed=self.passed,
            error_count=self.error_count,
            throughput_rps=self.throughput,
            series_per_s=self.throughput * self.series_per_request,
            # None, not NaN, when nothing was answered: NaN is not JSON.
            latency_ms={f"p{q}": self.percentile_ms(q) if self.latencies_ms else None for q in (50, 90, 99)}
            | {"max": max(self.latencies_ms, default=None)},
        )
        return out


class Connection:
    """One keep-alive HTTP/1.1 connection, opened on first use and again after any failure."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=2**20)
        assert self.reader is not None
        self.writer.write(request)
        # The answer is read while the request is still being sent, as an HTTP client does: a server
        # may refuse a big body before reading it (503 from admission), and that answer's time is when
        # it came, not when this client finished uploading a body nobody reads.
        sending = asyncio.ensure_future(self.writer.drain())
        try:
            return await self.read_answer()
        finally:
            if not sending.done():  # answered mid-upload: this connection cannot carry another request
                sending.cancel()
                self.close()
            elif not sending.cancelled():
                sending.exception()  # retrieved: a reset after the answer came says nothing more

    async def read_answer(self) -> tuple[int, bytes]:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length: int | None = None
        chunked = close = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = b"close" in value.lower()
        if status in (204, 304) or status < 200:  # never a body (no 1xx is asked for: no Expect header)
            body = b""
        elif chunked:
            body = await self._read_chunked()
        elif length is not None:
            if length > MAX_BODY_BYTES:
                raise ValueError(f"content-length {length} above {MAX_BODY_BYTES}")
            body = await self.reader.readexactly(length)
        else:  # no length: the body runs to the end of the connection
            body, close = await self._read_to_eof(), True
        if close:
            self.close()
        return status, body

    async def _read_chunked(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        size_total = 0
        while True:  # bounded: every chunk counts towards MAX_BODY_BYTES, and the caller's timeout
            size = int((await self.reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                while (await self.reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return b"".join(parts)
            size_total += size
            if size_total > MAX_BODY_BYTES:
                raise ValueError(f"chunked body above {MAX_BODY_BYTES}")
            parts.append((await self.reader.readexactly(size + 2))[:-2])

    async def _read_to_eof(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        size_total = 0
        while part := await self.reader.read(2**16):  # bounded like a chunked body
            size_total += len(part)
            if size_total > MAX_BODY_BYTES:
                raise ValueError(f"body above {MAX_BODY_BYTES}")
            parts.append(part)
        return b"".join(parts)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# The headers `http_request` writes itself: another value for one of them would make a second copy.
OWN_HEADERS = frozenset({"host", "content-type", "content-length", "connection"})


def http_request(
    method: str,
    host: str,
    port: int,
    path: str,
    body: bytes,
    content_type: str,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The request's bytes; `headers` are sent after the client's own (none of which they may name)."""
    extra = ""
    for name, value in (headers or {}).items():
        # a line break would end the header (or the head) early; a colon in a name would split it wrong
        if name.lower() in OWN_HEADERS or ":" in name or any(c in name + value for c in "\r\n"):
            raise ValueError(f"header {name!r}: {value!r} cannot be sent")
        extra += f"{name}: {value}\r\n"
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n{extra}Connection: keep-alive\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Phases:
    """What the warm-up and the measured phase share: the connections, the request bytes, the deadline,
    and the counts, samples, latencies and statuses every answer adds to."""

    def __init__(
        self,
        wire: list[bytes],
        check: Checker,
        connections: list[Connection],
        deadline: float,
        request_timeout_s: float,
        backoff_s: float,
    ) -> None:
        self.wire, self.check, self.connections, self.deadline = wire, check, connections, deadline
        self.request_timeout_s, self.backoff_s = request_timeout_s, backoff_s
        self.errors: dict[str, int] = {}
        self.samples: list[str] = []
        self.latencies: list[float] = []
        self.statuses: list[int] = []
        self.checked = 0
        self.timed_out = False

    def fail(self, kind: str, detail: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if len(self.samples) < MAX_ERROR_SAMPLES:
            self.samples.append(f"{kind}: {detail}")

    async def send(self, conn: Connection, i: int, record: list[float] | None) -> tuple[int, bytes] | None:
        """Request i's status and body, its latency recorded when `record` is given; None when it timed
        out or failed in transport (counted as such)."""
        wire = self.wire[i % len(self.wire)]
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.request_timeout_s):
                status, payload = await conn.exchange(wire)
        except TimeoutError:
            conn.close()
            self.fail("timeout", f"request {i}: no answer within {self.request_timeout_s} s")
            return None
        except (OSError, EOFError, asyncio.LimitOverrunError, ValueError, IndexError) as e:
            # IncompleteReadError is an EOFError; ValueError and IndexError: an unparsable head.
            conn.close()
            self.fail("transport", f"request {i}: {type(e).__name__}: {e}")
            return None
        if record is not None:
            record.append((time.perf_counter() - t0) * 1e3)
            self.statuses.append(status)
        return status, payload

    async def run(self, total: int, record: list[float] | None) -> int:
        """`total` requests from one worker per connection; how many were sent and finished."""
        next_i = 0
        done = 0

        async def worker(conn: Connection) -> None:
            nonlocal next_i, done
            while next_i < total:  # one event loop: taking the next index needs no lock
                if time.monotonic() >= self.deadline:
                    self.timed_out = True
                    return
                i = next_i
                next_i += 1
                answer = await self.send(conn, i, record)
                done += 1
                if answer is None:
                    continue
                status, payload = answer
                if status != 200:
                    self.fail(f"status_{status}", f"request {i}: {payload[:200]!r}")
                    if self.backoff_s:
                        await asyncio.sleep(self.backoff_s)
                    continue
                self.checked += 1
                problem = self.check(i % len(self.wire), payload)
                if problem is not None:
                    self.fail(problem.kind, f"request {i}: {problem.detail}")

        # The safety net past the per-request timeouts: a worker stuck anyway is cancelled, never awaited
        # forever; the requests it had in flight then count as errors.
        tasks = [asyncio.create_task(worker(c)) for c in self.connections]
        budget = max(self.deadline - time.monotonic(), 0) + self.request_timeout_s + 5
        _, pending = await asyncio.wait(tasks, timeout=budget)
        for t in pending:
            t.cancel()
            self.fail("cancelled", "a worker was still busy past the time limit and the request timeout")
        if pending:
            await asyncio.wait(pending, timeout=5)
        return done


async def run_load(
    url: str,
    bodies: Sequence[bytes],
    check: Checker,
    *,
    requests: int,
    concurrency: int,
    time_limit_s: float,
    warmup: int = 0,
    request_timeout_s: float = 30.0,
    series_per_request: int = 1,
    content_type: str = "application/json",
    headers: Mapping[str, str] | None = None,
    server_pid: int | None = None,
    backoff_s: float = 0.0,
) -> LoadResult:
    """POST `requests` bodies (body i % len(bodies) for request i) to `url` from `concurrency` workers.

    `headers`: sent with every body, after Host, Content-Type and Content-Length (which they may not name).

    `backoff_s`: a worker pauses this long after an answer other than 200, as a client honouring
    a 503's Retry-After would (0: retry at once, an unbounded offered load under overload).
    `warmup` requests go first, checked but not timed. No request starts after `time_limit_s` (from the
    start of the warm-up); one in flight is given up after `request_timeout_s`. Only loopback URLs.
    """
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK:
        raise ValueError(f"{url!r}: only http:// on loopback ({', '.join(LOOPBACK)}) is load-tested")
    if not bodies or requests < 1 or concurrency < 1 or warmup < 0 or time_limit_s <= 0:
        raise ValueError("need bodies, requests >= 1, concurrency >= 1, warmup >= 0, time_limit_s > 0")
    host, port = parts.hostname, parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    wire = [http_request("POST", host, port, path, b, content_type, headers) for b in bodies]
    connections = [Connection(host, port) for _ in range(concurrency)]
    deadline = time.monotonic() + time_limit_s
    phases = _Phases(wire, check, connections, deadline, request_timeout_s, backoff_s)
    try:
        if warmup:
            await phases.run(warmup, None)
        cpu0, server0, t0 = time.process_time(), _server_cpu(server_pid), time.perf_counter()
        completed = await phases.run(requests, phases.latencies) if not phases.timed_out else 0
        duration = time.perf_counter() - t0
        cpu1, server1 = time.process_time(), _server_cpu(server_pid)
    finally:
        for c in connections:
            c.close()
    return LoadResult(
        url=url,
        requests=requests,
        completed=completed,
        checked=phases.checked,
        errors=phases.errors,
        error_samples=phases.samples,
        warmup=warmup,
        concurrency=concurrency,
        series_per_request=series_per_request,
        duration_s=duration,
        time_limit_s=time_limit_s,
        stopped_by_time_limit=phases.timed_out,
        latencies_ms=phases.latencies,
        statuses=phases.statuses,
        client_cpu_s=cpu1 - cpu0,
        server_cpu_s=server1 - server0 if server0 is not None and server1 is not None else None,
    )


def _server_cpu(pid: int | None) -> float | None:
    return None if pid is None else process_cpu_s(pid)


def load_workload(base_url: str, work: Workload, **options: Any) -> LoadResult:
    """`run_load` of `work`'s bodies on its path, checked by its checker, with its content type, headers
    and series per request; `options` are run_load's (requests, concurrency, time_limit_s, ...)."""
    return asyncio.run(
        run_load(
            base_url + work.path,
            work.bodies,
            work.checker,
            series_per_request=work.series_per_request,
            content_type=work.content_type,
            headers=work.headers,
            **options,
        )
    )
