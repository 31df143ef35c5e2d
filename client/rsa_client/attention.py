"""Attention inspection (/v1 .../attention): the raw answer or its PNG (`attention`) and a global model's
forecast broken into lags, terms and members as DataFrames (`explain`, rsa_client.explain)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rsa_client.explain import Explanation, explanation
from rsa_client.frames import _channel_columns, _start, one_series, read_times
from rsa_client.models import ModelSpec, _Models
from rsa_client.series import _histories
from rsa_client.transport import _json, _unreadable


class _Inspecting(_Models):
    """Attention and explanations of one series."""

    # -- attention --------------------------------------------------------------------------------
    def attention(
        self,
        df: pd.DataFrame,
        model: str | None = None,
        version: int | None = None,
        *,
        time_col: str = "ds",
        target_col: str | None = None,
        **options: Any,
    ) -> dict[str, Any] | bytes:
        """Attention inspection of one series (`df`: its rows, `time_col` and the channel columns; its
        last L rows are read): `options` are /v1's (`matrices`, `channel`, `average_heads`, `layers`,
        `format`). The JSON answer, or the PNG's bytes with format="png"."""
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        spec = self.model(self._only_model(model, "attention and explain"), version)
        series, path = self._one_series(df, spec, time_col, target_col)
        response = self._send("POST", path, json={"series": series, **options})
        if response.headers.get("content-type", "").startswith("image/"):
            return response.content
        answer = _json(response)
        if not isinstance(answer, dict):
            raise _unreadable(response, f"a JSON {type(answer).__name__}, not an object")
        return answer

    @one_series
    def explain(
        self,
        df: pd.DataFrame,
        model: str | None = None,
        version: int | None = None,
        *,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (NeuralForecast's and statsforecast's name)
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str | None = None,
        future: dict[str, list[float]] | None = None,
        past: dict[str, list[float | None]] | None = None,
        static: dict[str, Any] | None = None,
    ) -> Explanation:
        """What a global model's forecast of one series (`df`: its rows, oldest first by `time_col`) is
        made of, as DataFrames (rsa_client.explain): each lag's weight and contribution per horizon step,
        each term's (REM kernel, direct lags, missing share, bias, covariate) share and contribution, a
        hybrid's members. A covariate model's covariates as `forecast` takes them: `df`'s other columns
        (past and future ones a value per row, a static one constant) and `X_df` the future ones over the
        H steps after the last row (`id_col` optional: one series); or as /v1 takes them, `future`,
        `past` and `static`. A multichannel model answers matrices: `attention`."""
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        spec = self.model(self._only_model(model, "attention and explain"), version)
        names = {c["name"] for c in spec.covariates if c["kind"] != "calendar"}
        if X_df is not None or names & set(df.columns):  # the frame conventions of forecast
            if future is not None or past is not None or static is not None:
                raise ValueError(
                    "give a covariate model's covariates as df's columns and X_df, or as future, past and "
                    "static, not both"
                )
            series, path = self._one_history(df, spec, X_df, id_col, time_col, target_col)
        else:
            # past covariates need a value per value sent: then the whole history goes
            series, path = self._one_series(df, spec, time_col, target_col, whole=bool(past))
        for key, value in (("future", future), ("past", past), ("static", static)):
            if value is not None:
                series[key] = value
        answer = _json(self._send("POST", path, json={"series": series}))
        if not isinstance(answer, dict):
            raise ValueError(f"the attention answer is a JSON {type(answer).__name__}, not an object")
        return explanation(answer)

    def _one_history(
        self,
        df: pd.DataFrame,
        spec: ModelSpec,
        x_df: pd.DataFrame | None,
        id_col: str,
        time_col: str,
        target_col: str | None,
    ) -> tuple[dict[str, Any], str]:
        """/v1 attention's `series` for a covariate model's one series of `df` with its covariate columns
        and `x_df`'s future rows (read by the rules `forecast` reads them by: `_histories`); the path."""
        x_df = None if x_df is None else read_times(x_df, time_col)
        if df[id_col].nunique() != 1:  # a frame without id_col is one series already (`one_series`)
            raise ValueError(f"explain reads one series; df's {id_col!r} holds {df[id_col].nunique()}")
        columns = _channel_columns(df, spec, target_col)
        reach = spec.horizon if x_df is not None else 0
        (history,) = _histories(df, columns, id_col, time_col, spec, x_df, reach)
        series = history.body(reach=reach)
        if "future" in series:  # /v1 forecast's and attention's future: the H steps forecast alone
            if x_df is None:
                raise ValueError(
                    f"model {spec.name} reads the future covariates {list(series['future'])}: give their "
                    f"values over the {spec.horizon} steps after the last row as X_df"
                )
            series["future"] = {k: v[-spec.horizon :] for k, v in series["future"].items()}
        return series, f"/v1/models/{spec.name}/versions/{spec.version}/attention"

    def _one_series(
        self,
        df: pd.DataFrame,
        spec: ModelSpec,
        time_col: str,
        target_col: str | None,
        whole: bool = False,
    ) -> tuple[dict[str, Any], str]:
        """/v1 attention's `series` for the one series of `df`: its last L rows (`whole`: every row, oldest
        first by `time_col`) in the model's channel columns, and their start; and the path it goes to."""
        columns = _channel_columns(df, spec, target_col)
        frame = df.sort_values(time_col, kind="stable")
        if not whole:
            frame = frame.tail(spec.input_length)
        series: dict[str, Any] = {"values": frame[columns].to_numpy(np.float64).tolist()}
        if time_col in frame:
            series["start"] = _start(frame[time_col])
        return series, f"/v1/models/{spec.name}/versions/{spec.version}/attention"
