"""Domain errors: what went wrong, in terms of the service, for any protocol.

Core code (inference, artifacts, codecs) raises these. Each has a stable machine-readable `code`;
turning them into a wire response (status code, body shape) is the job of each protocol's own
renderer (`app/protocols/<protocol>/errors.py`). Nothing here imports a web framework.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any


class ServiceError(Exception):
    """Base of every domain error: a message, optionally the request field and the limit it broke."""

    code = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        limit: Any | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.limit = limit
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[Any, ...]:
        # Raised in the parse process, it comes back pickled: by default only the message would
        # (`args`), and the error would lose the field it names.
        return (_restore, (type(self), self.message, self.field, self.limit, self.retry_after_s))


def _restore(
    cls: type[ServiceError], message: str, field: str | None, limit: Any | None, retry_after_s: int | None
) -> ServiceError:
    return cls(message, field=field, limit=limit, retry_after_s=retry_after_s)


class InvalidInput(ServiceError, ValueError):  # noqa: N818  (kserve's names, kept short on purpose)
    code = "invalid_input"


def check_names(
    given: Collection[str],
    want: Sequence[str],
    field: str,
    unknown: Callable[[str], str],
    missing: Callable[[str], str],
) -> None:
    """`given` names exactly `want`, in any order (a request's channels, a series' covariates): else
    InvalidInput at `field`.<name> with `want` as the limit, for the first name given that is not wanted
    (worded by `unknown(name)`), then for the first wanted that is not given (`missing(name)`)."""
    for name in given:
        if name not in want:
            raise InvalidInput(unknown(name), field=f"{field}.{name}", limit=list(want))
    for name in want:
        if name not in given:
            raise InvalidInput(missing(name), field=f"{field}.{name}", limit=list(want))


class NonFiniteResult(InvalidInput):
    """The model's answer for this input is not finite: refused rather than sent as null."""

    code = "non_finite_result"


class PayloadTooLarge(ServiceError):  # noqa: N818
    code = "payload_too_large"

    @classmethod
    def body(cls, limit: int, size: int | None = None) -> PayloadTooLarge:
        """A body over RSA_MAX_BODY_BYTES (of `size` bytes, when declared), with the three ways out: JSON
        numbers take about 19 bytes each (docs/examples/forecast_request.json: 69,865 bytes for 3,584
        values), OIP v2's binary tensors 4."""
        what = f"request body of {size} bytes" if size is not None else "request body"
        return cls(
            f"{what} is over the limit of {limit} bytes (RSA_MAX_BODY_BYTES): send fewer series per request "
            "(split the batch), send the values as Open Inference Protocol v2 binary tensors "
            "(POST /v2/models/{name}/infer, 4 bytes a value against about 19 in JSON), or raise "
            "RSA_MAX_BODY_BYTES on the server",
            field="body",
            limit=limit,
        )


class UnsupportedMediaType(ServiceError):  # noqa: N818
    code = "unsupported_media_type"


class ModelNotFound(ServiceError, LookupError):  # noqa: N818
    code = "model_not_found"


class NotServed(ServiceError):  # noqa: N818
    """A route this service's settings do not serve (the repository API outside its control mode)."""

    code = "not_found"


class VersionNotFound(ModelNotFound):
    code = "version_not_found"


class LoadFailed(InvalidInput):
    """A model asked to load (the repository API) did not: its versions' reasons are in the message."""

    code = "load_failed"


class InvalidModelName(InvalidInput):
    """A model name given to the repository API that is not one plain folder name of the repository
    (app/artifacts/repository.py: NAME_RULE); refused before any file is looked at."""

    code = "invalid_model_name"


class TooManyVersions(ServiceError):  # noqa: N818
    """A load that would hold more model versions than RSA_MAX_LOADED_VERSIONS: nothing of it was loaded."""

    code = "too_many_versions"


class PublishRefused(ServiceError):  # noqa: N818
    """A refit not published: its target model is of another kind, or a bound on publishing
    (RSA_MAX_MODEL_VERSIONS, RSA_MAX_MODEL_FOLDERS) is in the way. Nothing was written."""

    code = "publish_refused"


class ModelNotReady(ServiceError):  # noqa: N818
    """Still loading, failed to load, or shutting down: worth retrying later."""

    code = "model_not_ready"


class Overloaded(ServiceError):  # noqa: N818
    """More work than can be served in time: refused at once, worth retrying (Retry-After)."""

    code = "overloaded"


class Timeout(ServiceError):  # noqa: N818
    """The request's deadline passed before its answer was ready."""

    code = "timeout"


class ClientClosed(ServiceError):  # noqa: N818
    """The connection closed before the request's body had come: nothing can be answered. Counted as
    nginx's 499 (client closed request), never as a server error."""

    code = "client_closed_request"


class BodyTimeout(ClientClosed):
    """The body came slower than RSA_BODY_MIN_BYTES_S: the connection answered 408 and closed
    (app/core/connections.py), and the request is counted as that 408."""

    code = "request_timeout"


class InferenceError(ServiceError):
    """The session call failed: a server fault. The batcher keeps serving."""

    code = "inference_failed"


class DeviceError(ServiceError):
    """The execution provider failed under a call (a CUDA, cuBLAS or cuDNN error, a lost device): the
    request was fine and may succeed when retried. The batcher keeps serving."""

    code = "device_error"


class DeviceOutOfMemory(DeviceError):  # noqa: N818
    """The device ran out of memory on a call, and again on half of it."""

    code = "device_out_of_memory"


class Unauthenticated(ServiceError):  # noqa: N818
    """No credentials where an API key is required."""

    code = "unauthenticated"


class PermissionDenied(ServiceError):  # noqa: N818
    """Credentials that are not valid."""

    code = "forbidden"
