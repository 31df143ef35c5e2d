"""The application object: import hygiene, OpenAPI, settings resolution."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from app.main import create_app
from tests.app.conftest import make_settings, running_client, runtime_of

ROOT = Path(__file__).resolve().parents[2]


def test_import_does_not_pull_torch_onnx_or_matplotlib() -> None:
    code = (
        "import sys, app.main; "
        "bad = [m for m in ('torch', 'onnx', 'matplotlib', 'models', 'export') if m in sys.modules]; "
        "assert not bad, bad; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_openapi_documents_every_route(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/healthz",
        "/readyz",
        "/v1/models",
        "/v1/models/{name}",
        "/v1/models/{name}/forecast",
        "/v1/models/{name}/versions/{version}/forecast",
        "/v1/models/{name}/attention",
        "/v1/models/{name}/versions/{version}/attention",
        "/v1/models/{name}/fit_forecast",
        "/v1/models/{name}/versions/{version}/fit_forecast",
    ):
        assert path in paths, path
    forecast = paths["/v1/models/{name}/forecast"]["post"]
    request_schema = forecast["requestBody"]["content"]["application/json"]["schema"]
    assert request_schema["$ref"].endswith("ForecastRequest")
    assert "ErrorResponse" in forecast["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
    fit = paths["/v1/models/{name}/fit_forecast"]["post"]
    assert fit["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("FitForecastRequest")
    assert "image/png" in paths["/v1/models/{name}/attention"]["post"]["responses"]["200"]["content"]
    assert client.get("/docs").status_code == 200


def test_settings_are_resolved_at_startup_not_at_build(toy_repository: Path) -> None:
    app = create_app()  # no settings read here
    assert not hasattr(app.state, "settings")
    with running_client(make_settings(toy_repository)) as client:
        assert runtime_of(client).settings.model_repository == toy_repository
