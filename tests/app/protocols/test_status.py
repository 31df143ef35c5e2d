"""Domain errors -> statuses: the shared HTTP table and each protocol's choices, device faults included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.core.errors import DeviceError, DeviceOutOfMemory, InferenceError, InvalidInput
from app.protocols.oip_v2.errors import status_of as oip_status
from app.protocols.rsa_v1.errors import status_of as v1_status
from app.protocols.status import HTTP_STATUS, error_headers, lookup

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("error", [DeviceError("cuBLAS failed"), DeviceOutOfMemory("out of memory")])
def test_device_faults_are_retryable_503s_in_every_http_protocol(error: DeviceError) -> None:
    assert lookup(HTTP_STATUS, error, 500) == v1_status(error) == oip_status(error) == 503
    assert error.code in ("device_error", "device_out_of_memory")
    assert error_headers(DeviceError("x", retry_after_s=1)) == {"Retry-After": "1"}


def test_other_failures_keep_their_statuses() -> None:
    assert v1_status(InferenceError("bug")) == oip_status(InferenceError("bug")) == 500
    assert v1_status(InvalidInput("bad")) == 422 and oip_status(InvalidInput("bad")) == 400


def test_grpc_answers_device_faults_unavailable() -> None:
    """In a process of its own: gRPC's generated messages cannot share one with tritonclient's."""
    code = (
        "from app.core.errors import DeviceError, DeviceOutOfMemory\n"
        "from app.protocols.oip_v2.grpc_server import status_of\n"
        "print(status_of(DeviceError('x')).name, status_of(DeviceOutOfMemory('x')).name)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["UNAVAILABLE", "UNAVAILABLE"], out.stderr
