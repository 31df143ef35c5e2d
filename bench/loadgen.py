"""A bounded HTTP load generator against a real server on loopback, every answer checked.

    .venv/bin/python -m bench.loadgen                       # starts `python -m app` itself, 20,000 @ 64
    .venv/bin/python -m bench.loadgen --url http://127.0.0.1:8000 --requests 2000 --json

Without `--url` it starts the service (`sys.executable -m app` on a free 127.0.0.1 port), waits for
`/readyz`, runs the load and stops the service with SIGTERM (its exit code must be 0). Request bodies
are real 96-row windows of the model's data set (ETTh1 for the shipped model), built and serialised once
before anything is timed. Every answer is checked: status 200, the `/v1` answer shape, ids in order,
finite numbers, and numbers equal to onnxruntime run directly on the same windows. The run passes only
with every requested request sent, answered and checked, and zero errors (exit code 1 otherwise).

The parts are reusable for comparing servers: `run_load` (URL, request bodies, answer checker, count,
concurrency, time limit) returns a `LoadResult`; `prepare_forecast_workload` builds the bodies and the
checker for one model version; `local_server` runs the service for the duration of a `with` block.

The client is raw asyncio streams speaking HTTP/1.1 keep-alive with request bytes built once, one
connection per worker coroutine, one event loop. Measured on the 2-core development machine, same bodies
and checks, 64 workers: against a canned-answer server the raw client did ~21,000-26,000 req/s at
0.04 ms of client CPU per request, `httpx.AsyncClient` (pool of 64 keep-alive connections) 286 req/s at
3.4 ms (874 req/s at 1.0 ms with 8); against the service, 253 req/s with the raw client and 65 req/s
with httpx, whose client took the cores the server needed. The table's client and server CPU per request
show on every run which side is the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import http.client
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_BODY_BYTES = 64 * 2**20  # an answer larger than this is a broken server, not a forecast
MAX_ERROR_SAMPLES = 10
MEMO_VARIANTS = 8  # verified answers kept per request body (a batch-dependent last bit makes a few)


# --------------------------------------------------------------------------------------------------
# The core: workers over one shared counter, a raw HTTP/1.1 keep-alive client, per-answer checks.


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


class _Connection:
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
            return await self._answer()
        finally:
            if not sending.done():  # answered mid-upload: this connection cannot carry another request
                sending.cancel()
                self.close()
            elif not sending.cancelled():
                sending.exception()  # retrieved: a reset after the answer came says nothing more

    async def _answer(self) -> tuple[int, bytes]:
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


# The headers `_http_request` writes itself: another value for one of them would make a second copy.
OWN_HEADERS = frozenset({"host", "content-type", "content-length", "connection"})


def _http_request(
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


def _process_cpu_s(pid: int) -> float | None:
    """utime + stime of a process from /proc (Linux); None elsewhere or once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    wire = [_http_request("POST", host, port, path, b, content_type, headers) for b in bodies]
    connections = [_Connection(host, port) for _ in range(concurrency)]
    errors: dict[str, int] = {}
    samples: list[str] = []
    latencies: list[float] = []
    checked = 0
    deadline = time.monotonic() + time_limit_s
    timed_out = False

    def fail(kind: str, detail: str) -> None:
        errors[kind] = errors.get(kind, 0) + 1
        if len(samples) < MAX_ERROR_SAMPLES:
            samples.append(f"{kind}: {detail}")

    statuses: list[int] = []

    async def run_phase(total: int, record: list[float] | None) -> int:
        nonlocal checked, timed_out
        next_i = 0
        done = 0

        async def worker(conn: _Connection) -> None:
            nonlocal next_i, done, checked, timed_out
            while next_i < total:  # one event loop: taking the next index needs no lock
                if time.monotonic() >= deadline:
                    timed_out = True
                    return
                i = next_i
                next_i += 1
                b = i % len(wire)
                t0 = time.perf_counter()
                try:
                    async with asyncio.timeout(request_timeout_s):
                        status, payload = await conn.exchange(wire[b])
                except TimeoutError:
                    conn.close()
                    done += 1
                    fail("timeout", f"request {i}: no answer within {request_timeout_s} s")
                    continue
                except (OSError, EOFError, asyncio.LimitOverrunError, ValueError, IndexError) as e:
                    # IncompleteReadError is an EOFError; ValueError and IndexError: an unparsable head.
                    conn.close()
                    done += 1
                    fail("transport", f"request {i}: {type(e).__name__}: {e}")
                    continue
                if record is not None:
                    record.append((time.perf_counter() - t0) * 1e3)
                    statuses.append(status)
                done += 1
                if status != 200:
                    fail(f"status_{status}", f"request {i}: {payload[:200]!r}")
                    if backoff_s:
                        await asyncio.sleep(backoff_s)
                    continue
                checked += 1
                problem = check(b, payload)
                if problem is not None:
                    fail(problem.kind, f"request {i}: {problem.detail}")

        # The safety net past the per-request timeouts: a worker stuck anyway is cancelled, never awaited
        # forever; the requests it had in flight then count as errors.
        tasks = [asyncio.create_task(worker(c)) for c in connections]
        budget = max(deadline - time.monotonic(), 0) + request_timeout_s + 5
        _, pending = await asyncio.wait(tasks, timeout=budget)
        for t in pending:
            t.cancel()
            fail("cancelled", "a worker was still busy past the time limit and the request timeout")
        if pending:
            await asyncio.wait(pending, timeout=5)
        return done

    try:
        if warmup:
            await run_phase(warmup, None)
        cpu0, server0, t0 = time.process_time(), _server_cpu(server_pid), time.perf_counter()
        completed = await run_phase(requests, latencies) if not timed_out else 0
        duration = time.perf_counter() - t0
        cpu1, server1 = time.process_time(), _server_cpu(server_pid)
    finally:
        for c in connections:
            c.close()
    return LoadResult(
        url=url,
        requests=requests,
        completed=completed,
        checked=checked,
        errors=errors,
        error_samples=samples,
        warmup=warmup,
        concurrency=concurrency,
        series_per_request=series_per_request,
        duration_s=duration,
        time_limit_s=time_limit_s,
        stopped_by_time_limit=timed_out,
        latencies_ms=latencies,
        statuses=statuses,
        client_cpu_s=cpu1 - cpu0,
        server_cpu_s=server1 - server0 if server0 is not None and server1 is not None else None,
    )


