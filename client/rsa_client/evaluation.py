"""Backtests and anomaly checks (/v1 cross_validation, detect_anomalies): each series' rows and
covariates sent as /v1 series items, split over requests under the server's limit, the answers read back
into long frames with the pooled metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import httpx
import numpy as np
import pandas as pd

from rsa_client.frames import _channel_columns, _forecast_prefix, one_series, read_times, warn_user
from rsa_client.models import ModelSpec, _Models
from rsa_client.series import _histories, _History
from rsa_client.transport import ServiceError, _json, _reading

# The service's refusal of a backtest or anomaly check that cannot finish within its deadline now (422,
# naming `n_windows` or `last` and the `limit` that fits: app/protocols/rsa_v1/evaluation.py).
TOO_LONG = "evaluation_too_long"
OnTooLong = Literal["raise", "shrink"]


def _evaluating(concurrency: int, spec: ModelSpec) -> int:
    """How many pieces of one backtest or anomaly check are sent at once: the client's `concurrency`, at
    most the service's evaluations in flight per model (more are refused 503 while the first run)."""
    return max(1, min(concurrency, spec.limits.max_evaluations_in_flight))


class _Evaluating(_Models):
    """Backtests and anomaly checks."""

    # -- backtests and anomaly checks (/v1 cross_validation, detect_anomalies) ---------------------
    @one_series
    def cross_validation(
        self,
        df: pd.DataFrame,
        h: int | None = None,
        n_windows: int = 1,
        step_size: int | None = None,
        level: Sequence[float] | None = None,
        model: str | None = None,
        version: int | None = None,
        *,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (NeuralForecast's and statsforecast's name)
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
        refit: bool | None = None,
        on_too_long: OnTooLong = "raise",
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
        series. `frame.attrs["refit"]`: whether every request was refitted. Without a refit, a window
        that begins at or before the version's training end (`frame.attrs["training_end"]`) is scored
        in-sample: `frame.attrs["in_sample"]` lists them (`series`, `cutoff`), and a UserWarning says so.

        `on_too_long`: what a request refused as too long for the service's deadline now (422
        `evaluation_too_long`, naming the `n_windows` that fits) does: "raise" (default) raises that
        ServiceError (its `limit`: the windows that fit); "shrink" resends that request once with the
        windows that fit (each series' last ones), and `frame.attrs["shrunk"]` lists each series so
        answered (`series`, `field`, `asked`, `sent`; empty when none was)."""
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        X_df = None if X_df is None else read_times(X_df, time_col)
        _check_on_too_long(on_too_long)
        model = self._only_model(model, "cross_validation")
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

        def run(chunk: list[_History]) -> tuple[httpx.Response, Any, int | None]:
            body = {"series": [s.body(reach=reach) for s in chunk], **options}
            return self._evaluated(path, [s.id for s in chunk], body, "n_windows", on_too_long)

        chunks = [series[i : i + per_request] for i in range(0, len(series), per_request)]
        with ThreadPoolExecutor(max_workers=_evaluating(self.concurrency, spec)) as pool:
            answers = list(pool.map(run, chunks))
        prefix = _forecast_prefix(spec.name, columns)
        shrunk = [
            {"series": s.id, "field": "n_windows", "asked": n_windows, "sent": sent}
            for chunk, (_, _, sent) in zip(chunks, answers, strict=True)
            if sent is not None
            for s in chunk
        ]
        levels = options.get("level", [])
        frames, metrics = [], {}
        for chunk, (response, answer, _) in zip(chunks, answers, strict=True):
            with _reading(response, [s.id for s in chunk]):
                for history, result in zip(chunk, answer["series"], strict=True):
                    metrics[history.id] = result["metrics"]
                    frames += [
                        _window_frame(history, window, columns, prefix, levels, id_col, time_col)
                        for window in result["windows"]
                    ]
        frame = pd.concat(frames, ignore_index=True)
        frame.attrs["series_metrics"] = metrics
        # Whether the service refitted its read-out before each cutoff (on each request's series).
        frame.attrs["refit"] = all(bool(answer.get("refit")) for _, answer, _ in answers)
        _mark_in_sample(frame, chunks, answers)
        frame.attrs["shrunk"] = shrunk
        with _reading(answers[-1][0]):  # the per-series metrics as the answers gave them
            frame.attrs["metrics"] = _pooled(list(metrics.values()))
        return frame

    @one_series
    def detect_anomalies(
        self,
        df: pd.DataFrame,
        level: float | None = None,
        model: str | None = None,
        version: int | None = None,
        *,
        lead: int = 1,
        last: int | None = None,
        repair: bool = True,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (NeuralForecast's and statsforecast's name)
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
        on_too_long: OnTooLong = "raise",
    ) -> pd.DataFrame:
        """Check each series of `df` (long format) for values outside the model's calibrated interval at
        `level` (default: the highest the version calibrated), each forecast `lead` steps ahead from
        the rows before it; `last`: only each series' last `last` rows (the online form); `repair`:
        the server's (the points judged in time order, a spike replaced by its forecast in the windows
        of the points after it, a level shift read as sent; docs/backtest.md). Long series are split
        over requests under the server's limit, each piece with the rows its windows read: without
        `repair` the answers are the whole series' exactly, the pieces sent at once; with it, a series'
        pieces go in order, each sent with the values the server's repair replaced before it (its
        answer's `replaced`) as their forecasts, so its windows read them as one whole check's would
        (but for a spike in a piece's last `lead` rows, whose next points one check would forecast
        from further back or read as a level shift's onset).

        Returns one row per series and checked row: `id_col`, `time_col`, the values in the channel
        columns, the forecast in a column named after the model (`{model}`, or `{model}-{channel}`), its
        bounds `...-lo-{level}` / `...-hi-{level}`, `anomaly` (`{column}-anomaly`) and `score`
        (`{column}-score`: |value − forecast| in interval half-widths).

        A covariate model's covariates are `df`'s other columns, as in `cross_validation`; the last
        point's forecast reads the model's horizon H − `lead` future values past the history, from
        `X_df` where given, else read as the training mean (steps the answer does not show).

        `on_too_long`: as in `cross_validation`, for a request refused naming the `last` rows that fit:
        "raise" (default) raises the ServiceError; "shrink" resends it once checking only each piece's
        last rows that fit (the earlier ones are left out of the frame), listed in
        `frame.attrs["shrunk"]` (`series`, `field` "last", `asked` and `sent` rows)."""
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        X_df = None if X_df is None else read_times(X_df, time_col)
        _check_on_too_long(on_too_long)
        model = self._only_model(model, "detect_anomalies")
        spec = self.model(model, version)
        columns = _channel_columns(df, spec, target_col)
        series = _histories(df, columns, id_col, time_col, spec, X_df, spec.horizon - lead)
        need, limit = spec.min_history or spec.input_length, spec.limits.max_series_per_request
        rounds = _piece_rounds(series, need, lead, last, limit, repair)
        path = f"/v1/models/{model}/versions/{spec.version}/detect_anomalies"
        # A series' values as the windows of its next piece read them, once the server's repair replaced
        # some in its earlier pieces (the answers' `replaced`): those are their forecasts.
        seen: dict[int, np.ndarray] = {}

        def run(group: list[tuple[_History, int, int]]) -> tuple[httpx.Response, Any, int | None]:
            # Each piece sends its checked rows and the L (+ lead − 1) rows before them that its
            # windows read: a window reads nothing older, so the answers are those of the whole series.
            reach = spec.horizon - lead
            bodies = [
                h.body(max(0, a - lead + 1 - spec.input_length), b, reach, seen.get(id(h)))
                for h, a, b in group
            ]
            body = {
                "series": bodies,
                "level": level,
                "lead": lead,
                "last": group[0][2] - group[0][1],
                "repair": repair,
            }
            ids = [p[0].id for p in group]
            return self._evaluated(path, ids, body, "last", on_too_long)

        prefix = _forecast_prefix(spec.name, columns)
        one = len(columns) == 1
        futures = any(k["kind"] == "future" for k in spec.covariates)

        def piece_frame(history: _History, a: int, b: int, result: Any, shown: float) -> pd.DataFrame:
            """The rows a .. b − 1 of a series, as one piece's answer (`result`) checked them."""
            data: dict[str, Any] = {id_col: history.id, time_col: history.stamps[a:b]}
            arrays = {k: np.array(result[k], np.float64) for k in ("actual", "forecast", "lo", "hi", "score")}
            flags = np.array(result["anomaly"], bool)
            for c, name in enumerate(columns):
                data[name] = arrays["actual"][:, c]
                data[prefix(name)] = arrays["forecast"][:, c]
                data[f"{prefix(name)}-lo-{shown:g}"] = arrays["lo"][:, c]
                data[f"{prefix(name)}-hi-{shown:g}"] = arrays["hi"][:, c]
                data["anomaly" if one else f"{name}-anomaly"] = flags[:, c]
                data["score" if one else f"{name}-score"] = arrays["score"][:, c]
            if futures:
                # `future_unsent`: per row, the future steps past the values sent that its forecast
                # read as the training mean, from every request's answer (0: none).
                data["future_unsent"] = result.get("future_unsent", [0] * (b - a))
            return pd.DataFrame(data)

        frames = []
        shrunk: list[dict[str, Any]] = []
        with ThreadPoolExecutor(max_workers=_evaluating(self.concurrency, spec)) as pool:
            for round_groups in rounds:
                for group, (response, answer, sent) in zip(
                    round_groups, pool.map(run, round_groups), strict=True
                ):
                    with _reading(response, [p[0].id for p in group]):
                        for (history, a, b), result in zip(group, answer["series"], strict=True):
                            if sent is not None:  # only the last `sent` rows of the piece were checked
                                shrunk.append(
                                    {"series": history.id, "field": "last", "asked": b - a, "sent": sent}
                                )
                                a = b - sent
                            frames.append(piece_frame(history, a, b, result, float(answer["level"])))
                            if repair and "replaced" in result:  # what the next piece's windows read
                                replaced = np.array(result["replaced"], bool)
                                rows = seen.setdefault(id(history), history.values.copy())[a:b]
                                rows[replaced] = np.array(result["forecast"], np.float64)[replaced]
        frame = pd.concat(frames, ignore_index=True)
        frame = frame.sort_values([id_col, time_col], kind="stable", ignore_index=True)
        frame.attrs["shrunk"] = shrunk
        return frame

    def _evaluated(
        self, path: str, ids: list[Any], body: dict[str, Any], field: str, on_too_long: OnTooLong
    ) -> tuple[httpx.Response, Any, int | None]:
        """POST an evaluation `body`: (the answer, its JSON, the `field` value it was resent with or None).
        A 422 `evaluation_too_long` naming `field` and a `limit` of at least one below what was sent is
        resent once with that limit where `on_too_long` is "shrink" (a second refusal raises); otherwise
        it raises, saying what fits and how to have the client resend."""
        try:
            response = self._send("POST", path, ids, json=body)
            return response, _json(response, ids), None
        except ServiceError as e:
            fits = e.limit if e.code == TOO_LONG and e.field == field else None
            if fits is None:
                raise
            if on_too_long == "shrink" and 0 < fits < int(body[field]):
                body = {**body, field: fits}
                response = self._send("POST", path, ids, json=body)
                return response, _json(response, ids), fits
            hint = (
                f" [client: {field} = {fits} fits now; call with on_too_long='shrink' to resend with it]"
                if fits > 0
                else ""
            )
            raise ServiceError(
                e.status, e.message + hint, e.series, code=e.code, field=e.field, limit=e.limit
            ) from None


def _mark_in_sample(
    frame: pd.DataFrame, chunks: Sequence[Sequence[_History]], answers: Sequence[tuple[Any, Any, Any]]
) -> None:
    """`frame.attrs["training_end"]` (the last timestamp the version was trained on, ISO 8601 as the
    service's answer says it; None for a version exported without that record) and
    `frame.attrs["in_sample"]`: each window whose values the served weights may have been fitted on
    (`series`, `cutoff` in ISO 8601: attrs stay JSON, which `to_parquet` writes), which the service marks
    where it did not refit. Any such window is also said as a warning: its scores flatter the model
    (docs/backtest.md)."""
    ends = [answer.get("training_end") for _, answer, _ in answers]
    end = next((e for e in ends if e is not None), None)
    frame.attrs["training_end"] = end
    marked = [
        {"series": history.id, "cutoff": pd.Timestamp(history.stamps[window["cutoff"] - 1]).isoformat()}
        for chunk, (_, answer, _) in zip(chunks, answers, strict=True)
        for history, result in zip(chunk, answer["series"], strict=True)
        for window in result["windows"]
        if window.get("in_sample")
    ]
    frame.attrs["in_sample"] = marked
    if marked:
        total = sum(len(result["windows"]) for _, answer, _ in answers for result in answer["series"])
        warn_user(
            f"{len(marked)} of {total} backtest windows begin at or before the model's training end "
            f"({end}) and were scored with the served weights: in-sample, their metrics flatter the model. "
            "refit=True refits the read-out before each cutoff where the version can be refitted and "
            "every cutoff leaves a training window (fewer n_windows); frame.attrs['in_sample'] lists them",
        )


def _window_frame(
    history: _History,
    window: dict[str, Any],
    columns: list[str],
    prefix: Callable[[str], str],
    levels: Sequence[float],
    id_col: str,
    time_col: str,
) -> pd.DataFrame:
    """One backtest window's rows: the steps after its cutoff, the actual values under the channels'
    names, the forecast under the model's and each level's bounds."""
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
        for v in levels:
            data[f"{prefix(name)}-lo-{v:g}"] = np.array(window[f"lo-{v:g}"])[:, c]
            data[f"{prefix(name)}-hi-{v:g}"] = np.array(window[f"hi-{v:g}"])[:, c]
    return pd.DataFrame(data)


def _piece_rounds(
    series: list[_History], need: int, lead: int, last: int | None, limit: int, in_order: bool
) -> list[list[list[tuple[_History, int, int]]]]:
    """An anomaly check's requests, in rounds sent one after the other: each series cut into pieces
    (series, first row checked, end) of at most `limit` checked rows, from its first checkable row
    (`need` values and `lead` − 1 before it) or its last `last`; one request holds pieces of one size
    (they share `last`), at most `limit` checked rows in all. `in_order` (a repaired check): round r
    holds every series' r-th piece, which reads what the rounds before repaired; else one round."""
    pieces: list[list[tuple[_History, int, int]]] = []
    for history in series:
        n = len(history.values)
        first = need + lead - 1 if last is None else n - last
        pieces.append([(history, a, min(a + limit, n)) for a in range(max(first, 0), n, limit)])
    if in_order:
        order = [[p[r] for p in pieces if r < len(p)] for r in range(max(map(len, pieces), default=0))]
    else:
        order = [[piece for p in pieces for piece in p]]
    return [_same_size(round_pieces, limit) for round_pieces in order]


def _same_size(pieces: list[tuple[_History, int, int]], limit: int) -> list[list[tuple[_History, int, int]]]:
    """`pieces` in requests of pieces of one size, at most `limit` checked rows each."""
    by_size: dict[int, list[tuple[_History, int, int]]] = {}
    for piece in pieces:
        by_size.setdefault(piece[2] - piece[1], []).append(piece)
    return [
        same[i : i + max(1, limit // size)]
        for size, same in by_size.items()
        for i in range(0, len(same), max(1, limit // size))
    ]


def _check_on_too_long(value: str) -> None:
    if value not in ("raise", "shrink"):
        raise ValueError(f"on_too_long must be 'raise' or 'shrink', not {value!r}")


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
