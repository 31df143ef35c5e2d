"""The committed gRPC stubs are what grpcio-tools generates from the vendored proto today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
FOLDER = "app/protocols/oip_v2"
GENERATED = ("grpc_predict_v2_pb2.py", "grpc_predict_v2_pb2.pyi", "grpc_predict_v2_pb2_grpc.py")


def test_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    target = tmp_path / FOLDER
    target.mkdir(parents=True)
    (target / "grpc_predict_v2.proto").write_bytes((ROOT / FOLDER / "grpc_predict_v2.proto").read_bytes())
    argv = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        "-I",
        ".",
        "--python_out=.",
        "--grpc_python_out=.",
        "--pyi_out=.",
    ]
    proc = subprocess.run(
        [*argv, f"{FOLDER}/grpc_predict_v2.proto"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for name in GENERATED:
        assert (target / name).read_text() == (ROOT / FOLDER / name).read_text(), (
            f"regenerate {FOLDER}/{name}"
        )
