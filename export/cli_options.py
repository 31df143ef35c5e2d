"""Command-line options the exporters share (typer `Annotated` aliases): where a new model version goes.

`python -m export.onnx` (a checkpoint) and `python -m export.panel export` (a global model) publish into
the same repository by the same rule (export/publish.py), so they declare its options once, here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# The folder of the model repository; `Path("my_models")` is every exporter's default.
RepositoryOption = Annotated[
    Path,
    typer.Option(
        help="the model repository the service reads (default: my_models, ignored by git, outside the "
        "tracked model_repository/; served by `RSA_MODEL_REPOSITORY=my_models bash scripts/serve.sh`, "
        "which polls it: a running one serves a new version without a restart)",
        envvar="RSA_MODEL_REPOSITORY",
    ),
]
ModelNameOption = Annotated[str, typer.Option(help="the model's name in the repository")]
