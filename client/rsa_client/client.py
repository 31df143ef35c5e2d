"""The client: a long DataFrame in, binary OIP v2 requests sized under the server's limits, a long
DataFrame out; plus attention inspection and the repository API.

Wire (docs/protocols.md, OIP v2 with Triton's binary tensor extension): each request carries `window`
FP32 [n, L, C] (each series' last L rows, channels in the model's order) and, for a model with a seasonal
cycle, `start` INT64 [n] (Unix seconds of each window's first row, from which the service computes the
phase exactly as /v1 does); for a global model (its /v1/models entry has a `panel` block), a series of
`min_history` to L rows is sent right-aligned in its row of `window`, with `lengths` INT64 [n] (the values
each row holds); it asks `forecast` and `forecast_lo_{level}` / `forecast_hi_{level}` in
binary. The model's channels, input length, horizon, frequency and levels come from `/v1/models/{name}`,
the request limits from the OIP v2 model metadata's `parameters`.

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
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

import httpcore
import httpx
import numpy as np
import pandas as pd

from rsa_client.explain import Explanation, explanation
from rsa_core.calendar import calendar_step
from rsa_core.future import future_rows_problem
from rsa_core.steps import shifted, steps_after
from rsa_core.wallclock import localize
from rsa_core.windows import right_aligned as _right_aligned
from rsa_core.zones import model_zone

# What a request holds besides its tensors (the JSON header), with room to spare.
_HEADER_ALLOWANCE = 16 * 1024
# The service's defaults (app/core/config.py), for a server whose metadata does not say its limits.
_DEFAULT_MAX_SERIES = 1024
_DEFAULT_MAX_BODY = 64 * 1024 * 1024
_WINDOW_ROW = re.compile(r"window\[(\d+)\]")
# The trainer's rule of naive local times, by the name the client's tests knew it under.
_wall_clock = localize


class ServiceError(Exception):
    """An answer the client does not retry: the status, the server's message, and the series (ids) of
    the request it refused: the one the message names when it names a window, else all of them."""

    def __init__(self, status: int, message: str, series: Sequence[Any] = ()) -> None:
        self.status = status
        self.message = message
        self.series = list(series)
        shown = ", ".join(repr(s) for s in self.series[:5])
        more = f" and {len(self.series) - 5} more" if len(self.series) > 5 else ""
        where = f" (series {shown}{more})" if self.series else ""
        super().__init__(f"HTTP {status}{where}: {message}")


@dataclass(frozen=True)
class ModelLimits:
    max_series_per_request: int
    max_body_bytes: int

    def rows_per_request(
        self,
        input_length: int,
        n_channels: int,
        with_start: bool,
        covariate_bytes: int = 0,
        with_lengths: bool = False,
    ) -> int:
        """Windows per request under both limits; `covariate_bytes`: a window's covariate tensors;
        `with_lengths`: a global model's `lengths` (8 bytes a window)."""
        per_row = input_length * n_channels * 4 + (8 if with_start else 0) + covariate_bytes
        per_row += 8 if with_lengths else 0
        fit = (self.max_body_bytes - _HEADER_ALLOWANCE) // per_row
        return max(1, min(self.max_series_per_request, fit))


@dataclass(frozen=True)
class ModelSpec:
    """One served version, as /v1/models/{name} describes it."""

    name: str
    version: int
    channels: list[str]
    input_length: int
    horizon: int
    frequency: str | None
    frequency_seconds: float | None
    has_cycle: bool
    levels: list[float]
    limits: ModelLimits
    # A covariate model's covariates as /v1/models lists them: name, kind (past, future, calendar,
    # static), dtype, categories; empty for any other model.
    covariates: tuple[dict[str, Any], ...] = ()
    timezone: str | None = None  # the model's zone: where a naive time is read (None: UTC)
    # A global model's fewest values a series may have (its `panel.min_history`); None: not global,
    # every series needs the input length.
    min_history: int | None = None

    def covariate_names(self, kind: str) -> list[str]:
        return [c["name"] for c in self.covariates if c["kind"] == kind]


