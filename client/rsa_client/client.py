"""The client: a long DataFrame in, binary OIP v2 requests sized under the server's limits, a long
DataFrame out; plus backtests, anomaly checks, attention inspection and the repository API.

`Client` puts together one class per role, each in its module:
transport   the HTTP session, retries, the bound on each request, `ServiceError`, reading answers
models      `ModelSpec`/`ModelLimits` (/v1/models and the OIP v2 metadata) and the repository API
frames      DataFrame in and out: channel columns, timestamps in the model's zone, steps, long frames
series      a /v1 series item with its covariates, a covariate model's tensors, `X_df`'s checks
forecast    `forecast`, `forecast_pretrained`, `fit_forecast`
evaluation  `cross_validation`, `detect_anomalies`
attention   `attention`, `explain`
"""

from __future__ import annotations

from rsa_client.attention import _Inspecting
from rsa_client.evaluation import _Evaluating
from rsa_client.forecast import _Forecasting
from rsa_client.frames import forecast_columns
from rsa_client.models import ModelLimits, ModelSpec
from rsa_client.transport import ServiceError

__all__ = ["Client", "ModelLimits", "ModelSpec", "ServiceError", "forecast_columns"]


class Client(_Forecasting, _Evaluating, _Inspecting):
    """`Client(url)`: the service at `url` (e.g. http://127.0.0.1:8000).

    `concurrency`: requests in flight at once; `max_retries`: tries of a request answered 503 or 429 (each
    after its `Retry-After`, at most `max_wait_s`) before the error is raised; a connection refused, reset
    or closed before its answer is tried again twice (none with `max_retries=0`; a fit that publishes
    only where the connection was refused)."""
