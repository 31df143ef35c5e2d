"""Settings from RSA_* environment variables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import KSERVE_MODEL_DIR, REPO_ROOT, Settings, get_settings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RSA_"):
            monkeypatch.delenv(name)
    s = Settings()
    assert s.model_repository == REPO_ROOT / "model_repository"
    assert (s.models, s.device, s.max_series_per_request, s.max_batch_rows) == ([], "auto", 1024, 256)
    assert (s.max_history_length, s.max_batch_wait_ms, s.intra_op_threads) == (100_000, 0.0, None)


def test_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RSA_MODEL_REPOSITORY", str(tmp_path))
    monkeypatch.setenv("RSA_MODELS", " etth1-rsa, toy ,,")
    monkeypatch.setenv("RSA_DEVICE", "cpu")
    monkeypatch.setenv("RSA_MAX_BATCH_WAIT_MS", "0.5")
    monkeypatch.setenv("RSA_LOG_LEVEL", "debug")
    monkeypatch.setenv("RSA_GPU_MEM_LIMIT_BYTES", "")  # empty means unset
    s = Settings()
    assert s.model_repository == tmp_path
    assert s.models == ["etth1-rsa", "toy"]
    assert (s.device, s.max_batch_wait_ms, s.log_level, s.gpu_mem_limit_bytes) == ("cpu", 0.5, "DEBUG", None)


@pytest.mark.parametrize(
    ("name", "value"), [("RSA_DEVICE", "tpu"), ("RSA_MAX_BATCH_ROWS", "0"), ("RSA_REQUEST_TIMEOUT_S", "abc")]
)
def test_invalid_environment(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_get_settings_is_cached() -> None:
    get_settings.cache_clear()
    try:
        assert get_settings() is get_settings()
    finally:
        get_settings.cache_clear()


def test_api_keys_from_the_environment_never_print(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RSA_API_KEYS", " first-key , second-key ,,")
    monkeypatch.setenv("RSA_API_KEYS_FILE", str(tmp_path / "keys"))
    s = Settings()
    assert [k.get_secret_value() for k in s.api_keys] == ["first-key", "second-key"]
    assert s.api_keys_file == tmp_path / "keys"
    assert "first-key" not in repr(s) and "first-key" not in str(s.model_dump())


def test_kserve_storage_uri_means_the_models_are_at_mnt_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """KServe's storage initializer downloads STORAGE_URI into /mnt/models: that wins over
    RSA_MODEL_REPOSITORY (which the image sets), and without STORAGE_URI nothing changes."""
    monkeypatch.setenv("RSA_MODEL_REPOSITORY", "/models")
    assert Settings().model_repository == Path("/models")
    monkeypatch.setenv("STORAGE_URI", "")  # empty means unset
    assert Settings().model_repository == Path("/models")
    for uri in ("s3://bucket/rsa/model_repository", "/mnt/models"):  # as written, and as KServe rewrites it
        monkeypatch.setenv("STORAGE_URI", uri)
        assert Settings().model_repository == KSERVE_MODEL_DIR == Path("/mnt/models")
    monkeypatch.delenv("RSA_MODEL_REPOSITORY")
    assert Settings().model_repository == KSERVE_MODEL_DIR
