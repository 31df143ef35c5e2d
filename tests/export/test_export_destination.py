"""Where `export.panel export` publishes by default (issue 45, item 10): my_models/ under the working folder
(ignored by git, never the tracked model_repository/), or RSA_MODEL_REPOSITORY; it prints the command that
serves that repository with polling (scripts/serve.sh)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from export.global_models.cli import cli
from tests.export.test_panel import seasonal_panel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("trained")
    rows = []
    for i, s in enumerate(seasonal_panel(12, seed=3, lengths=(40, 50))):
        stamps = pd.date_range("2000-01-01", periods=len(s), freq="MS")
        rows += [(f"s{i}", str(t.date()), float(v)) for t, v in zip(stamps, s, strict=True)]
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(folder / "long.csv", index=False)
    args = ["train", "--data", str(folder / "long.csv"), "--horizon", "3", "--input-periods", "1"]
    done = CliRunner().invoke(cli, [*args, "--no-local", "--out", str(folder / "run")])
    assert done.exit_code == 0, done.output
    return folder / "run" / "model.json"


def test_the_default_repository_is_my_models_and_the_command_that_serves_it_is_printed(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RSA_MODEL_REPOSITORY", raising=False)
    done = CliRunner().invoke(cli, ["export", "--model", str(model_file), "--name", "shops"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "my_models" / "shops" / "1" / "manifest.json").is_file()
    assert not (ROOT / "model_repository" / "shops").exists()
    assert "served by: RSA_MODEL_REPOSITORY=my_models bash scripts/serve.sh" in done.output


def test_rsa_model_repository_names_another(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "served here"
    done = CliRunner().invoke(
        cli,
        ["export", "--model", str(model_file), "--name", "shops"],
        env={"RSA_MODEL_REPOSITORY": str(other)},
    )
    assert done.exit_code == 0, done.output
    assert (other / "shops" / "1" / "manifest.json").is_file() and not (tmp_path / "my_models").exists()
    assert f"served by: RSA_MODEL_REPOSITORY='{other}' bash scripts/serve.sh" in done.output  # quoted
