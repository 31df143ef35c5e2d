"""/v1 attention of a global hybrid (issue 48): the JSON answer's and the PNG's time and size, and the
figure written for docs/images:

    .venv/bin/python -m bench.global_attention [--out docs/images/attention-global-hybrid.png] [--repeats 5]

The hybrid the panel tests train (tests/utils/panel.py `publish(local=True)`: 60 M3 monthly series, the
CLI's defaults), served in-process (the test client, one ONNX Runtime thread), asked about a series it
never saw (`unseen()["store_new"]`). Prints the mean milliseconds over `repeats` calls and the bytes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the PNG (quantised)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from tests.app.conftest import make_settings, running_client
    from tests.utils.panel import NAME, publish, unseen

    with tempfile.TemporaryDirectory() as folder:
        repo, model = publish(Path(folder), local=True)
        start, values = unseen()["store_new"]
        body = {"series": {"id": "store_new", "start": start, "values": values.tolist()}}
        with running_client(make_settings(repo, models=[NAME])) as client:
            url = f"/v1/models/{NAME}/attention"
            client.post(url, json=body)  # the graph's constants read once
            t = time.perf_counter()
            for _ in range(args.repeats):
                r = client.post(url, json=body)
            json_ms = (time.perf_counter() - t) / args.repeats * 1000
            t = time.perf_counter()
            png = client.post(url, json={**body, "format": "png"})
            png_ms = (time.perf_counter() - t) * 1000
    assert r.status_code == 200 and png.status_code == 200, (r.text, png.text)
    members = [(m["name"], round(m["weight"], 3)) for m in r.json()["hybrid"]["members"]]
    print(f"hybrid L = {model.input_length}, local window {model.window_length}, H = {model.config.horizon}")
    print(f"members {members}")
    print(f"json: {json_ms:.1f} ms, {len(r.content)} bytes; png: {png_ms:.0f} ms, {len(png.content)} bytes")
    if args.out is not None:
        import io

        from PIL import Image

        image = Image.open(io.BytesIO(png.content)).convert("RGB")
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(args.out, optimize=True)


if __name__ == "__main__":
    main()
