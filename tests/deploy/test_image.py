"""The production image, built from the Dockerfile and run for real with podman.

One build per module, from the local stand-in for python:3.11-slim-bookworm (scripts/base-image.sh), with
the flags these machines need (shared docs/containers.md: runc, the host network, ulimits, the host's CA
bundle for pip behind the TLS proxy; none of them is baked into the image). Then one container started
the way production starts it, read-only root and a tmpfs at /tmp, on a free port of the host network:
every request goes to 127.0.0.1. The stop test is last: it stops that container.

Build time and image size go to /tmp/rsa-image-build.json and are printed by `test_image_size`.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.loadgen import free_port
from tests.deploy.conftest import need_tool

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/rsa:test"
BASE_IMAGE = "localhost/rsa-base:bookworm"
BUILD_REPORT = Path(tempfile.gettempdir()) / "rsa-image-build.json"
REQUEST = ROOT / "docs" / "examples" / "forecast_request.json"
FORECAST_PATH = "/v1/models/etth1-rsa/forecast"

# crun, podman's default runtime, fails on these machines; podman's default rlimits exceed their hard
# limits; --network host shares the loopback, so the service is reached on 127.0.0.1 like any process.
RUN_FLAGS = ["--runtime", "runc", "--network", "host", "--ulimit", "nofile=1024:1024"]
RUN_FLAGS += ["--ulimit", "nproc=1024:1024"]
# Test-only: pip in the build reaches PyPI through this machine's TLS proxy, whose CA is in the host's
# bundle. Debian's pip reads the system bundle, so mounting it over the image's is all it takes.
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BUILD_FLAGS = [*RUN_FLAGS, "-v", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"]

BUILD_TIMEOUT_S = 900  # a cold build downloads ~1.5 GB of wheels: about 2 minutes here
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30  # podman stop -t: SIGTERM, then SIGKILL after this long
GRACEFUL_SHUTDOWN_S = 20  # the service's default RSA_GRACEFUL_SHUTDOWN_S, which the image keeps
# The image is ~3.0 GB, 2.1 GB of it NVIDIA's CUDA 13 and cuDNN 9 wheels. PyTorch (+0.7 GB even as the
# CPU wheel) or a second copy of the CUDA libraries would push it over.
MAX_IMAGE_BYTES = 3_400_000_000
# Same env on both sides of the parity test: one intra-op thread, so the reductions run in one order.
SERVICE_ENV = {"RSA_INTRA_OP_THREADS": "1", "RSA_DEVICE": "auto", "RSA_LOG_LEVEL": "INFO"}


@dataclass(frozen=True)
class Build:
    seconds: float
    size_bytes: int
    image_id: str
    cached_steps: int  # steps podman took from its layer cache


@dataclass(frozen=True)
class Container:
    name: str
    port: int
    ready_s: float

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _podman(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        pytest.fail(f"podman {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def _logs(name: str) -> str:
    result = _podman("logs", name, check=False)
    return result.stdout + result.stderr


def _wait_ready(
    url: str, alive: Callable[[], bool], describe: Callable[[], str], timeout: float = READY_TIMEOUT_S
) -> float:
    """Seconds until GET /readyz answered 200; fails early if `alive()` turns false."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return time.monotonic() - start
        except httpx.TransportError:
            pass
        if not alive():
            pytest.fail(f"the service exited before it was ready:\n{describe()}")
        time.sleep(0.25)
    pytest.fail(f"/readyz not 200 within {timeout} s:\n{describe()}")


def _container_running(name: str) -> bool:
    state = _podman("inspect", "--format", "{{.State.Running}}", name, check=False)
    return state.stdout.strip() == "true"


def _run_container(name: str, port: int, *extra: str) -> Container:
    """Start the image as production does (read-only root, tmpfs /tmp) and wait until it is ready."""
    env = [arg for item in {**SERVICE_ENV, "RSA_PORT": str(port)}.items() for arg in ("-e", "=".join(item))]
    _podman("run", "-d", *RUN_FLAGS, "--read-only", "--tmpfs", "/tmp", *env, *extra, "--name", name, IMAGE)
    ready_s = _wait_ready(f"http://127.0.0.1:{port}", lambda: _container_running(name), lambda: _logs(name))
    return Container(name, port, ready_s)


