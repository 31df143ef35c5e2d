"""The HTTP + JSON floor: the request's JSON parsed (orjson) and a fixed answer, no model.

What the minimal server costs without numpy and ONNX Runtime: Starlette, uvicorn, orjson.loads and a
response. The answer is built once at start: one series of `horizon` rows of float32 numbers, about the
size of a real one-series answer; it is not a forecast, and the benchmark does not check its numbers.
"""

from __future__ import annotations

import numpy as np
import orjson
from starlette.requests import Request
from starlette.responses import Response

from bench.peers.common import load_manifest, parse_args
from bench.peers.starlette_app import serve


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    model = load_manifest(args.model_dir)
    values = np.linspace(-5, 25, model.horizon * len(model.channels), dtype=np.float32)
    fixed = orjson.dumps(
        {
            "model": model.name,
            "version": model.version,
            "provider": "none",
            "forecasts": [
                {
                    "id": "fixed",
                    "forecast": values.reshape(model.horizon, -1),
                    "channels": model.channels,
                    "timestamps": None,
                }
            ],
        },
        option=orjson.OPT_SERIALIZE_NUMPY,
    )

    async def forecast(request: Request) -> Response:
        orjson.loads(await request.body())
        return Response(fixed, media_type="application/json")

    serve(model.forecast_path, forecast, args.port)


if __name__ == "__main__":
    main()
