"""The benchmark harness: what every benchmark in bench/ is built from.

- `servers`: a service or peer process on loopback, started, polled until ready, stopped;
- `workloads`: request bodies of real windows, built once, with reference forecasts;
- `load`: the HTTP load generator; `checks`: every answer compared with ONNX Runtime's;
- `measure`: CPU accounting, interleaved in-process timing, one loaded cell;
- `report`: the one table helper, targets judged by code, JSON;
- `cli`: the flags every benchmark shares (`--smoke`, `--device`, integer lists);
- `models`: shipped architectures, untrained checkpoints, test feeds and sessions for in-process benches.

A benchmark module declares its servers, cells and targets, and keeps its own CLI.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