def _remove(name: str) -> None:
    _podman("rm", "--force", "--time", "0", name, timeout=60, check=False)


@pytest.fixture(scope="module")
def image() -> Build:
    """Build the image (podman's layer cache makes a rebuild seconds when only the code changed)."""
    for tool in ("podman", "runc", "debootstrap"):
        need_tool(tool)
    base = subprocess.run(
        ["bash", "scripts/base-image.sh", BASE_IMAGE], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert base.returncode == 0, f"scripts/base-image.sh failed:\n{base.stdout}\n{base.stderr}"
    previous = _podman("image", "inspect", "--format", "{{.Id}}", IMAGE, check=False).stdout.strip()
    start = time.monotonic()
    build = _podman(
        "build",
        *BUILD_FLAGS,
        "--format",  # docker, not OCI: the OCI image config has no HEALTHCHECK
        "docker",
        "--build-arg",
        f"BASE_IMAGE={BASE_IMAGE}",
        "-t",
        IMAGE,
        str(ROOT),
        timeout=BUILD_TIMEOUT_S,
    )
    seconds = time.monotonic() - start
    inspect = _podman("image", "inspect", "--format", "{{.Size}} {{.Id}}", IMAGE)
    size, image_id = inspect.stdout.split()
    if previous and previous != image_id:
        # The tag moved on: drop the image it left (its own layers are only older code or requirements)
        # so that runs do not pile up untagged images. Refused, harmlessly, while a container uses it.
        _podman("rmi", previous, check=False)
    result = Build(seconds, int(size), image_id, build.stdout.count("Using cache"))
    BUILD_REPORT.write_text(json.dumps({"image": IMAGE, **result.__dict__}, indent=2) + "\n")
    return result


@pytest.fixture(scope="module")
def container(image: Build) -> Iterator[Container]:
    name = f"rsa-test-{uuid.uuid4().hex[:10]}"
    try:
        yield _run_container(name, free_port())
    finally:
        _remove(name)


@pytest.fixture(scope="module")
def local_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m app` from this checkout, outside any container, with the container's settings."""
    port = free_port()
    log = tmp_path_factory.mktemp("local-service") / "server.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("RSA_")}
    env.update(SERVICE_ENV)
    env.update(
        {
            "RSA_HOST": "127.0.0.1",
            "RSA_PORT": str(port),
            "RSA_MODEL_REPOSITORY": str(ROOT / "model_repository"),  # what the image holds at /models
        }
    )
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, lambda: process.poll() is None, lambda: log.read_text(errors="replace"))
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=GRACEFUL_SHUTDOWN_S + 10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _exec(container: Container, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return _podman("exec", container.name, *command, timeout=timeout, check=False)


def _forecast(url: str) -> dict[str, Any]:
    response = httpx.post(
        f"{url}{FORECAST_PATH}",
        content=REQUEST.read_bytes(),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_image_size(image: Build, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(
            f"\nimage {IMAGE}: {image.size_bytes / 1e9:.2f} GB, built in {image.seconds:.1f} s"
            f" ({image.cached_steps} steps from podman's cache); {BUILD_REPORT}"
        )
    assert image.size_bytes < MAX_IMAGE_BYTES


def test_becomes_ready(container: Container) -> None:
    assert container.ready_s < READY_TIMEOUT_S
    assert httpx.get(f"{container.url}/readyz", timeout=5).status_code == 200
    assert httpx.get(f"{container.url}/healthz", timeout=5).status_code == 200


def test_forecast_equals_the_service_outside_the_container(container: Container, local_service: str) -> None:
    """Same wheels, same CPU, one intra-op thread on both sides: the forecasts are equal, bit for bit."""
    inside, outside = _forecast(container.url), _forecast(local_service)
    # No GPU here: the image's CUDA provider cannot be created (no driver) and it falls back to CPU.
    assert inside["provider"] == outside["provider"] == "CPUExecutionProvider"
    assert (inside["model"], inside["version"]) == (outside["model"], outside["version"])
    assert inside["forecasts"] == outside["forecasts"]


def test_runs_as_non_root(container: Container) -> None:
    status = _exec(container, "cat", "/proc/1/status").stdout
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert uids == ["1000"] * 4  # real, effective, saved, filesystem
    assert _exec(container, "id", "-u").stdout.strip() == "1000"


def test_healthcheck_probes_readiness_on_rsa_port(container: Container) -> None:
    """The image's own HEALTHCHECK passes; the same command fails where nothing is ready (it can fail)."""
    result = _podman("healthcheck", "run", container.name, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    inspect = _podman("image", "inspect", "--format", "{{json .Config.Healthcheck}}", IMAGE)
    healthcheck = json.loads(inspect.stdout)
    assert healthcheck["Test"][0] == "CMD" and "/readyz" in healthcheck["Test"][-1]
    assert healthcheck["Timeout"] <= 10 * 10**9  # nanoseconds
    # The container listens on RSA_PORT, not 8000: the check follows RSA_PORT, so elsewhere it fails.
    unused = str(free_port())
    failing = _podman(
        "exec", "-e", f"RSA_PORT={unused}", container.name, *healthcheck["Test"][1:], check=False
    )
    assert failing.returncode == 1, failing.stdout + failing.stderr


def test_read_only_root(container: Container) -> None:
    inspect = _podman("inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", container.name)
    assert inspect.stdout.strip() == "true"
    for path in ("/probe", "/models/probe", "/srv/rsa/app/probe"):
        refused = _exec(container, "touch", path)
        assert refused.returncode != 0 and "Read-only file system" in refused.stderr, path
    assert _exec(container, "touch", "/tmp/probe").returncode == 0
    # A heatmap needs matplotlib, which writes its cache: MPLCONFIGDIR puts it in the tmpfs.
    series = json.loads(REQUEST.read_text())["series"][0]
    response = httpx.post(
        f"{container.url}/v1/models/etth1-rsa/attention",
        json={"series": series, "format": "png", "matrices": ["mixed"]},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"


def _version_1_only(tmp_path: Path) -> Path:
    """A model repository holding the shipped model's version 1 alone (the image holds all four)."""
    models = tmp_path / "models"
    shutil.copytree(ROOT / "model_repository" / "etth1-rsa" / "1", models / "etth1-rsa" / "1")
    for path in [models, *models.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the service runs as uid 1000
    return models


def _served_versions(image: Build, name: str, *run_args: str) -> list[tuple[str, list[int]]]:
    """The models and versions a container of the image serves, started with `run_args`."""
    try:
        mounted = _run_container(name, free_port(), *run_args)
        listed = httpx.get(f"{mounted.url}/v1/models", timeout=10).json()["models"]
        return [(m["name"], [v["version"] for v in m["versions"]]) for m in listed]
    finally:
        _remove(name)


def test_models_replaced_by_a_read_only_mount(image: Build, tmp_path: Path) -> None:
    """A read-only mount over /models (RSA_MODEL_REPOSITORY) replaces the shipped models."""
    models = _version_1_only(tmp_path)
    name = f"rsa-test-mount-{uuid.uuid4().hex[:10]}"
    assert _served_versions(image, name, "-v", f"{models}:/models:ro") == [("etth1-rsa", [1])]


def test_kserve_storage_uri_serves_mnt_models(image: Build, tmp_path: Path) -> None:
    """As KServe runs a custom container: STORAGE_URI set, the model repository at /mnt/models (where its
    storage initializer downloads it, read-only). The image's RSA_MODEL_REPOSITORY=/models, which holds
    every shipped version, is not what it serves."""
    models = _version_1_only(tmp_path)
    name = f"rsa-test-kserve-{uuid.uuid4().hex[:10]}"
    kserve = ["-v", f"{models}:/mnt/models:ro", "-e", "STORAGE_URI=s3://bucket/rsa/model_repository"]
    assert _served_versions(image, name, *kserve) == [("etth1-rsa", [1])]


def test_holds_the_service_only(container: Container) -> None:
    torch = _exec(container, "python", "-c", "import torch")
    assert torch.returncode == 1 and "ModuleNotFoundError: No module named 'torch'" in torch.stderr
    # Code and models only: no training code, tests or data next to the app; rsa_core is the time and
    # window rules the service shares with the exporter, the batch scorer and the client.
    assert _exec(container, "ls", "/srv/rsa").stdout.split() == ["app", "requirements", "rsa_core"]
    plain_ort = _exec(container, "python", "-c", "import importlib.metadata as m; m.version('onnxruntime')")
    assert plain_ort.returncode == 1 and "PackageNotFoundError" in plain_ort.stderr


def _pins() -> dict[str, str]:
    """name -> version of every exact pin in the files the image installs from (constraints included)."""
    pins: dict[str, str] = {}
    for name in ("serve.txt", "gpu.txt", "constraints.txt"):
        for raw in (ROOT / "requirements" / name).read_text().splitlines():
            line = raw.split("#", 1)[0].strip()
            if "==" in line and not line.startswith("-"):
                requirement, version = line.split("==")
                pins[_normalize(requirement.split("[")[0])] = version.strip()
    return pins


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_installed_package_is_pinned(container: Container) -> None:
    """A rebuild installs the same set: every distribution in the image's venv, the NVIDIA wheels
    included, is pinned at the version installed (serve.txt, gpu.txt or constraints.txt)."""
    listing = (
        "import importlib.metadata as m, json;"
        " print(json.dumps({d.name: d.version for d in m.distributions()}))"
    )
    result = _exec(container, "python", "-c", listing)
    assert result.returncode == 0, result.stderr
    installed = {_normalize(name): version for name, version in json.loads(result.stdout).items()}
    assert {
        "onnxruntime-gpu",
        "nvidia-cudnn-cu13",
        "nvidia-cublas",
        "nvidia-cuda-runtime",
    } <= installed.keys()
    pins = _pins()
    assert {name: version for name, version in installed.items() if pins.get(name) != version} == {}


def test_build_context_is_what_the_dockerfile_copies(image: Build, tmp_path: Path) -> None:
    """What podman really sends (.dockerignore applied): the app, rsa_core's source, the models and three
    requirement files; no virtual environment, data, results, tests, host bytecode or pip's egg-info."""
    dockerfile = tmp_path / "Context.Dockerfile"
    dockerfile.write_text(f"FROM {BASE_IMAGE}\nCOPY . /context/\n")
    tag = f"localhost/rsa-context:{uuid.uuid4().hex[:10]}"
    try:
        _podman("build", *RUN_FLAGS, "-f", str(dockerfile), "-t", tag, str(ROOT), timeout=300)
        listing = _podman(
            "run", "--rm", *RUN_FLAGS, tag, "find", "/context", "-type", "f", "-printf", "%P %s\n"
        )
    finally:
        _podman("rmi", "--force", tag, check=False)
    files = dict(line.rsplit(" ", 1) for line in listing.stdout.splitlines())
    requirements = {"requirements/serve.txt", "requirements/gpu.txt", "requirements/constraints.txt"}
    assert {path for path in files if path.startswith("requirements/")} == requirements
    assert {path.split("/")[0] for path in files} == {"app", "model_repository", "requirements", "rsa_core"}
    assert [path for path in files if "__pycache__" in path or path.endswith(".pyc")] == []
    assert [path for path in files if ".egg-info" in path or path.startswith("rsa_core/build")] == []
    tracked = subprocess.run(
        ["git", "ls-files", "app", "rsa_core", "model_repository"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert set(tracked.stdout.split()) <= files.keys()
    assert sum(int(size) for size in files.values()) < 20 * 2**20


def test_bytecode_is_precompiled(container: Container) -> None:
    """With a read-only root and PYTHONDONTWRITEBYTECODE, a module without a valid .pyc would be
    compiled again at every start; `python -v` says where each code object came from."""
    verbose = _exec(container, "python", "-v", "-c", "import app.main, app.__main__")
    assert verbose.returncode == 0, verbose.stderr
    code_objects = [line for line in verbose.stderr.splitlines() if line.startswith("# code object from")]
    from_source = [line for line in code_objects if not line.rstrip("'").endswith(".pyc")]
    assert len(code_objects) > 100 and from_source == []


CUDA_CHECK = """
import glob, json, os, subprocess
import onnxruntime as ort

site = os.path.dirname(os.path.dirname(ort.__file__))
lib_dirs = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
provider = os.path.join(os.path.dirname(ort.__file__), "capi", "libonnxruntime_providers_cuda.so")
env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(lib_dirs))
missing = {}
for lib in [provider, *sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "*.so*")))]:
    ldd = subprocess.run(["ldd", lib], env=env, capture_output=True, text=True, check=True).stdout
    absent = [line.split()[0] for line in ldd.splitlines() if "not found" in line]
    missing[os.path.basename(lib)] = sorted(absent)
available = ort.get_available_providers()
ort.preload_dlls(directory="")
with open("/proc/self/maps") as maps:
    loaded = sorted({os.path.basename(line.split()[-1]) for line in maps if "/nvidia/" in line})
print(json.dumps({"lib_dirs": lib_dirs, "missing": missing, "available": available, "loaded": loaded}))
"""


def test_cuda_provider_libraries_are_all_present(container: Container) -> None:
    """Everything the CUDA provider links is in the image but the driver's libcuda.so.1, which the NVIDIA
    Container Toolkit mounts on a GPU host; preload_dlls() finds NVIDIA's wheels."""
    result = _exec(container, "python", "-c", CUDA_CHECK)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    assert len(found["lib_dirs"]) >= 2  # nvidia/cu13/lib (CUDA runtime, cuBLAS, ...) and nvidia/cudnn/lib
    assert found["missing"].pop("libonnxruntime_providers_cuda.so") == ["libcuda.so.1"]
    assert {lib: libs for lib, libs in found["missing"].items() if set(libs) - {"libcuda.so.1"}} == {}
    assert "libcudnn_ops.so.9" in found["missing"] and "libcublasLt.so.13" in found["missing"]
    assert "CUDAExecutionProvider" in found["available"]
    for lib in ("libcudnn.so.9", "libcublas.so.13", "libcublasLt.so.13", "libcudart.so.13"):
        assert lib in found["loaded"], found["loaded"]


def test_sigterm_lets_in_flight_requests_finish_then_exits_0(container: Container) -> None:
    """`podman stop` (SIGTERM) while a request is in flight: it is answered, then the container exits 0
    well within the service's grace period. Last in the module: it stops the shared container."""
    body = REQUEST.read_bytes()
    half = len(body) // 2
    connection = http.client.HTTPConnection("127.0.0.1", container.port, timeout=30)
    try:
        connection.putrequest("POST", FORECAST_PATH)
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders()
        connection.send(body[:half])  # the request is now in flight: headers read, body half-sent
        time.sleep(0.5)  # let the server read the headers before the signal
        start = time.monotonic()
        stop = subprocess.Popen(
            ["podman", "stop", "-t", str(STOP_TIMEOUT_S), container.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 10
            while "Shutting down" not in _logs(container.name):
                assert time.monotonic() < deadline, "no graceful shutdown within 10 s of SIGTERM"
                time.sleep(0.1)
            connection.send(body[half:])
            response = connection.getresponse()
            answer = response.read()
            stop_out, stop_err = stop.communicate(timeout=STOP_TIMEOUT_S + 15)
        finally:
            if stop.poll() is None:
                stop.kill()
                stop.wait(timeout=10)
        stopped_s = time.monotonic() - start
    finally:
        connection.close()
    assert response.status == 200, answer
    assert json.loads(answer)["forecasts"][0]["id"] == "etth1-test-end"
    assert stop.returncode == 0, stop_out + stop_err
    assert stopped_s < GRACEFUL_SHUTDOWN_S / 2  # the request was answered, nothing waited out a timeout
    state = _podman("inspect", "--format", "{{.State.ExitCode}} {{.State.Status}}", container.name)
    assert state.stdout.split() == ["0", "exited"], _logs(container.name)
