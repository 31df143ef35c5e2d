"""What the client knows of a served model (`ModelSpec`, `ModelLimits`: /v1/models/{name} and the OIP v2
metadata's limits) and the repository API (`index`, `load`, `unload`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rsa_client.transport import _json, _reading, _Session, _unreadable

# What a request holds besides its tensors (the JSON header), with room to spare.
_HEADER_ALLOWANCE = 16 * 1024
# The service's defaults (app/core/config.py), for a server whose metadata does not say its limits.
_DEFAULT_MAX_SERIES = 1024
_DEFAULT_MAX_BODY = 64 * 1024 * 1024
_DEFAULT_MAX_EVALUATIONS = 2


@dataclass(frozen=True)
class ModelLimits:
    max_series_per_request: int
    max_body_bytes: int
    # A model's backtests and anomaly checks waiting or running at once (RSA_MAX_EVALUATIONS_IN_FLIGHT): a
    # long series' pieces sent more at once than this were refused 503 by the service while the first
    # ran, and after the retries the call failed (one 67,849-value series, 2026-12-07).
    max_evaluations_in_flight: int = _DEFAULT_MAX_EVALUATIONS

    def rows_per_request(
        self,
        input_length: int,
        n_channels: int,
        with_start: bool,
        covariate_bytes: int = 0,
        with_lengths: bool = False,
    ) -> int:
        """Windows per request under both limits; `covariate_bytes`: a window's covariate tensors;
        `with_lengths`: a global model's `lengths` (8 bytes a window)."""
        per_row = input_length * n_channels * 4 + (8 if with_start else 0) + covariate_bytes
        per_row += 8 if with_lengths else 0
        fit = (self.max_body_bytes - _HEADER_ALLOWANCE) // per_row
        return max(1, min(self.max_series_per_request, fit))


@dataclass(frozen=True)
class ModelSpec:
    """One served version, as /v1/models/{name} describes it."""

    name: str
    version: int
    channels: list[str]
    input_length: int
    horizon: int
    frequency: str | None
    frequency_seconds: float | None
    has_cycle: bool
    levels: list[float]
    limits: ModelLimits
    # A covariate model's covariates as /v1/models lists them: name, kind (past, future, calendar,
    # static), dtype, categories; empty for any other model.
    covariates: tuple[dict[str, Any], ...] = ()
    timezone: str | None = None  # the model's zone: where a naive time is read (None: UTC)
    # A global model's fewest values a series may have (its `panel.min_history`); None: not global,
    # every series needs the input length.
    min_history: int | None = None

    def covariate_names(self, kind: str) -> list[str]:
        return [c["name"] for c in self.covariates if c["kind"] == kind]


class _Models(_Session):
    """A model's description and the repository API."""

    # -- models -----------------------------------------------------------------------------------
    def model(self, name: str, version: int | None = None) -> ModelSpec:
        """The version that serves `name` (the latest when `version` is None) and the server's limits."""
        response = self._send("GET", f"/v1/models/{name}")
        info = _json(response)
        with _reading(response):
            number = version if version is not None else info.get("latest_version")
            entry = next((v for v in info["versions"] if v["version"] == number), None)
        if entry is None or entry.get("state") not in (None, "ready"):
            raise ValueError(f"model {name!r} has no ready version {number}")
        with _reading(response):
            panel = entry.get("panel") or {}
            described = dict(
                channels=[str(c) for c in entry["channels"]],
                input_length=int(entry["input_length"]),
                horizon=int(entry["horizon"]),
                frequency=entry.get("frequency"),
                frequency_seconds=entry.get("frequency_seconds"),
                levels=[float(v) for v in (entry.get("intervals") or {}).get("levels", [])],
                covariates=tuple(panel.get("covariates") or ()),
                timezone=entry.get("timezone"),
                min_history=panel.get("min_history"),
            )
        metadata = self._send("GET", f"/v2/models/{name}/versions/{number}")
        meta = _json(metadata)
        with _reading(metadata):
            params = meta.get("parameters") or {}
            limits = ModelLimits(
                int(params.get("max_series_per_request", _DEFAULT_MAX_SERIES)),
                int(params.get("max_body_bytes", _DEFAULT_MAX_BODY)),
                int(params.get("max_evaluations_in_flight", _DEFAULT_MAX_EVALUATIONS)),
            )
            has_cycle = any(i["name"] == "start" or i["name"] == "phase" for i in meta["inputs"])
        return ModelSpec(name=name, version=int(number), has_cycle=has_cycle, limits=limits, **described)

    def served(self) -> list[str]:
        """The names of the models ready to answer (`GET /v1/models`), in the service's order."""
        return list(self._served_steps())

    def _served_steps(self) -> dict[str, str | None]:
        """The models ready to answer, each with its latest ready version's frequency (`1MS`; None
        where the listing gives none), in the service's order."""
        response = self._send("GET", "/v1/models")
        listed = _json(response)
        models = listed.get("models") if isinstance(listed, dict) else None
        if not isinstance(models, list):
            raise _unreadable(response, "no `models` list")
        steps: dict[str, str | None] = {}
        for m in models:
            if isinstance(m, dict) and m.get("ready"):
                ready = [
                    v for v in m.get("versions") or [] if isinstance(v, dict) and v.get("state") == "ready"
                ]
                steps[str(m["name"])] = (
                    str(ready[-1]["frequency"]) if ready and ready[-1].get("frequency") else None
                )
        return steps

    def _only_model(self, model: str | None, call: str) -> str:
        """`model`, or with None the one model the service serves; ValueError naming the served models
        and their frequencies when there are several (or none): a call that names no model must not
        reach one by chance."""
        if model is not None:
            return model
        served = self._served_steps()
        if len(served) == 1:
            return next(iter(served))
        have = ", ".join(name if step is None else f"{name} ({step})" for name, step in served.items())
        raise ValueError(f"{call} needs a model: name one (model=...); the service serves {have or 'none'}")

    # -- the repository API -----------------------------------------------------------------------
    def index(self, ready_only: bool = False) -> list[dict[str, Any]]:
        """Every model version on disk or served (the service runs with RSA_MODEL_CONTROL poll or
        explicit)."""
        response = self._send("POST", "/v2/repository/index", json={"ready": ready_only})
        listed = _json(response)
        if not isinstance(listed, list):
            raise _unreadable(response, f"a JSON {type(listed).__name__}, not a list")
        return listed

    def load(self, name: str) -> None:
        """Load or reload a model (RSA_MODEL_CONTROL=explicit)."""
        self._send("POST", f"/v2/repository/models/{name}/load")

    def unload(self, name: str) -> None:
        """Unload a model (RSA_MODEL_CONTROL=explicit)."""
        self._send("POST", f"/v2/repository/models/{name}/unload")
