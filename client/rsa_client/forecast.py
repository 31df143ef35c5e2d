"""Forecasts: a named model's through OIP v2 binary tensors (`forecast`: each series' last L rows, sized
under the server's limits, a call the service's deadline cut asked again in halves), the service's
pretrained model of the series' frequency (`forecast_pretrained`, POST /v1/forecast) and a global model's
read-out refitted on request (`fit_forecast`).

Wire (docs/protocols.md, OIP v2 with Triton's binary tensor extension): each request carries `window`
FP32 [n, L, C] (each series' last L rows, channels in the model's order) and, for a model with a seasonal
cycle, `start` INT64 [n] (Unix seconds of each window's first row, from which the service computes the
phase exactly as /v1 does); for a global model (its /v1/models entry has a `panel` block), a series of
`min_history` to L rows is sent right-aligned in its row of `window`, with `lengths` INT64 [n] (the values
each row holds); it asks `forecast` and `forecast_lo_{level}` / `forecast_hi_{level}` in
binary. The model's channels, input length, horizon, frequency and levels come from `/v1/models/{name}`,
the request limits from the OIP v2 model metadata's `parameters`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from rsa_client.frames import (
    _aware,
    _bounds,
    _calibrated,
    _channel_columns,
    _check_steps,
    _long_frame,
    _model_frequency,
    _ordered,
    _start,
    _window_starts,
    _wire_ids,
    _zone,
    forecast_columns,
    one_series,
    read_times,
)
from rsa_client.models import _DEFAULT_MAX_SERIES, ModelSpec, _Models
from rsa_client.series import _covariate_tensors, _histories, unread_columns
from rsa_client.transport import ServiceError, _decode, _json, _reading
from rsa_core.frequency import infer_frequency  # the one frequency rule (the service's /v1/forecast too)
from rsa_core.windows import right_aligned as _right_aligned


class _Forecasting(_Models):
    """Forecasts of a named model, of the pretrained one, and of a read-out fitted on request."""

    # -- forecast ---------------------------------------------------------------------------------
    @one_series
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

        Without `model`: the one model the service serves, where it serves one; else the service's
        pretrained model of `df`'s frequency answers (`POST /v1/forecast`, `forecast_pretrained`). The
        forecast's column is named after the model that answered."""
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        X_df = None if X_df is None else read_times(X_df, time_col)
        if model is None:
            served = self.served()
            if len(served) == 1:
                model = served[0]
            elif version is not None or X_df is not None:
                raise ValueError("version and X_df need a model: name it (model=...)")
            else:
                return self.forecast_pretrained(
                    df, h, level, id_col=id_col, time_col=time_col, target_col=target_col
                )

        spec = self.model(model, version)
        h = spec.horizon if h is None else h
        if not 1 <= h <= spec.horizon:
            raise ValueError(f"h must be between 1 and the model's horizon {spec.horizon}, got {h}")
        levels = _calibrated(spec, level)
        columns = _channel_columns(df, spec, target_col)
        unread_columns(df, columns, id_col, time_col, spec)
        frame, instants = _ordered(df, id_col, time_col, spec.timezone)
        ids = frame[id_col].to_numpy()
        values = frame[columns].to_numpy(np.float64)
        stamps = instants.astype("datetime64[s]").astype(np.int64)  # Unix seconds
        begins, ends, series_ids = _bounds(ids, spec)
        L = spec.input_length
        lengths = np.minimum(ends - begins, L)
        read = np.arange(len(ids)) >= np.repeat(ends - lengths, ends - begins)  # each series' window
        _check_steps(
            ids[read], _aware(frame[time_col][read], spec.timezone, ids[read]), _model_frequency(spec)
        )
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
            # The steps before a short series' start hold 0: `lengths` marks them, and the service masks
            # whatever they hold (oip_v2 `_mask_start`, before its checks); NaN rows in a frame before a
            # series' first value are read as before its start too (app/inference/windows.py).
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

    @one_series
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
        default: the series' timestamps' by rsa_core.frequency, the most common gap, a zoned series' days
        and months on its wall clock: h, D, W, MS, QS, YS (ME, QE, YE), else the step's alias; a series of
        one row: the service assumes it from its first timestamp). Missing values (NaN) are sent as
        missing. Returns `id_col`, `time_col` and the forecast in a column named after the model that
        answered (`{model}-lo-80`, ... per level); `frame.attrs["model"]`, `["version"]`: which one."""
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        target = target_col or "y"
        if target not in df.columns:
            raise ValueError(f"df has no column {target!r} (give target_col)")
        unread_columns(df, [target], id_col, time_col, None)
        frame = df.sort_values([id_col, time_col], kind="stable")
        parts = list(frame.groupby(id_col, sort=False))
        keys = _wire_ids([sid for sid, _ in parts])  # the answer's ids read back as df's
        groups = [(str(sid), rows) for sid, rows in parts]
        # each series' step, by the rule the service reads timestamps by; its rows checked against it
        found = {sid: infer_frequency(pd.DatetimeIndex(r[time_col])) for sid, r in groups if len(r) >= 2}
        steps = set(found.values())
        if len(steps) == 1:  # the usual frame: one step, every series judged at once
            _check_steps(frame[id_col].to_numpy(), frame[time_col], steps.pop())
        else:
            for sid, rows in groups:
                _check_steps(np.full(len(rows), sid, dtype=object), rows[time_col], found.get(sid))
        if freq is None:
            inferred = {f.freq for f in found.values() if f is not None}
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
                    id_col: keys[one["id"]],
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

    # -- a read-out fitted on request -------------------------------------------------------------
    @one_series
    def fit_forecast(
        self,
        df: pd.DataFrame,
        h: int | None = None,
        level: Sequence[float] | None = None,
        model: str | None = None,
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
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        X_df = None if X_df is None else read_times(X_df, time_col)
        target = target_col or ("y" if "y" in df.columns else None)
        if target is None or target not in df.columns:
            raise ValueError(f"df needs a target column (`y` or target_col), has {list(df.columns)}")
        model = self._only_model(model, "fit_forecast")
        frame = df.sort_values([id_col, time_col], kind="stable")
        series = []
        # Columns beside the id, the time and the target (or an X_df) may be a covariate model's: ask the
        # model which (a frame of those three alone needs no such request).
        spec = self.model(model, version) if X_df is not None or len(df.columns) > 3 else None
        if spec is not None and spec.covariates:  # the history's covariates, X_df's future after it
            reach = spec.horizon if h is None else h
            futures = [c["name"] for c in spec.covariates if c["kind"] == "future"]
            if futures and X_df is None:  # said before the request, as forecast says it
                raise ValueError(
                    f"model {model} reads the future covariates {futures}: give their values over the "
                    f"{reach} steps forecast after each series' last row as X_df"
                )
            histories = _histories(
                frame, [target], id_col, time_col, spec, X_df, reach if X_df is not None else 0
            )
            series = [s.body(reach=reach) for s in histories]
            keys = _wire_ids([s.id for s in histories])
        elif X_df is not None:
            raise ValueError(f"model {model} takes no covariates; X_df would not be read")
        else:
            unread_columns(df, [target], id_col, time_col, spec)
        if spec is None:  # its frequency (the rows' steps) and zone (the answer's wall clock)
            spec = self.model(model, version)
        if not series:  # the rows sent as consecutive steps from each `start`: checked first
            _check_steps(frame[id_col].to_numpy(), frame[time_col], _model_frequency(spec))
            keys = _wire_ids([key for key, _ in frame.groupby(id_col, sort=False)])
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
        # a publish is not sent again once it may have reached the server: a second would add a version
        response = self._send("POST", f"{path}/fit_forecast", ids, idempotent=publish is None, json=body)
        answer = _json(response, ids)
        named = forecast_columns(model, [target])[0]  # the forecast's column, as forecast names it
        with _reading(response, ids):
            rows: dict[str, list[Any]] = {id_col: [], time_col: [], named: []}
            bands = [f"{side}-{v:g}" for v in answer["fit"]["levels"] for side in ("lo", "hi")]
            for band in bands:
                rows[f"{named}-{band}"] = []
            for f in answer["forecasts"]:
                n = len(f["forecast"])
                rows[id_col] += [keys[f["id"]]] * n
                rows[time_col] += list(f["timestamps"] or [None] * n)
                rows[named] += [row[0] for row in f["forecast"]]
                for band in bands:
                    rows[f"{named}-{band}"] += [row[0] for row in f[band]]
            out = pd.DataFrame(rows)
            out[time_col] = pd.to_datetime(out[time_col], utc=True, format="ISO8601")
            if pd.to_datetime(frame[time_col]).dt.tz is None:  # naive in, naive out, as `forecast`
                wall = out[time_col].dt.tz_convert(spec.timezone) if spec.timezone else out[time_col]
                out[time_col] = wall.dt.tz_localize(None)
            out.attrs["fit"] = answer["fit"]
        return out