def _server_cpu(pid: int | None) -> float | None:
    return None if pid is None else _process_cpu_s(pid)


# --------------------------------------------------------------------------------------------------
# The workload: real windows of the model's data set, as /v1 forecast requests, with reference answers.


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
class Workload:
    path: str  # URL path of the forecast endpoint
    bodies: list[bytes]
    checker: ForecastChecker
    windows: int  # distinct windows across the bodies
    input_length: int
    horizon: int
    channels: int
    content_type: str = "application/json"  # of every body
    headers: dict[str, str] = field(default_factory=dict)  # sent with every body (run_load's `headers`)


def _read_data(csv_path: Path, channels: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The date column and the channels, in manifest order, as float64 (csv + numpy: no pandas needed)."""
    with csv_path.open(newline="") as fh:
        rows = csv.reader(fh)
        header = next(rows)
        missing = [c for c in ("date", *channels) if c not in header]
        if missing:
            raise ValueError(f"{csv_path}: no column(s) {missing} in {header}")
        cols = [header.index(c) for c in channels]
        d = header.index("date")
        dates, values = [], []
        for row in rows:
            dates.append(row[d])
            values.append([float(row[c]) for c in cols])
    return dates, np.asarray(values, dtype=np.float64)


def _phase(date: str, step_seconds: float, period: int) -> int:
    """The window's phase as docs/artifacts.md defines it: integer microseconds, floor, then mod."""
    t_us = int(np.datetime64(date.replace(" ", "T"), "us").astype(np.int64))
    return (t_us // round(step_seconds * 1e6)) % period


def prepare_forecast_workload(
    model: str = "etth1-rsa",
    version: int = 1,
    *,
    repository: Path = REPO / "model_repository",
    data_dir: Path = REPO / "data" / "ETT",
    windows: int = 64,
    series_per_request: int = 1,
) -> Workload:
    """`windows` distinct windows, spread over the data set named in the version's manifest, as bodies
    of `series_per_request` series (one body per window start, series cycling through the windows), and a
    checker holding onnxruntime's forecasts for them (CPU provider, the version's own model.onnx)."""
    import onnxruntime as ort  # here, so `run_load` alone does not need it

    vdir = repository / model / str(version)
    manifest = json.loads((vdir / "manifest.json").read_text())
    L, H, channels = manifest["input_length"], manifest["horizon"], manifest["channels"]
    dates, values = _read_data(data_dir / manifest["dataset"]["file"], channels)
    if len(values) - L + 1 < windows:
        raise ValueError(f"{len(values)} rows give fewer than {windows} distinct windows of {L}")
    starts = np.linspace(0, len(values) - L, windows).round().astype(int)
    x = np.stack([values[s : s + L] for s in starts])
    cycle = manifest.get("cycle")
    feed: dict[str, np.ndarray] = {"window": x.astype(np.float32)}
    if cycle:  # a cycle model needs each series' `start`, and the graph its phase
        feed["phase"] = np.array(
            [_phase(dates[s], cycle["step_seconds"], cycle["period"]) for s in starts], dtype=np.int64
        )
    session = ort.InferenceSession(str(vdir / "model.onnx"), providers=["CPUExecutionProvider"])
    (reference,) = session.run(["forecast"], feed)
    del session

    bodies, ids, expected = [], [], []
    for b in range(windows):
        picks = [(b * series_per_request + s) % windows for s in range(series_per_request)]
        body_ids = [f"b{b}s{s}w{w}" for s, w in enumerate(picks)]
        series = []
        for sid, w in zip(body_ids, picks, strict=True):
            one: dict[str, Any] = {"id": sid, "values": x[w].tolist()}
            if cycle:
                one["start"] = dates[starts[w]].replace(" ", "T")
            series.append(one)
        bodies.append(json.dumps({"series": series, "horizon": H}, separators=(",", ":")).encode())
        ids.append(body_ids)
        expected.append(reference[picks])
    return Workload(
        path=f"/v1/models/{model}/versions/{version}/forecast",
        bodies=bodies,
        checker=ForecastChecker(model, version, ids, expected),
        windows=windows,
        input_length=L,
        horizon=H,
        channels=len(channels),
    )


# --------------------------------------------------------------------------------------------------
# The service under test, when no --url is given.


@dataclass
class LocalServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    exit_code: int | None = None

    def output(self, tail: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    # http.client, not urllib: urllib would honour *_proxy variables, and this traffic stays on loopback.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@contextmanager
def local_server(
    env: dict[str, str] | None = None, *, ready_timeout_s: float = 90.0, stop_timeout_s: float = 40.0
) -> Iterator[LocalServer]:
    """`sys.executable -m app` on a free 127.0.0.1 port until /readyz is 200; SIGTERM on exit.

    The server's environment is ours without RSA_* variables (a stray setting must not change what is
    measured), plus `env`. `exit_code` is set once it has stopped (after a bounded wait, killed if need
    be: then it is the kill's negative signal number, never 0).
    """
    port = free_port()
    server_env = {k: v for k, v in os.environ.items() if not k.startswith("RSA_")}
    server_env.update({"RSA_LOG_LEVEL": "WARNING", **(env or {})})
    server_env.update({"RSA_HOST": "127.0.0.1", "RSA_PORT": str(port)})
    log_dir = Path(tempfile.mkdtemp(prefix="loadgen-"))
    log = log_dir / "server.log"
    with log.open("wb") as sink:  # a file, not a pipe: nobody reads it while the load runs
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=REPO, env=server_env, stdout=sink, stderr=subprocess.STDOUT
        )
    server = LocalServer(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not _ready(port):
            if process.poll() is not None:
                raise RuntimeError(f"the service exited with {process.returncode}:\n{server.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service not ready after {ready_timeout_s} s:\n{server.output()}")
            time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        server.exit_code = process.returncode


# --------------------------------------------------------------------------------------------------
# The command line.


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running service (default: start `python -m app` on loopback)")
    ap.add_argument("--requests", type=int, default=20000, help="measured requests (default 20000)")
    ap.add_argument("--concurrency", type=int, default=64, help="worker coroutines, one connection each")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds; no request starts after")
    ap.add_argument("--request-timeout", type=float, default=30.0, help="seconds per request")
    ap.add_argument("--warmup", type=int, default=256, help="checked, untimed requests first")
    ap.add_argument("--model", default="etth1-rsa")
    ap.add_argument("--version", type=int, default=1)
    ap.add_argument("--series-per-request", type=int, default=1)
    ap.add_argument("--windows", type=int, default=64, help="distinct data windows in the bodies")
    ap.add_argument(
        "--server-env", action="append", default=[], metavar="RSA_X=V", help="for the started service"
    )
    ap.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    args = ap.parse_args(argv)
    if args.series_per_request < 1 or args.windows < 1:
        ap.error("--series-per-request and --windows must be >= 1")
    for item in args.server_env:
        if "=" not in item:
            ap.error(f"--server-env {item!r}: expected NAME=VALUE")
    return args


def format_table(result: LoadResult, checker: ForecastChecker | None = None) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.errors.items())) or "none"
    pct = "  ".join(f"p{q} {result.percentile_ms(q):.1f}" for q in (50, 90, 99))
    series_per_s = result.throughput * result.series_per_request
    client_ms = 1e3 * result.client_cpu_s / max(result.completed, 1)
    rows = [
        ("url", result.url),
        ("requests", f"{result.completed} of {result.requests} (+ {result.warmup} warm-up)"),
        ("concurrency", str(result.concurrency)),
        ("answers checked", str(result.checked)),
        ("errors", f"{result.error_count} ({kinds})"),
        ("duration", f"{result.duration_s:.2f} s"),
        ("throughput", f"{result.throughput:.0f} req/s, {series_per_s:.0f} series/s"),
        ("latency ms", f"{pct}  max {max(result.latencies_ms, default=math.nan):.1f}"),
        ("client CPU", f"{result.client_cpu_s:.1f} s ({client_ms:.2f} ms/req)"),
    ]
    if checker is not None:
        rows.insert(4, ("  parsed", f"{checker.parsed} (others byte-identical to a verified answer)"))
    if result.server_cpu_s is not None:
        ms = 1e3 * result.server_cpu_s / max(result.completed, 1)
        rows.append(("server CPU", f"{result.server_cpu_s:.1f} s ({ms:.2f} ms/req)"))
    if result.server_exit_code is not None:
        rows.append(("server exit code", str(result.server_exit_code)))
    if result.stopped_by_time_limit:
        rows.append(("time limit", f"reached after {result.time_limit_s:.0f} s: stopped sending"))
    rows.append(("result", "PASS" if result.passed else "FAIL"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += [f"  {s}" for s in result.error_samples]
    return "\n".join(lines)


def execute(args: argparse.Namespace) -> tuple[LoadResult, ForecastChecker]:
    """Prepare the workload, start the service unless --url, run the load, stop the service."""
    work = prepare_forecast_workload(
        args.model, args.version, windows=args.windows, series_per_request=args.series_per_request
    )

    def load(base: str, pid: int | None) -> LoadResult:
        return asyncio.run(
            run_load(
                base.rstrip("/") + work.path,
                work.bodies,
                work.checker,
                requests=args.requests,
                concurrency=args.concurrency,
                time_limit_s=args.time_limit,
                warmup=args.warmup,
                request_timeout_s=args.request_timeout,
                series_per_request=args.series_per_request,
                server_pid=pid,
            )
        )

    if args.url:
        return load(args.url, None), work.checker
    env = dict(item.split("=", 1) for item in args.server_env)
    with local_server(env) as server:
        result = load(server.url, server.process.pid)
    result.server_exit_code = server.exit_code
    if server.exit_code != 0:
        result.error_samples.append(f"server exited with {server.exit_code}:\n{server.output()}")
    return result, work.checker


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result, checker = execute(args)
    if args.json:
        print(json.dumps(result.summary() | {"parsed_answers": checker.parsed}, indent=2))
    else:
        print(format_table(result, checker))
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
