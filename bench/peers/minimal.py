"""The minimal server: Starlette + orjson + one ONNX Runtime call per request, no batching.

The session runs on the event loop: with one model and nothing else to serve, a thread hop would only
add latency, and requests queue in the kernel meanwhile. Session: bench/peers/common.py. The answer's
numbers are orjson's float32 shortest form (OPT_SERIALIZE_NUMPY), checked like any other.
"""

from __future__ import annotations

import numpy as np
import orjson
from starlette.requests import Request
from starlette.responses import Response

from bench.peers.common import create_session, load_manifest, parse_args
from bench.peers.starlette_app import serve


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    model = load_manifest(args.model_dir)
    session = create_session(model, args.device)
    provider = session.get_providers()[0]
    shape = (model.input_length, len(model.channels))

    async def forecast(request: Request) -> Response:
        body = orjson.loads(await request.body())
        series = body["series"]
        x = np.array([s["values"] for s in series], dtype=np.float32)
        if x.shape[1:] != shape:
            return Response(b'{"error": "values must be L rows of C channels"}', 422)
        (y,) = session.run(["forecast"], {"window": x})
        h = body.get("horizon") or model.horizon
        forecasts = [
            {"id": s.get("id"), "forecast": y[k, :h], "channels": model.channels, "timestamps": None}
            for k, s in enumerate(series)
        ]
        answer = {"model": model.name, "version": model.version, "provider": provider, "forecasts": forecasts}
        body_out = orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
        return Response(body_out, media_type="application/json")

    serve(model.forecast_path, forecast, args.port)


if __name__ == "__main__":
    main()
