"""The naive FastAPI server, as a typical tutorial writes it: a `dict` body, `np.array(...)`, one
ONNX Runtime call, and an answer of `tolist()` lists that FastAPI serialises.

The endpoint is a plain `def`, as FastAPI's documentation advises for blocking work: FastAPI runs it in
its thread pool, so concurrent requests call the session from several threads at once. Session:
bench/peers/common.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import uvicorn
from fastapi import FastAPI

from bench.peers.common import HOST, create_session, load_manifest, parse_args


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    model = load_manifest(args.model_dir)
    session = create_session(model, args.device)
    app = FastAPI()

    @app.post(model.forecast_path)
    def forecast(body: dict) -> dict[str, Any]:
        x = np.array([s["values"] for s in body["series"]], dtype=np.float32)
        y = session.run(None, {"window": x})[0]
        h = body.get("horizon") or model.horizon
        return {
            "model": model.name,
            "version": model.version,
            "provider": session.get_providers()[0],
            "forecasts": [
                {
                    "id": s.get("id"),
                    "forecast": y[i, :h].tolist(),
                    "channels": model.channels,
                    "timestamps": None,
                }
                for i, s in enumerate(body["series"])
            ],
        }

    @app.get("/readyz")
    def readyz() -> dict[str, bool]:
        return {"ready": True}

    uvicorn.run(app, host=HOST, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