class Client:
    """`Client(url)`: the service at `url` (e.g. http://127.0.0.1:8000).

    `concurrency`: requests in flight at once; `max_retries`: tries of a request answered 503 or 429 (each
    after its `Retry-After`, at most `max_wait_s`) before the error is raised."""

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

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------------------------
    def _send(self, method: str, path: str, series: Sequence[Any] = (), **kwargs: Any) -> httpx.Response:
        """One call, retried on 503 and 429 after the server's Retry-After (bounded); any other error
        status raises ServiceError naming `series`. Each request is bounded by `timeout_s` as a whole
        (httpx.TimeoutException past it, whatever the server trickles)."""
        for attempt in range(self.max_retries + 1):
            _DEADLINE.at = time.monotonic() + self.timeout_s
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.TimeoutException as e:
                raise type(e)(
                    f"{method} {path}: no complete answer within timeout_s = {self.timeout_s:g} s ({e})"
                ) from e
            finally:
                _DEADLINE.at = None
            if response.status_code < 400:
                return response
            if response.status_code in (429, 503) and attempt < self.max_retries:
                time.sleep(self._wait(response, attempt))
                continue
            raise _error(response, series)
        raise AssertionError("unreachable")  # the last attempt returns or raises

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

    # -- models -----------------------------------------------------------------------------------
    def model(self, name: str, version: int | None = None) -> ModelSpec:
        """The version that serves `name` (the latest when `version` is None) and the server's limits."""
        response = self._send("GET", f"/v1/models/{name}")
        info = _json(response)
        with _reading(response):
            number = version if version is not None else info.get("latest_version")
            entry = next((v for v in info["versions"] if v["version"] == number), None)
        if entry is None or entry.get("state") not in (None, "ready"):
            raise ValueError(f"model {name!r} has no ready version {number}")
        with _reading(response):
            panel = entry.get("panel") or {}
            described = dict(
                channels=[str(c) for c in entry["channels"]],
                input_length=int(entry["input_length"]),
                horizon=int(entry["horizon"]),
                frequency=entry.get("frequency"),
                frequency_seconds=entry.get("frequency_seconds"),
                levels=[float(v) for v in (entry.get("intervals") or {}).get("levels", [])],
                covariates=tuple(panel.get("covariates") or ()),
                timezone=entry.get("timezone"),
                min_history=panel.get("min_history"),
            )
        metadata = self._send("GET", f"/v2/models/{name}/versions/{number}")
        meta = _json(metadata)
        with _reading(metadata):
            params = meta.get("parameters") or {}
            limits = ModelLimits(
                int(params.get("max_series_per_request", _DEFAULT_MAX_SERIES)),
                int(params.get("max_body_bytes", _DEFAULT_MAX_BODY)),
            )
            has_cycle = any(i["name"] == "start" or i["name"] == "phase" for i in meta["inputs"])
        return ModelSpec(name=name, version=int(number), has_cycle=has_cycle, limits=limits, **described)

    # -- forecast ---------------------------------------------------------------------------------
    def forecast(
        self,
        df: pd.DataFrame,
        h: int | None = None,
        level: Sequence[float] | None = None,
        model: str | None = None,
        version: int | None = None,
        *,
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
        X_df: pd.DataFrame | None = None,  # noqa: N803  (TimeGPT's name for the future values)
    ) -> pd.DataFrame:
        """`df`: long format, one row per series and step: `id_col`, `time_col` and the model's channel
        columns (or `y` for a one-channel model). Each series' last L rows are forecast; a global
        model's series may be shorter, down to its `min_history` rows (a shorter one is refused here,
        naming it, before any request).

        A covariate model's past covariates and statics are further columns of `df`, named as the model
        names them (a past one: a value per row, NaN where not observed; a static one: one value per
        series); its future-known covariates are `X_df`: long, `id_col`, `time_col` and a column per
        future covariate, the model's H steps after each series' last row. What is missing or wrong is
        refused here, naming the series and the column, before any request.

        `target_col`: a one-channel model's target column when it is not `y` (any name).

        Returns one row per series and future step: `id_col`, `time_col`, the forecast in a column named
        after the model (`forecast_columns`: `{model}`, or `{model}-{channel}` per channel of a wider
        one) and, per level, `{column}-lo-{level}` and `{column}-hi-{level}`.

        Without `model`: the service's pretrained model of `df`'s frequency answers (`POST /v1/forecast`,
        `forecast_pretrained`); the forecast's column is named after the model that answered."""
        if model is None:
            if version is not None or X_df is not None:
                raise ValueError("version and X_df need a model: name it (model=...)")
            return self.forecast_pretrained(
                df, h, level, id_col=id_col, time_col=time_col, target_col=target_col
            )

        spec = self.model(model, version)
        h = spec.horizon if h is None else h
        if not 1 <= h <= spec.horizon:
            raise ValueError(f"h must be between 1 and the model's horizon {spec.horizon}, got {h}")
        levels = [float(v) for v in (level or [])]
        missing = [v for v in levels if v not in spec.levels]
        if missing:
            raise ValueError(
                f"levels {missing} are not calibrated for {model} v{spec.version}: {spec.levels}"
            )
        columns = _channel_columns(df, spec, target_col)
        frame, instants = _ordered(df, id_col, time_col, spec.timezone)
        ids = frame[id_col].to_numpy()
        values = frame[columns].to_numpy(np.float64)
        stamps = instants.astype("datetime64[s]").astype(np.int64)  # Unix seconds
        cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        begins = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [len(ids)]])
        series_ids = ids[begins]
        L = spec.input_length
        least = L if spec.min_history is None else spec.min_history
        short = np.flatnonzero(ends - begins < least)
        if len(short):
            named = ", ".join(f"{series_ids[i]!r} ({ends[i] - begins[i]} rows)" for i in short[:5])
            limit = (
                f"the model's input length {L}"
                if spec.min_history is None
                else f"the model's min_history {least} (a global model forecasts {least} to {L} values)"
            )
            raise ValueError(f"{len(short)} series are shorter than {limit}: {named}")
        lengths = np.minimum(ends - begins, L)
        covariates = _covariate_tensors(
            spec, frame, X_df, series_ids, begins, ends, stamps[ends - 1], id_col, time_col
        )
        extra = sum(a[0].nbytes for _, _, a in covariates) if len(ends) else 0
        per_request = spec.limits.rows_per_request(
            L, len(columns), spec.has_cycle, extra, with_lengths=spec.min_history is not None
        )
        chunks = [slice(i, min(i + per_request, len(ends))) for i in range(0, len(ends), per_request)]
        outputs = ["forecast"] + [f"forecast_{side}_{v:g}" for v in levels for side in ("lo", "hi")]
        firsts = _window_starts(spec, stamps, begins, ends, _zone(spec))

        def run(chunk: slice) -> dict[str, np.ndarray]:
            # The steps before a short series' start hold 0, not NaN: the service takes any finite number
            # there and ignores it (oip_v2 `_mask_start` marks them missing after its checks), while
            # `check_windows` refuses a NaN there as a value that is not finite.
            window = _right_aligned(values, begins[chunk], ends[chunk], L, 0.0)
            start = firsts[chunk] if spec.has_cycle else None
            named = [(name, datatype, array[chunk]) for name, datatype, array in covariates]
            if spec.min_history is not None:
                named.insert(0, ("lengths", "INT64", lengths[chunk].astype("<i8")))
            return self._infer(spec, window, start, outputs, series_ids[chunk], named)

        def run_or_halve(chunk: slice) -> dict[str, np.ndarray]:
            # A 504: the service's deadline passed before the call's windows were done (a loaded server;
            # the 100,000-series bench lost a part of 1,024 windows to the 30 s deadline at load ~10,
            # BENCHMARKS.md §8). Each half is asked again, down to one window, so a table finishes where
            # its calls fit; any other error, or a 504 on one window, is raised.
            try:
                return run(chunk)
            except ServiceError as e:
                if e.status != 504 or chunk.stop - chunk.start < 2:
                    raise
            mid = (chunk.start + chunk.stop) // 2
            first, second = run_or_halve(slice(chunk.start, mid)), run_or_halve(slice(mid, chunk.stop))
            return {name: np.concatenate([first[name], second[name]]) for name in first}

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            answers = list(pool.map(run_or_halve, chunks))
        out = {name: np.concatenate([a[name] for a in answers])[:, :h] for name in outputs}
        frame_out = _long_frame(spec, out, levels, columns, series_ids, stamps[ends - 1], h, id_col, time_col)
        if spec.timezone and pd.to_datetime(frame[time_col]).dt.tz is None:
            # naive in, naive out: the model's wall clock, as /v1 shows its timestamps (without the offset)
            local = frame_out[time_col].dt.tz_localize("UTC").dt.tz_convert(spec.timezone)
            frame_out[time_col] = local.dt.tz_localize(None)
        return frame_out

    def forecast_pretrained(
        self,
        df: pd.DataFrame,
        h: int | None = None,
        level: Sequence[float] | None = None,
        freq: str | None = None,
        *,
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
    ) -> pd.DataFrame:
        """Forecast `df` (long: `id_col`, `time_col`, `target_col` or `y`) with no model named: `POST
        /v1/forecast`, the service's pretrained model of the series' frequency (`freq`, a pandas alias;
        default: the median step of the series' timestamps, h, D, W, MS, QS or YS; else the service
        reads each series' first timestamp). Missing values (NaN) are sent as missing. Returns `id_col`,
        `time_col` and the forecast in a column named after the model that answered (`{model}-lo-80`,
        ... per level); `frame.attrs["model"]`, `["version"]`: which one."""
        target = target_col or "y"
        if target not in df.columns:
            raise ValueError(f"df has no column {target!r} (give target_col)")
        frame = df.sort_values([id_col, time_col], kind="stable")
        groups = [(str(sid), rows) for sid, rows in frame.groupby(id_col, sort=False)]
        if freq is None:
            aliases = (_step_alias(pd.DatetimeIndex(r[time_col])) for _, r in groups if len(r) >= 2)
            inferred = {a for a in aliases if a is not None}
            if len(inferred) > 1:
                raise ValueError(
                    f"df's series have different frequencies {sorted(inferred)}: forecast them apart"
                )
            freq = inferred.pop() if inferred else None
        options: dict[str, Any] = {} if h is None else {"horizon": int(h)}
        if level:
            options["level"] = [float(v) for v in level]
        if freq is not None:
            options["freq"] = freq

        def item(sid: str, rows: pd.DataFrame) -> dict[str, Any]:
            values = rows[target].to_numpy(np.float64)
            start = pd.Timestamp(rows[time_col].iloc[0])
            return {
                "id": sid,
                "start": start.isoformat(),
                "values": [None if math.isnan(v) else float(v) for v in values],
            }

        def run(chunk: list[tuple[str, pd.DataFrame]]) -> Any:
            body = {"series": [item(sid, rows) for sid, rows in chunk], **options}
            ids = [sid for sid, _ in chunk]
            return _json(self._send("POST", "/v1/forecast", ids, json=body), ids)

        per_request = _DEFAULT_MAX_SERIES
        chunks = [groups[i : i + per_request] for i in range(0, len(groups), per_request)]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            answers = list(pool.map(run, chunks))
        frames = []
        for answer in answers:
            name = answer["model"]
            for one in answer["forecasts"]:
                data: dict[str, Any] = {
                    id_col: one["id"],
                    time_col: pd.to_datetime(one["timestamps"], utc=True, format="ISO8601"),
                    name: np.array(one["forecast"], np.float64)[:, 0],
                }
                for v in options.get("level", []):
                    for side in ("lo", "hi"):
                        data[f"{name}-{side}-{v:g}"] = np.array(one[f"{side}-{v:g}"], np.float64)[:, 0]
                frames.append(pd.DataFrame(data))
        out = pd.concat(frames, ignore_index=True)
        if pd.DatetimeIndex(frame[time_col]).tz is None:  # naive in, naive out
            out[time_col] = out[time_col].dt.tz_localize(None)
        out.attrs["model"], out.attrs["version"] = answers[0]["model"], answers[0]["version"]
        return out

    def _infer(
        self,
        spec: ModelSpec,
        window: np.ndarray,
        start: np.ndarray | None,
        outputs: list[str],
        series: np.ndarray,
        covariates: Sequence[tuple[str, str, np.ndarray]] = (),
    ) -> dict[str, np.ndarray]:
        tensors = [("window", "FP32", window)]
        if start is not None:
            tensors.append(("start", "INT64", start.astype("<i8")))
        tensors += covariates
        header = {
            "inputs": [
                {
                    "name": name,
                    "datatype": datatype,
                    "shape": list(array.shape),
                    "parameters": {"binary_data_size": array.nbytes},
                }
                for name, datatype, array in tensors
            ],
            "outputs": [{"name": o, "parameters": {"binary_data": True}} for o in outputs],
        }
        head = json.dumps(header).encode()
        body = head + b"".join(np.ascontiguousarray(a).tobytes() for _, _, a in tensors)
        response = self._send(
            "POST",
            f"/v2/models/{spec.name}/versions/{spec.version}/infer",
            list(series),
            content=body,
            headers={
                "Content-Type": "application/octet-stream",
                "Inference-Header-Content-Length": str(len(head)),
            },
        )
        with _reading(response, list(series)):
            out = _decode(response)
            want = (len(window), spec.horizon, window.shape[2])
            for name in outputs:
                if name not in out:
                    raise KeyError(f"output {name!r} missing")
                if out[name].shape != want:
                    raise ValueError(f"output {name!r} has shape {list(out[name].shape)}, not {list(want)}")
        return out

    # -- attention --------------------------------------------------------------------------------
    def attention(
        self,
        df: pd.DataFrame,
        model: str = "etth1-rsa",
        version: int | None = None,
        *,
        time_col: str = "ds",
        target_col: str | None = None,
        **options: Any,
    ) -> dict[str, Any] | bytes:
        """Attention inspection of one series (`df`: its rows, `time_col` and the channel columns; its
        last L rows are read): `options` are /v1's (`matrices`, `channel`, `average_heads`, `layers`,
        `format`). The JSON answer, or the PNG's bytes with format="png"."""
        spec = self.model(model, version)
        columns = _channel_columns(df, spec, target_col)
        frame = df.sort_values(time_col, kind="stable").tail(spec.input_length)
        series: dict[str, Any] = {"values": frame[columns].to_numpy(np.float64).tolist()}
        if time_col in frame:
            series["start"] = _start(frame[time_col])
        path = f"/v1/models/{model}/versions/{spec.version}/attention"
        response = self._send("POST", path, json={"series": series, **options})
        if response.headers.get("content-type", "").startswith("image/"):
            return response.content
        answer = _json(response)
        if not isinstance(answer, dict):
            raise _unreadable(response, f"a JSON {type(answer).__name__}, not an object")
        return answer

    def explain(
        self,
        df: pd.DataFrame,
        model: str = "etth1-rsa",
        version: int | None = None,
        *,
        time_col: str = "ds",
        target_col: str | None = None,
        future: dict[str, list[float]] | None = None,
        past: dict[str, list[float | None]] | None = None,
        static: dict[str, Any] | None = None,
    ) -> Explanation:
        """What a global model's forecast of one series (`df`: its rows, oldest first by `time_col`) is
        made of, as DataFrames (rsa_client.explain): each lag's weight and contribution per horizon step,
        each term's (REM kernel, direct lags, missing share, bias, covariate) share and contribution, a
        hybrid's members; a covariate model's `future`, `past` and `static` as /v1 takes them. A
        multichannel model answers matrices: `attention`."""
        spec = self.model(model, version)
        columns = _channel_columns(df, spec, target_col)
        frame = df.sort_values(time_col, kind="stable")
        if not past:  # past covariates need a value per value sent: then the whole history goes
            frame = frame.tail(spec.input_length)
        series: dict[str, Any] = {"values": frame[columns].to_numpy(np.float64).tolist()}
        if time_col in frame:
            series["start"] = _start(frame[time_col])
        for key, value in (("future", future), ("past", past), ("static", static)):
            if value is not None:
                series[key] = value
        path = f"/v1/models/{model}/versions/{spec.version}/attention"
        answer = _json(self._send("POST", path, json={"series": series}))
        if not isinstance(answer, dict):
            raise ValueError(f"the attention answer is a JSON {type(answer).__name__}, not an object")
        return explanation(answer)

    # -- a read-out fitted on request -------------------------------------------------------------
    def fit_forecast(
        self,
        df: pd.DataFrame,
        h: int | None = None,
        level: Sequence[float] | None = None,
        model: str = "etth1-rsa",
        version: int | None = None,
        publish: str | None = None,
        *,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (NeuralForecast's and statsforecast's name)
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
    ) -> pd.DataFrame:
        """A global model's read-out refitted on every series of `df` (long: `id_col`, `time_col` and the
        target, `y` or the model's channel), then forecasting them (POST /v1/.../fit_forecast, one
        request: the server bounds it by RSA_MAX_FIT_*). `publish`: a model name to publish the refit into
        as its next version (an API key and RSA_MODEL_CONTROL=explicit).

        A covariate model's covariates are `df`'s other columns (as `cross_validation` reads them) and
        `X_df` its future covariates over the `h` steps forecast (default: the model's horizon), per
        series after its last row; the server refuses a future covariate without them, naming it.

        Returns one row per series and future step: `id_col`, `time_col`, the forecast in a column named
        after the model (`{model}`, as `forecast`) and, per level with intervals, `{model}-lo-{level}` and
        `{model}-hi-{level}`; `.attrs["fit"]` holds the
        server's fit summary (levels without intervals and why, the published version)."""
        target = target_col or ("y" if "y" in df.columns else None)
        if target is None or target not in df.columns:
            raise ValueError(f"df needs a target column (`y` or target_col), has {list(df.columns)}")
        frame = df.sort_values([id_col, time_col], kind="stable")
        series = []
        # Columns beside the id, the time and the target (or an X_df) may be a covariate model's: ask the
        # model which (a frame of those three alone needs no such request).
        spec = self.model(model, version) if X_df is not None or len(df.columns) > 3 else None
        if spec is not None and spec.covariates:  # the history's covariates, X_df's future after it
            reach = spec.horizon if h is None else h
            histories = _histories(
                frame, [target], id_col, time_col, spec, X_df, reach if X_df is not None else 0
            )
            series = [s.body(reach=reach) for s in histories]
        elif X_df is not None:
            raise ValueError(f"model {model} takes no covariates; X_df would not be read")
        for key, part in [] if series else frame.groupby(id_col, sort=False):
            values = part[target].to_numpy(np.float64)
            series.append(
                {
                    "id": str(key),
                    "start": _start(part[time_col]),
                    "values": [None if np.isnan(v) else float(v) for v in values],
                }
            )
        body: dict[str, Any] = {"series": series}
        if h is not None:
            body["horizon"] = h
        if level:
            body["level"] = [float(v) for v in level]
        if publish is not None:
            body["publish"] = {"model": publish}
        path = f"/v1/models/{model}" + (f"/versions/{version}" if version is not None else "")
        ids = [s["id"] for s in series]
        response = self._send("POST", f"{path}/fit_forecast", ids, json=body)
        answer = _json(response, ids)
        named = forecast_columns(model, [target])[0]  # the forecast's column, as forecast names it
        with _reading(response, ids):
            rows: dict[str, list[Any]] = {id_col: [], time_col: [], named: []}
            bands = [f"{side}-{v:g}" for v in answer["fit"]["levels"] for side in ("lo", "hi")]
            for band in bands:
                rows[f"{named}-{band}"] = []
            for f in answer["forecasts"]:
                n = len(f["forecast"])
                rows[id_col] += [f["id"]] * n
                rows[time_col] += list(f["timestamps"] or [None] * n)
                rows[named] += [row[0] for row in f["forecast"]]
                for band in bands:
                    rows[f"{named}-{band}"] += [row[0] for row in f[band]]
            out = pd.DataFrame(rows)
            out[time_col] = pd.to_datetime(out[time_col], utc=True, format="ISO8601")
            out.attrs["fit"] = answer["fit"]
        return out

    # -- backtests and anomaly checks (/v1 cross_validation, detect_anomalies) ---------------------
    def cross_validation(
        self,
        df: pd.DataFrame,
        h: int | None = None,
        n_windows: int = 1,
        step_size: int | None = None,
        level: Sequence[float] | None = None,
        model: str = "etth1-rsa",
        version: int | None = None,
        *,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (NeuralForecast's and statsforecast's name)
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
        refit: bool | None = None,
    ) -> pd.DataFrame:
        """Backtest the model on each series of `df` (long format, as `forecast` takes it): `n_windows`
        forecasts of `h` steps from cutoffs `step_size` apart (default `h`), the last ending at the
        series' last row, each forecast from the rows before its cutoff only.

        A covariate model's covariates are `df`'s other columns (statsforecast's convention): past and
        future ones a value per row, a static one constant per series; the service cuts each window's
        from them. With `h` below the model's horizon H, the last window reads H − h future values past
        the history (steps the answer does not show): `X_df` (`id_col`, `time_col`, the future
        covariates) may hold them, per series after its last row; without it they are read as the
        training mean.

        Returns one row per series, cutoff and forecast step: `id_col`, `time_col`, `cutoff` (the time of
        the last row before the forecast), the actual values in the channel columns (as in `df`), the
        forecast in a column named after the model (`{model}`, or `{model}-{channel}`), and per level
        `...-lo-{level}`, `...-hi-{level}`. `frame.attrs["metrics"]`: the pooled metrics (MAE, MSE,
        MASE, sMAPE, coverage per level); `frame.attrs["series_metrics"]`: per series id.

        `refit` (the service's): True refits a global read-out on the values before each cutoff, as
        statsforecast and NeuralForecast backtest; False scores the served weights at every cutoff; None
        (default) lets the service choose (a refit where the version can be refitted). A refit reads every
        series of its request: series beyond one request's share go in several, each refitted on its own
        series. `frame.attrs["refit"]`: whether every request was refitted."""
        spec = self.model(model, version)
        columns = _channel_columns(df, spec, target_col)
        reach = spec.horizon - (spec.horizon if h is None else h)
        series = _histories(df, columns, id_col, time_col, spec, X_df, reach)
        per_request = max(1, spec.limits.max_series_per_request // max(1, n_windows))
        options: dict[str, Any] = {"n_windows": n_windows}
        if h is not None:
            options["horizon"] = h
        if step_size is not None:
            options["step_size"] = step_size
        if level:
            options["level"] = [float(v) for v in level]
        if refit is not None:
            options["refit"] = bool(refit)
        path = f"/v1/models/{model}/versions/{spec.version}/cross_validation"

        def run(chunk: list[_History]) -> tuple[httpx.Response, Any]:
            body = {"series": [s.body(reach=reach) for s in chunk], **options}
            response = self._send("POST", path, [s.id for s in chunk], json=body)
            return response, _json(response, [s.id for s in chunk])

        chunks = [series[i : i + per_request] for i in range(0, len(series), per_request)]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            answers = list(pool.map(run, chunks))
        prefix = _forecast_prefix(spec.name, columns)
        frames, metrics = [], {}
        for chunk, (response, answer) in zip(chunks, answers, strict=True):
            with _reading(response, [s.id for s in chunk]):
                for history, result in zip(chunk, answer["series"], strict=True):
                    metrics[history.id] = result["metrics"]
                    for window in result["windows"]:
                        t, steps = window["cutoff"], len(window["forecast"])
                        data: dict[str, Any] = {
                            id_col: history.id,
                            time_col: history.stamps[t : t + steps],
                            "cutoff": history.stamps[t - 1],
                        }
                        actual = np.array(window["actual"], np.float64)  # null -> NaN
                        forecast = np.array(window["forecast"], np.float64)
                        for c, name in enumerate(columns):
                            data[name] = actual[:, c]
                            data[prefix(name)] = forecast[:, c]
                            for v in options.get("level", []):
                                data[f"{prefix(name)}-lo-{v:g}"] = np.array(window[f"lo-{v:g}"])[:, c]
                                data[f"{prefix(name)}-hi-{v:g}"] = np.array(window[f"hi-{v:g}"])[:, c]
                        frames.append(pd.DataFrame(data))
        frame = pd.concat(frames, ignore_index=True)
        frame.attrs["series_metrics"] = metrics
        # Whether the service refitted its read-out before each cutoff (on each request's series).
        frame.attrs["refit"] = all(bool(answer.get("refit")) for _, answer in answers)
        with _reading(answers[-1][0]):  # the per-series metrics as the answers gave them
            frame.attrs["metrics"] = _pooled(list(metrics.values()))
        return frame

    def detect_anomalies(
        self,
        df: pd.DataFrame,
        level: float | None = None,
        model: str = "etth1-rsa",
        version: int | None = None,
        *,
        lead: int = 1,
        last: int | None = None,
        repair: bool = True,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (NeuralForecast's and statsforecast's name)
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
    ) -> pd.DataFrame:
        """Check each series of `df` (long format) for values outside the model's calibrated interval at
        `level` (default: the highest the version calibrated), each forecast `lead` steps ahead from
        the rows before it; `last`: only each series' last `last` rows (the online form); `repair`:
        the server's (values flagged are replaced by their forecasts in the windows of the points after
        them, once). Long series are split over requests under the server's limit, each piece with the
        rows its windows read: without `repair` the answers are the whole series' exactly; with it,
        each piece repairs only its own flags.

        Returns one row per series and checked row: `id_col`, `time_col`, the values in the channel
        columns, the forecast in a column named after the model (`{model}`, or `{model}-{channel}`), its
        bounds `...-lo-{level}` / `...-hi-{level}`, `anomaly` (`{column}-anomaly`) and `score`
        (`{column}-score`: |value − forecast| in interval half-widths).

        A covariate model's covariates are `df`'s other columns, as in `cross_validation`; the last
        point's forecast reads the model's horizon H − `lead` future values past the history, from
        `X_df` where given, else read as the training mean (steps the answer does not show)."""
        spec = self.model(model, version)
        columns = _channel_columns(df, spec, target_col)
        series = _histories(df, columns, id_col, time_col, spec, X_df, spec.horizon - lead)
        need = spec.min_history or spec.input_length
        limit = spec.limits.max_series_per_request
        # Pieces of at most `limit` checked rows; each sends the rows its windows read, and no more.
        pieces: list[tuple[_History, int, int]] = []  # (series, first row checked, end)
        for history in series:
            n = len(history.values)
            first = need + lead - 1 if last is None else n - last
            for a in range(max(first, 0), n, limit):
                pieces.append((history, a, min(a + limit, n)))
        # One request holds pieces of one size (they share `last`), at most `limit` checked rows.
        by_size: dict[int, list[tuple[_History, int, int]]] = {}
        for piece in pieces:
            by_size.setdefault(piece[2] - piece[1], []).append(piece)
        groups = [
            same[i : i + max(1, limit // size)]
            for size, same in by_size.items()
            for i in range(0, len(same), max(1, limit // size))
        ]
        path = f"/v1/models/{model}/versions/{spec.version}/detect_anomalies"

        def run(group: list[tuple[_History, int, int]]) -> tuple[httpx.Response, Any]:
            # Each piece sends its checked rows and the L (+ lead − 1) rows before them that its
            # windows read: a window reads nothing older, so the answers are those of the whole series.
            reach = spec.horizon - lead
            bodies = [h.body(max(0, a - lead + 1 - spec.input_length), b, reach) for h, a, b in group]
            body = {
                "series": bodies,
                "level": level,
                "lead": lead,
                "last": group[0][2] - group[0][1],
                "repair": repair,
            }
            ids = [p[0].id for p in group]
            response = self._send("POST", path, ids, json=body)
            return response, _json(response, ids)

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            answers = list(pool.map(run, groups))
        prefix = _forecast_prefix(spec.name, columns)
        one = len(columns) == 1
        frames = []
        for group, (response, answer) in zip(groups, answers, strict=True):
            with _reading(response, [p[0].id for p in group]):
                for (history, a, b), result in zip(group, answer["series"], strict=True):
                    data: dict[str, Any] = {id_col: history.id, time_col: history.stamps[a:b]}
                    arrays = {
                        k: np.array(result[k], np.float64)
                        for k in ("actual", "forecast", "lo", "hi", "score")
                    }
                    flags = np.array(result["anomaly"], bool)
                    shown = float(answer["level"])
                    for c, name in enumerate(columns):
                        data[name] = arrays["actual"][:, c]
                        data[prefix(name)] = arrays["forecast"][:, c]
                        data[f"{prefix(name)}-lo-{shown:g}"] = arrays["lo"][:, c]
                        data[f"{prefix(name)}-hi-{shown:g}"] = arrays["hi"][:, c]
                        data["anomaly" if one else f"{name}-anomaly"] = flags[:, c]
                        data["score" if one else f"{name}-score"] = arrays["score"][:, c]
                    frames.append(pd.DataFrame(data))
        frame = pd.concat(frames, ignore_index=True)
        return frame.sort_values([id_col, time_col], kind="stable", ignore_index=True)

    # -- the repository API -----------------------------------------------------------------------
    def index(self, ready_only: bool = False) -> list[dict[str, Any]]:
        """Every model version on disk or served (the service runs with RSA_MODEL_CONTROL poll or
        explicit)."""
        response = self._send("POST", "/v2/repository/index", json={"ready": ready_only})
        listed = _json(response)
        if not isinstance(listed, list):
            raise _unreadable(response, f"a JSON {type(listed).__name__}, not a list")
        return listed

    def load(self, name: str) -> None:
        """Load or reload a model (RSA_MODEL_CONTROL=explicit)."""
        self._send("POST", f"/v2/repository/models/{name}/load")

    def unload(self, name: str) -> None:
        """Unload a model (RSA_MODEL_CONTROL=explicit)."""
        self._send("POST", f"/v2/repository/models/{name}/unload")


@dataclass(frozen=True)
class _History:
    """One series of a long frame: its id, values [n, C] (NaN: missing) and timestamps [n]; a covariate
    model's past covariates [n] (NaN: not observed), future ones [n + its rows of X_df], statics."""

    id: Any
    values: np.ndarray
    stamps: np.ndarray  # datetime64[ns] (UTC)
    past: dict[str, np.ndarray] = field(default_factory=dict)
    future: dict[str, np.ndarray] = field(default_factory=dict)
    static: dict[str, Any] = field(default_factory=dict)

    def body(self, begin: int = 0, end: int | None = None, reach: int = 0) -> dict[str, Any]:
        """/v1's `series` item for rows begin .. end − 1: values (null: missing) and their start, and
        the covariates over those rows (the future ones `reach` rows further: what the last window's
        forecast reads past them)."""
        stop = len(self.values) if end is None else end
        rows = self.values[begin:stop]
        values = [[None if v != v else v for v in row] for row in rows.tolist()]
        start = pd.Timestamp(self.stamps[begin]).tz_localize("UTC").isoformat()
        item_id = None if self.id is None else str(self.id)
        item: dict[str, Any] = {"id": item_id, "values": values, "start": start}
        if self.past:
            item["past"] = {
                k: [None if v != v else v for v in col[begin:stop].tolist()] for k, col in self.past.items()
            }
        if self.future:
            item["future"] = {}
            for k, col in self.future.items():
                # Up to `reach` values past the rows (X_df's); the service reads those not sent as
                # the training mean.
                item["future"][k] = col[begin : min(stop + reach, len(col))].tolist()
        if self.static:
            item["static"] = dict(self.static)
        return item


def _histories(
    df: pd.DataFrame,
    columns: list[str],
    id_col: str,
    time_col: str,
    spec: ModelSpec | None = None,
    x_df: pd.DataFrame | None = None,
    reach: int = 0,
) -> list[_History]:
    """The frame's series with their covariates (every column beside the id, the time and the channels is
    one); a covariate model's future values past each history, the `reach` steps the last window's
    forecast reads, come from `x_df`, checked as a forecast's X_df is: all before any request."""
    # the covariates a request sends: the calendar is derived from the timestamps
    kinds = (
        {c["name"]: c["kind"] for c in spec.covariates if c["kind"] != "calendar"} if spec is not None else {}
    )
    extra = [c for c in df.columns if c not in (id_col, time_col, *columns)]
    if spec is not None:
        unknown = [c for c in extra if c not in kinds]
        if unknown:
            has = f"its covariates are {list(kinds)}" if kinds else "it takes no covariates"
            raise ValueError(
                f"columns {unknown} are neither the model's channels {columns} nor its covariates: {has} "
                "(every other column of the frame is read as a covariate)"
            )
        absent = [c for c in kinds if c not in df.columns]
        if absent:
            raise ValueError(f"model {spec.name} reads covariates {list(kinds)}; the frame lacks {absent}")
    futures = [c for c, kind in kinds.items() if kind == "future"]
    if x_df is not None and not (futures and reach):
        why = "reads no future covariates" if not futures else "reads no future value past the history here"
        raise ValueError(f"model {spec.name if spec else ''} {why}; X_df would not be read")
    # Without X_df, the `reach` future steps past each history (which the answer does not show) are
    # read by the service as the training mean (issue 45 item 4; the answer's `future_unsent`).
    frame, times = _ordered(df, id_col, time_col, spec.timezone if spec is not None else None)
    out = []
    values = frame[columns].to_numpy(np.float64)
    ids = frame[id_col].to_numpy()
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    begins, ends = np.concatenate([[0], cuts]).astype(int), np.concatenate([cuts, [len(ids)]]).astype(int)
    after: dict[str, np.ndarray] = {}
    if x_df is not None and spec is not None:
        last = times[ends - 1].astype("datetime64[s]").astype(np.int64)
        after = _future_rows(spec, x_df, ids[begins], last, reach, id_col, time_col)
    for i, (a, b) in enumerate(zip(begins, ends, strict=True)):
        rows = frame.iloc[a:b]
        past, future, static = {}, {}, {}
        for name, kind in kinds.items():
            if kind == "past":
                past[name] = rows[name].to_numpy(np.float64)
            elif kind == "future":
                later = after[name][i].astype(np.float64) if name in after else np.zeros(0)
                future[name] = np.concatenate([rows[name].to_numpy(np.float64), later])
            else:
                seen = pd.unique(rows[name])
                if len(seen) != 1 or pd.isna(seen[0]):
                    raise ValueError(
                        f"series {ids[a]!r}: static covariate {name!r} must have one value per series; "
                        f"it holds {list(seen)[:3]}"
                    )
                value = seen[0]
                static[name] = value.item() if isinstance(value, np.generic) else value
        out.append(_History(ids[a], values[a:b], times[a:b], past, future, static))
    return out


def forecast_columns(model: str, channels: Sequence[str]) -> list[str]:
    """The forecast's column names, NeuralForecast's and TimeGPT's rule: the model's name for a one-channel
    model (its intervals `{model}-lo-80`, `{model}-hi-80`), `{model}-{channel}` for each channel of a wider
    one. The same on every tabular path (this client, `python -m batch score`, `export.panel forecast`),
    never the target's own name, so a forecast merges with the actuals without suffixes."""
    if len(channels) == 1:
        return [model]
    return [f"{model}-{c}" for c in channels]


def _forecast_prefix(model: str, columns: list[str]) -> Any:
    """The forecast's column for a channel column (`forecast_columns`); the actual values keep theirs."""
    named = dict(zip(columns, forecast_columns(model, columns), strict=True))
    return lambda name: named[name]


def _pooled(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-series metrics pooled over every point: each is a mean over its points, so the pooled one is
    their mean weighted by points (the server's own pooled answer, for series sent in one request)."""
    total = sum(m["points"] for m in metrics)
    if not total:
        return {"mae": None, "mse": None, "mase": None, "smape": None, "coverage": {}, "points": 0}

    def mean(get: Any) -> float:
        return float(sum(get(m) * m["points"] for m in metrics if m["points"]) / total)

    pooled = {
        **{k: mean(lambda m, k=k: m[k]) for k in ("mae", "mse", "mase", "smape")},
        "coverage": {lv: mean(lambda m, lv=lv: m["coverage"][lv]) for lv in metrics[0]["coverage"]},
        "points": total,
    }
    if all(m.get("seasonal_naive") is not None for m in metrics):  # the baseline on the same points
        pooled["seasonal_naive"] = _pooled([m["seasonal_naive"] for m in metrics])
    return pooled


def _channel_columns(df: pd.DataFrame, spec: ModelSpec, target_col: str | None = None) -> list[str]:
    """The frame's columns for the model's channels: `target_col` (a one-channel model's target, any
    name), else the channels' own names, else `y` for a one-channel model."""
    if target_col is not None:
        if len(spec.channels) != 1:
            raise ValueError(
                f"target_col names the target of a one-channel model; model {spec.name} reads the channels "
                f"{spec.channels} (columns of those names)"
            )
        if target_col not in df.columns:
            raise ValueError(f"target_col {target_col!r} is not a column of the frame: {list(df.columns)}")
        return [target_col]
    if all(c in df.columns for c in spec.channels):
        return list(spec.channels)
    if len(spec.channels) == 1 and "y" in df.columns:
        return ["y"]
    absent = [c for c in spec.channels if c not in df.columns]
    raise ValueError(f"model {spec.name} reads channels {spec.channels}; the frame lacks {absent}")


def _aware(column: pd.Series, zone: str | None, ids: np.ndarray | None = None) -> pd.Series:
    """Timestamps with their zone: a naive one is in the model's `zone` (UTC without one), read by the
    trainer's rule (`rsa_core.wallclock.localize`: in the column's row order, the autumn repeat's second
    reading once the clock has gone back; `ids`, one per row, keeps the rule within each series). A time
    the spring change skips is refused (ValueError naming the row, and its series with `ids`)."""
    stamps = pd.to_datetime(column)
    if stamps.dt.tz is not None:
        return stamps
    if zone is None:
        return stamps.dt.tz_localize("UTC")
    starts = None
    if ids is not None:
        ids = np.asarray(ids)
        starts = np.r_[True, ids[1:] != ids[:-1]][: len(ids)]
    utc, skipped = localize(stamps.to_numpy(), zone, starts)
    if skipped.any():
        i = int(np.argmax(skipped))
        sid = None if ids is None else ids[i].item() if isinstance(ids[i], np.generic) else ids[i]
        series = f"series {sid!r}, " if ids is not None else ""
        more = int(skipped.sum()) - 1
        raise ValueError(
            f"{series}row {column.index[i]!r}, column {column.name!r}: {stamps.iloc[i]} does not exist in "
            f"{zone}: the clocks skip it (daylight saving)" + (f" (and {more} more rows)" if more else "")
        )
    instants = pd.Series(utc, index=column.index, name=column.name).dt.tz_localize("UTC")
    return instants.astype(f"datetime64[{stamps.dt.unit}, UTC]").dt.tz_convert(zone)  # the input's unit


def _step_alias(stamps: pd.DatetimeIndex) -> str | None:
    """The pandas alias of a series' median step (h, D, W, MS, QS, YS), None for any other step; by
    hand, not `pd.infer_freq` (whose answer's type changes across pandas versions)."""
    days = float(np.median(np.diff(stamps.to_numpy()).astype("timedelta64[s]").astype(np.float64))) / 86400
    steps = ((1 / 24, "h"), (1.0, "D"), (7.0, "W"), (30.4, "MS"), (91.3, "QS"), (365.25, "YS"))
    for length, alias in steps:
        if abs(days - length) <= 0.1 * length:
            return alias
    return None


def _ordered(
    df: pd.DataFrame, id_col: str, time_col: str, zone: str | None
) -> tuple[pd.DataFrame, np.ndarray]:
    """`df` sorted by series and by the instant each row names, and those instants (naive UTC
    datetime64[ns]): naive times are read in the model's `zone` in each series' own row order first (the
    trainer's rule, `_aware`), then sorted; sorting the wall clock first would interleave the two
    readings of a repeated autumn hour (02:00, 02:15, ... twice)."""
    frame = df.sort_values(id_col, kind="stable")  # each series' rows in the frame's own order
    instants = _aware(frame[time_col], zone, frame[id_col].to_numpy())
    utc = instants.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy().astype("datetime64[ns]")
    order = np.lexsort((utc, pd.factorize(frame[id_col], sort=True)[0]))
    return frame.iloc[order], utc[order]


def _start(column: pd.Series) -> str:
    """The first timestamp of a series as /v1's `start`, as written: with its offset, or naive, which the
    service reads in the model's zone (its rule, applied in one place)."""
    return str(pd.Timestamp(pd.to_datetime(column.iloc[:1]).iloc[0]).isoformat())


def _covariate_tensors(
    spec: ModelSpec,
    frame: pd.DataFrame,
    X_df: pd.DataFrame | None,  # noqa: N803
    series_ids: np.ndarray,
    begins: np.ndarray,
    ends: np.ndarray,
    last: np.ndarray,
    id_col: str,
    time_col: str,
) -> list[tuple[str, str, np.ndarray]]:
    """A covariate model's named OIP v2 inputs for every series (frame sorted by id and time): `past_{name}`
    FP32 [S, L] (each series' last L rows of the column, NaN: not observed), `future_{name}` FP32 [S, H]
    (from X_df, at exactly the model's H steps after each series' last row), `static_{name}` FP32 [S] or
    INT64 [S] (the category's index). ValueError naming the series and the column, before any request."""
    past, future = spec.covariate_names("past"), spec.covariate_names("future")
    statics = [c for c in spec.covariates if c["kind"] == "static"]
    if not spec.covariates:
        if X_df is not None:
            raise ValueError(f"model {spec.name} v{spec.version} takes no covariates; X_df would not be read")
        return []
    listed = ", ".join(f"{c['name']} ({c['kind']})" for c in spec.covariates)
    for name in [*past, *(c["name"] for c in statics)]:
        if name not in frame.columns:
            raise ValueError(
                f"df has no column {name!r}: model {spec.name} v{spec.version} reads the covariates "
                f"{listed}; past ones and statics are columns of df, future ones X_df's"
            )
    L, H = spec.input_length, spec.horizon
    out: list[tuple[str, str, np.ndarray]] = []
    for name in past:
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64)
        # NaN before a short series' start: not observed (the service reads only its `lengths` last)
        out.append((f"past_{name}", "FP32", _right_aligned(values, begins, ends, L, np.nan)))
    for c in statics:
        column = frame[c["name"]].to_numpy()
        firsts = column[begins]
        # frame is sorted by id, so its groups come in the order of `begins`
        held = frame.groupby(id_col, sort=False)[c["name"]].nunique(dropna=False).to_numpy()
        bad = np.flatnonzero((held != 1) | pd.isna(firsts))
        if len(bad):
            i = int(bad[0])
            values = list(pd.unique(column[begins[i] : ends[i]]))[:3]
            raise ValueError(
                f"series {series_ids[i]!r}: static covariate {c['name']!r} must hold one value per "
                f"series, it holds {values}"
            )
        if c["categories"] is None:
            out.append((f"static_{c['name']}", "FP32", firsts.astype(np.float32)))
            continue
        categories = [str(v) for v in c["categories"]]
        index = []
        for i, v in enumerate(firsts):
            if str(v) not in categories:
                raise ValueError(
                    f"series {series_ids[i]!r}: static covariate {c['name']!r} is {v!r}, not one of the "
                    f"model's training categories {categories}"
                )
            index.append(categories.index(str(v)))
        out.append((f"static_{c['name']}", "INT64", np.array(index, "<i8")))
    if not future:
        if X_df is not None:
            raise ValueError(
                f"model {spec.name} v{spec.version} reads no future covariates; X_df would not be read"
            )
        return out
    if X_df is None:
        raise ValueError(
            f"model {spec.name} v{spec.version} reads the future covariates {future}: give X_df "
            f"({id_col}, {time_col}, {', '.join(future)}; the model's {H} steps after each series' last row)"
        )
    arrays = _future_rows(spec, X_df, series_ids, last, H, id_col, time_col)
    out += [(f"future_{f}", "FP32", arrays[f]) for f in future]
    return out


def _future_rows(
    spec: ModelSpec,
    X_df: pd.DataFrame,  # noqa: N803
    series_ids: np.ndarray,
    last: np.ndarray,
    n: int,
    id_col: str,
    time_col: str,
) -> dict[str, np.ndarray]:
    """X_df's future covariates {name: [S, n] float32}: every series' rows at exactly the n steps after
    its last row (`last`, Unix seconds), every value a number, no other column and no series df lacks;
    ValueError naming the series and the column, before any request (forecast's X_df and a backtest's)."""
    future = spec.covariate_names("future")
    absent = [c for c in (id_col, time_col, *future) if c not in X_df.columns]
    if absent:
        raise ValueError(f"X_df has no column {absent[0]!r}; it needs {[id_col, time_col, *future]}")

    unknown = [c for c in X_df.columns if c not in (id_col, time_col, *future)]
    if unknown:
        raise ValueError(
            f"X_df's column {unknown[0]!r} is not a future covariate of model {spec.name} (its future "
            f"covariates: {future})"
        )
    xf, times = _ordered(X_df, id_col, time_col, spec.timezone)
    groups = {k: np.asarray(v) for k, v in xf.groupby(id_col, sort=False).indices.items()}
    known = set(series_ids.tolist())
    stray = [k for k in groups if k not in known]
    if stray:
        raise ValueError(f"X_df holds series that df does not: {stray[:5]}")
    want = _future(spec, last, n, _zone(spec))
    arrays = {f: np.empty((len(series_ids), n), np.float32) for f in future}
    values = {f: pd.to_numeric(xf[f], errors="coerce").to_numpy(np.float64) for f in future}
    for i, sid in enumerate(series_ids):
        at = groups.get(sid)
        span = f"{pd.Timestamp(want[i, 0])} .. {pd.Timestamp(want[i, -1])}"
        problem = future_rows_problem(None if at is None else times[at], want[i])
        if problem is not None and problem.kind != "row":
            raise ValueError(
                f"series {sid!r} has {problem.rows} rows in X_df; model {spec.name} needs "
                f"its future covariates {future} at exactly the {n} steps after its last row, {span}"
            )
        if problem is not None:
            j = problem.row
            raise ValueError(
                f"series {sid!r}: X_df's row {j} is at {pd.Timestamp(times[at][j])}; model {spec.name} needs "
                f"the {n} steps after the series' last row, {span}"
            )
        for f in future:
            got = values[f][at]
            if not np.isfinite(got).all():
                j = int(np.argmax(~np.isfinite(got)))
                raise ValueError(
                    f"series {sid!r}: X_df's {f!r} at {pd.Timestamp(times[at][j])} is not a number"
                )
            arrays[f][i] = got
    return arrays


def _zone(spec: ModelSpec) -> tzinfo | None:
    """The model's zone, on whose wall clock its days and months step (`rsa_core.steps`); None: UTC."""
    return None if spec.timezone is None else model_zone(spec.timezone)


def _window_starts(
    spec: ModelSpec, stamps: np.ndarray, begins: np.ndarray, ends: np.ndarray, zone: tzinfo | None = None
) -> np.ndarray:
    """Unix seconds of each window's first row, the service's `start`: that row's time for a series of L
    rows or more; for a shorter one, the time L − 1 steps before its last row by the one stepping rule
    (`rsa_core.steps`: days and months on the wall clock of `zone`, the model's, shorter steps on the
    instant), as the service steps from `start`, so that its horizon stamps are the steps after the last
    row."""
    L = spec.input_length
    firsts = stamps[np.maximum(ends - L, begins)].copy()
    short = np.flatnonzero(ends - begins < L)
    if not len(short):
        return firsts
    last = np.asarray(stamps[ends[short] - 1]).astype("datetime64[s]")
    back = shifted(last, [-(L - 1)], spec.frequency_seconds or 0, calendar_step(spec.frequency), zone)
    firsts[short] = back[:, 0].astype(np.int64)
    return firsts


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


def _future(spec: ModelSpec, last: np.ndarray, h: int, zone: tzinfo | None = None) -> np.ndarray:
    """[S, h] datetime64[ns] of the h steps after each series' last timestamp (Unix seconds): the one
    stepping rule (`rsa_core.steps`), days and months on the wall clock of `zone` (the model's; None:
    UTC), as the service steps them from an OIP v2 `start`."""
    base = np.asarray(last).astype("datetime64[s]").astype("datetime64[ns]")
    return steps_after(base, h, spec.frequency_seconds or 0, calendar_step(spec.frequency), zone)


def _long_frame(
    spec: ModelSpec,
    out: dict[str, np.ndarray],
    levels: list[float],
    columns: list[str],
    series_ids: np.ndarray,
    last: np.ndarray,
    h: int,
    id_col: str,
    time_col: str,
) -> pd.DataFrame:
    S = len(series_ids)
    data: dict[str, Any] = {
        id_col: np.repeat(series_ids, h),
        time_col: _future(spec, last, h, _zone(spec)).reshape(-1),
    }
    for c, name in enumerate(forecast_columns(spec.name, columns)):
        data[name] = out["forecast"][:, :, c].reshape(-1)
        for v in levels:
            data[f"{name}-lo-{v:g}"] = out[f"forecast_lo_{v:g}"][:, :, c].reshape(-1)
            data[f"{name}-hi-{v:g}"] = out[f"forecast_hi_{v:g}"][:, :, c].reshape(-1)
    frame = pd.DataFrame(data)
    assert len(frame) == S * h
    return frame


def _error(response: httpx.Response, series: Sequence[Any]) -> ServiceError:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if isinstance(body, dict):
        error = body.get("error", body.get("message", body))
        message = error if isinstance(error, str) else json.dumps(error)
    else:
        message = str(body)
    named = _WINDOW_ROW.search(message)
    if named is not None and int(named.group(1)) < len(series):
        series = [series[int(named.group(1))]]
    return ServiceError(response.status_code, message, series)


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
