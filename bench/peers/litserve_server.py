"""LitServe with batching on: LitServe's own server, its decode/predict/encode hooks calling ONNX Runtime.

    PYTHONPATH=.venv/litserve .venv/bin/python -m bench.peers.litserve_server --port N \\
        --model-dir model_repository/etth1-rsa/1

(the LitServe packages live apart from .venv: see bench/peers/requirements-litserve.txt). Stop it with
SIGINT (Ctrl+C): LitServe stops its worker processes on KeyboardInterrupt; SIGTERM would leave them.

Batching: up to 64 requests per session call, waiting at most 2 ms for them (the service's default
RSA_MAX_BATCH_WAIT_MS). LitServe's defaults otherwise, as its documentation shows them: one inference
worker process per device, one API server process, uvicorn with uvloop and httptools, answers through
LitServe's multiprocessing queues, `fast_queue` (ZMQ) off, requests timing out after 30 s. The API server
parses the JSON and FastAPI serialises the dict that `encode_response` returns; the worker runs
`decode_request` (numpy array), `predict` (one session call for the whole batch) and `encode_response`
(`tolist()` lists). The session is bench/peers/common.py's, created in the worker by `setup`.
"""

from __future__ import annotations

from typing import Any

import litserve as ls
import numpy as np

from bench.peers.common import HOST, Model, create_session, load_manifest, parse_args

MAX_BATCH_SIZE = 64  # requests, whatever their series
BATCH_TIMEOUT_S = 0.002


class ForecastAPI(ls.LitAPI):
    def __init__(self, model: Model) -> None:
        super().__init__(
            max_batch_size=MAX_BATCH_SIZE, batch_timeout=BATCH_TIMEOUT_S, api_path=model.forecast_path
        )
        self.model = model

    def setup(self, device: str) -> None:
        # LitServe names the device "cpu" or "cuda:<index>".
        self.session = create_session(self.model, "cuda" if device.startswith("cuda") else "cpu")
        self.provider = self.session.get_providers()[0]

    # LitServe takes these two hooks' annotations for the endpoint's request and response types: left
    # out, the request is `await request.json()` and the dict answer goes to FastAPI's JSON response.
    def decode_request(self, request):
        series = request["series"]
        return {
            "ids": [s.get("id") for s in series],
            "horizon": request.get("horizon") or self.model.horizon,
            "x": np.array([s["values"] for s in series], dtype=np.float32),
        }

    def predict(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        (y,) = self.session.run(["forecast"], {"window": np.concatenate([i["x"] for i in inputs])})
        ends = np.cumsum([len(i["ids"]) for i in inputs])[:-1]
        return [i | {"y": part} for i, part in zip(inputs, np.split(y, ends), strict=True)]

    def encode_response(self, output):
        h = output["horizon"]
        return {
            "model": self.model.name,
            "version": self.model.version,
            "provider": self.provider,
            "forecasts": [
                {"id": sid, "forecast": y[:h].tolist(), "channels": self.model.channels, "timestamps": None}
                for sid, y in zip(output["ids"], output["y"], strict=True)
            ],
        }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    server = ls.LitServer(
        ForecastAPI(load_manifest(args.model_dir)),
        accelerator=args.device,
        devices=1,
        healthcheck_path="/readyz",  # 200 once every worker has run `setup`
    )
    server.run(host=HOST, port=args.port, log_level="warning", generate_client_file=False)


if __name__ == "__main__":
    main()
