"""Peer servers for bench/serving.py: the yardsticks the service is measured against.

Each is a small, self-contained module, runnable as

    .venv/bin/python -m bench.peers.<name> --port N --model-dir model_repository/etth1-rsa/1 [--device cuda]

listening on 127.0.0.1 only, answering `POST /v1/models/{name}/versions/{version}/forecast` (name and
version from the model directory's manifest) with the `/v1` answer shape, and `GET /readyz` with 200
once its session is loaded. They read the rows layout of `/v1` requests (`values` as L rows of C
channel values), which is what the benchmark sends; they are not a second implementation of the API.

- `minimal`: Starlette + orjson, one ONNX Runtime call per request, no batching.
- `floor`: the same JSON parsed and a fixed answer, no model: the HTTP + JSON floor.
- `naive_fastapi`: what a typical FastAPI tutorial writes: `dict` body, `np.array`, `tolist()` answer.
- `litserve_server`: LitServe with batching on (needs the LitServe packages; see bench/serving.py).
"""
