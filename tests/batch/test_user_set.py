"""The user's install set (issue 45, item 7): one set for training, export, the batch command and the client
without the test tools (requirements/user.txt, `bash scripts/setup.sh user`), and a batch command that
names it when Ray (or another of its modules) is missing, instead of a bare `No module named 'ray'`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements"
TEST_TOOLS = ("pytest", "hypothesis", "ruff", "mypy", "schemathesis", "playwright", "hadolint", "grimp")


def pins(path: Path) -> dict[str, str]:
    """name -> the whole pin line, of a requirements file's own lines (not the files it includes)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            out[re.split(r"[=<>\[ ]", line, maxsplit=1)[0].lower()] = line
    return out


def test_the_user_set_has_train_ray_and_the_client_and_no_test_tool() -> None:
    text = (REQUIREMENTS / "user.txt").read_text()
    lines = [x.split("#", 1)[0].strip() for x in text.splitlines()]
    assert "-r train.txt" in lines and "-e ./client" in lines
    user, dev = pins(REQUIREMENTS / "user.txt"), pins(REQUIREMENTS / "dev.txt")
    assert set(user) == {"ray", "httpx"}
    for name, line in user.items():  # the same pins as the test set's, so the two venvs agree
        assert dev[name] == line, name
    for tool in TEST_TOOLS:
        assert not any(line.startswith(tool) for line in lines), tool
    # setup.sh installs requirements/<set>.txt, PyTorch's CPU build first for every set but serve
    script = (ROOT / "scripts" / "setup.sh").read_text()
    assert "scripts/setup.sh user" in script and "requirements/${set_name}.txt" in script


def test_the_batch_command_without_ray_names_the_user_set(tmp_path: Path) -> None:
    """Ray made unimportable in a fresh interpreter (as after `setup.sh train`): exit status 2 and one line
    naming the module, the set and the command, no traceback."""
    code = (
        "import sys; sys.modules['ray'] = None\n"  # `import ray` raises ModuleNotFoundError, as if absent
        "from batch.__main__ import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = ["score", "--model-repository", str(ROOT / "model_repository"), "--model", "etth1-rsa"]
    args += ["--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "needs 'ray'" in done.stderr and "bash scripts/setup.sh user" in done.stderr
    assert "requirements/user.txt" in done.stderr


def test_a_missing_module_outside_the_user_set_is_not_hidden() -> None:
    from batch.__main__ import missing_dependency

    assert missing_dependency(ModuleNotFoundError("No module named 'ray'", name="ray")) is not None
    assert missing_dependency(ModuleNotFoundError("No module named 'ray.data'", name="ray.data")) is not None
    assert missing_dependency(ModuleNotFoundError("No module named 'app'", name="app")) is None


def test_an_export_command_without_its_modules_names_the_user_set(tmp_path: Path) -> None:
    """`python -m export.panel train` where typer is missing (as after `setup.sh serve`): one line naming
    the module and the set, no traceback; imported as a library, the export package changes nothing."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "typer.py").write_text("raise ModuleNotFoundError(\"No module named 'typer'\", name='typer')\n")
    env = {"PYTHONPATH": f"{fake}{os.pathsep}{ROOT}", "PATH": os.environ.get("PATH", "")}
    args = ["-m", "export.panel", "train", "--data", "x.csv", "--horizon", "3"]
    done = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "needs 'typer'" in done.stderr and "bash scripts/setup.sh user" in done.stderr
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, export; print(sys.excepthook is sys.__excepthook__)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert imported.stdout.strip() == "True", imported.stderr
