# The forecasting service: ONNX Runtime (CUDA, falling back to CPU) + FastAPI, no PyTorch.
#
#   docker build -t rsa .
#   docker run --rm -p 8000:8000 --read-only --tmpfs /tmp --stop-timeout 30 rsa
#   docker run ... --gpus all rsa                          # GPU host: driver R580+ and the NVIDIA Container Toolkit
#   docker run ... -v "$PWD/model_repository:/models:ro" rsa   # other models, mounted read-only
#
# The GPU runtime comes from PyPI, not from an nvidia/cuda base image: onnxruntime-gpu's `cuda` and
# `cudnn` extras plus nvidia-cublas (requirements/gpu.txt) carry CUDA 13 and cuDNN 9 as wheels, which
# the service loads with onnxruntime.preload_dlls() at start-up. That works on any Python base image
# (the nvidia/cuda runtime images are Ubuntu 24.04 with Python 3.12, the project pins 3.11), pins the
# CUDA libraries in the same constraints file as everything else, and can be checked without a GPU:
# tests/deploy/test_image.py resolves every library the CUDA provider links, all but the driver's
# libcuda.so.1, which the NVIDIA Container Toolkit mounts at run time.
#
# BASE_IMAGE: any Debian-like image whose `python3` is 3.11. The tests build from a local debootstrap
# of Debian bookworm (scripts/base-image.sh), whose python3 is /usr/bin/python3 where the official
# image has /usr/local/bin/python3; the venv below hides that difference.
#
# One stage: every requirement is a wheel, so a builder stage would leave nothing behind (measured: the
# same 3.02 GB either way) while copying the 2.7 GB venv between stages doubled the cold build time.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE}

# uid 1000 without a home or a shell: the service writes nothing but /tmp.
RUN groupadd --gid 1000 rsa \
    && useradd --uid 1000 --gid rsa --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin rsa

# PYTHONDONTWRITEBYTECODE: the root filesystem may be read-only; every .pyc is made at build time.
# MPLCONFIGDIR: matplotlib (attention heatmaps) keeps its font cache there; /tmp is a tmpfs.
# PYTHONPATH: `python -m app` finds the code whatever the working directory.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/srv/rsa \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib \
    RSA_HOST=0.0.0.0 \
    RSA_PORT=8000 \
    RSA_GRPC_PORT=8001 \
    RSA_MODEL_REPOSITORY=/models

# Only the requirement files, so that the pip layer (~1.5 GB of wheels) is rebuilt only when a
# requirement or pin changes, never for a change of the code or the models.
COPY requirements/serve.txt requirements/gpu.txt requirements/constraints.txt /srv/rsa/requirements/
# The same files the tests install from (serve.txt, -c constraints.txt) plus the GPU runtime. pip
# compiles every module it installs. pip and setuptools leave: nothing installs at run time. The plain
# `onnxruntime` wheel would shadow onnxruntime-gpu's CUDA provider: fail the build if it came in.
# Behind a TLS-inspecting proxy (the test machines), mount the host's CA bundle over
# /etc/ssl/certs/ca-certificates.crt for the build (`podman build -v`): Debian's pip reads that bundle,
# and a mount leaves nothing in the image.
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir --disable-pip-version-check \
        -r /srv/rsa/requirements/serve.txt -r /srv/rsa/requirements/gpu.txt \
        -c /srv/rsa/requirements/constraints.txt \
    && pip uninstall --yes --disable-pip-version-check pip setuptools \
    && if python -c "import importlib.metadata as m; m.version('onnxruntime')" 2>/dev/null; \
       then echo "plain onnxruntime installed next to onnxruntime-gpu" >&2; exit 1; fi

# Models, then code: the layers that change most are last, so an app change rebuilds in seconds.
# Root owns both (read-only for the service); a read-only mount over /models replaces the models.
COPY model_repository/ /models/
# rsa_core: the rules the service shares with the exporter, batch scorer and client (numpy and the standard
# library; its pandas module, rsa_core.wallclock, is never imported by the service). On PYTHONPATH, as app/.
COPY rsa_core/ /srv/rsa/rsa_core/
COPY app/ /srv/rsa/app/
RUN python -m compileall -q /srv/rsa/rsa_core /srv/rsa/app

# NVML (the GPU memory metrics) numbers devices in PCI bus order; CUDA's default order is fastest-first.
# PCI order for both, so that RSA_CUDA_DEVICE_ID and the metrics' `device` label name the same GPU.
# (Set after the pip layer, so changing it does not rebuild that layer.)
# glibc's malloc asks for transparent huge pages (THP in "madvise" mode, common on hosts): ONNX Runtime's
# CPU arena grows in 2 MiB pages instead of 4 KiB ones, also after each idle release
# (app/inference/session.py); 0.79-0.87x the latency at 1-256 rows (bench/memory.py, default vs
# default+thp, measured on the development host).
# The driver capabilities the NVIDIA Container Toolkit mounts: compute (CUDA) and utility (NVML, the GPU
# memory metrics). `--gpus all` and compose's `capabilities: [gpu]` inject them already; runtimes that
# read only the image's environment (the Kubernetes device plugin's) need them here, as NVIDIA's CUDA
# images set them. Which GPUs are visible is the runtime's to say (NVIDIA_VISIBLE_DEVICES is not set).
ENV CUDA_DEVICE_ORDER=PCI_BUS_ID \
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

USER 1000:1000
WORKDIR /srv/rsa
# 8000: HTTP (/v1, OIP v2 REST, KServe time series, probes, metrics); 8001: OIP v2 gRPC.
EXPOSE 8000 8001

# Ready, not just alive: 200 only once every model is loaded and warmed up. Python's urllib, so no
# curl in the image; 127.0.0.1 reaches the service whether RSA_HOST is 0.0.0.0 or the loopback.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('RSA_PORT', '8000'), timeout=4)"]

# python is PID 1 and handles SIGTERM itself: no new connections, in-flight requests get
# RSA_GRACEFUL_SHUTDOWN_S (20 s) to finish, then exit 0. Give the container longer than that to stop
# (docker's default is 10 s: --stop-timeout 30, compose stop_grace_period: 30s).
STOPSIGNAL SIGTERM
CMD ["python", "-m", "app"]
