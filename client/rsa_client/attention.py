"""Attention inspection (/v1 .../attention): the raw answer or its PNG (`attention`) and a global model's
forecast broken into lags, terms and members as DataFrames (`explain`, rsa_client.explain)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rsa_client.explain import Explanation, explanation
from rsa_client.frames import _channel_columns, _start, read_times
from rsa_client.models import _Models
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
        series, path = self._one_series(df, model, version, time_col, target_col)
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
        model: str | None = None,
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
        df = read_times(df, time_col)  # text dates: the exporter's rule (rsa_core.written)
        # past covariates need a value per value sent: then the whole history goes
        series, path = self._one_series(df, model, version, time_col, target_col, whole=bool(past))
        for key, value in (("future", future), ("past", past), ("static", static)):
            if value is not None:
                series[key] = value
        answer = _json(self._send("POST", path, json={"series": series}))
        if not isinstance(answer, dict):
            raise ValueError(f"the attention answer is a JSON {type(answer).__name__}, not an object")
        return explanation(answer)

    def _one_series(
        self,
        df: pd.DataFrame,
        model: str | None,
        version: int | None,
        time_col: str,
        target_col: str | None,
        whole: bool = False,
    ) -> tuple[dict[str, Any], str]:
        """/v1 attention's `series` for the one series of `df`: its last L rows (`whole`: every row, oldest
        first by `time_col`) in the model's channel columns, and their start; and the path it goes to."""
        model = self._only_model(model, "attention and explain")
        spec = self.model(model, version)
        columns = _channel_columns(df, spec, target_col)
        frame = df.sort_values(time_col, kind="stable")
        if not whole:
            frame = frame.tail(spec.input_length)
        series: dict[str, Any] = {"values": frame[columns].to_numpy(np.float64).tolist()}
        if time_col in frame:
            series["start"] = _start(frame[time_col])
        return series, f"/v1/models/{model}/versions/{spec.version}/attention"
