"""manifest.json parsing and contract checks."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from app.artifacts.manifest import ManifestError, load_manifest, parse_manifest


@pytest.fixture
def raw(toy_repository: Path) -> dict[str, Any]:
    return json.loads((toy_repository / "toy" / "1" / "manifest.json").read_text())


def test_parses_the_fake_manifest(raw: dict[str, Any]) -> None:
    m = parse_manifest(raw)
    assert (m.name, m.version, m.input_length, m.horizon, m.n_channels) == ("toy", 1, 8, 4, 3)
    assert m.kind == "rsa_transformer" and m.description
    head = m.head(0, 0)
    assert head is not None and head.lambda_ == 0.7
    assert m.head(0, 5) is None and m.layer(3) is None


def test_attention_bytes_per_row(raw: dict[str, Any]) -> None:
    # The toy's attn_softmax: [batch, C=3, N=1, Hh=2, L=8, L=8] float32.
    assert parse_manifest(raw).attention_bytes_per_row == 3 * 1 * 2 * 8 * 8 * 4
    last_step = copy.deepcopy(raw)
    last_step["inspect_outputs"][1]["shape"] = ["batch", 3, 1, 2, 8]
    last_step["inspect_outputs"][2]["shape"] = [1, 2, 8]
    last_step["inspect_outputs"][3]["shape"] = ["batch", 3, 1, 2, 8]
    assert parse_manifest(last_step).attention_bytes_per_row == 3 * 1 * 2 * 8 * 4
    assert parse_manifest({**raw, "inspect_outputs": []}).attention_bytes_per_row is None


def test_optional_sections_may_be_null(raw: dict[str, Any]) -> None:
    raw.update(metrics=None, dataset=None, verification=None, architecture=None)
    raw["source_checkpoint"] = {"file": "x"}  # unknown sections are ignored
    del raw["created"], raw["frequency"], raw["opset"], raw["kind"], raw["description"]
    m = parse_manifest(raw)
    assert m.metrics is None and m.created is None
    assert m.kind is None and m.description is None  # written before manifests said what a model is


def test_intervals_state_which_channels_are_never_negative(raw: dict[str, Any]) -> None:
    """One flag per channel (the service clips those channels' bounds at 0); absent in older exports."""
    channels, horizon = len(raw["channels"]), raw["horizon"]
    block = {
        "method": "split_conformal",
        "residuals": "absolute",
        "scale": "none",
        "levels": [80.0],
        "widths": [[[1.0] * channels for _ in range(horizon)]],
    }
    flags = [True] + [False] * (channels - 1)
    m = parse_manifest({**raw, "intervals": {**block, "nonnegative": flags}})
    assert m.intervals is not None and m.intervals.nonnegative == tuple(flags)
    older = parse_manifest({**raw, "intervals": block})
    assert older.intervals is not None and older.intervals.nonnegative is None
    with pytest.raises(ManifestError, match=rf"intervals.nonnegative has 1 flags for {channels} channels"):
        parse_manifest({**raw, "intervals": {**block, "nonnegative": [True]}})


def test_docs_example_manifest_parses() -> None:
    """The example in docs/artifacts.md (with its "…" placeholders filled in) is accepted."""
    doc = Path(__file__).parents[3] / "docs" / "artifacts.md"
    if not doc.is_file():
        pytest.skip("docs/artifacts.md is not in this checkout")
    text = doc.read_text()
    example = text.split("```json", 1)[1].split("```", 1)[0].replace('"…"', '"' + "a" * 64 + '"')
    m = parse_manifest(json.loads(example))
    assert (m.name, m.input_length, m.channels[-1], m.layers[0].heads[1].kind) == (
        "etth1-rsa",
        96,
        "OT",
        "cyclic_cos",
    )
    assert m.cycle is None
    # The cycle example: the same manifest with its `cycle` and `inputs` replaced.
    fragment = next(b for b in text.split("```json")[2:] if '"phase"' in b).split("```", 1)[0]
    m = parse_manifest({**json.loads(example), **json.loads(fragment)})
    assert m.cycle is not None and (m.cycle.period, m.cycle.step_seconds) == (24, 3600)
    assert [t.name for t in m.inputs] == ["window", "phase"]


def _broken(raw: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(raw)
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["input_length"], KeyError, "input_length"),
        (["horizon"], 0, "horizon"),
        (["channels"], ["a", "a", "b"], "unique"),
        (["frequency_seconds"], -1, "frequency_seconds"),
        (["inputs", 0, "shape"], ["batch", 9, 3], "does not match"),
        (["inputs", 0, "name"], "x", "no tensor named 'window'"),
        (["outputs", 0, "shape"], [1, 4, 3], "dynamic batch"),
        (["outputs", 0, "dtype"], "float64", "float32"),
        (["layers", 0, "heads", 0, "kind"], "quantum", "kind"),
        (["layers", 0, "heads", 0, "gate"], 1.5, "gate"),
        (["files", "inspect.onnx"], KeyError, "inspect.onnx"),
        (["files", "model.onnx", "sha256"], "xyz", "sha256"),
        (["inspect_outputs", 2, "name"], "attn_other", "attn_rem"),
    ],
)
def test_contract_violations_are_named(
    raw: dict[str, Any], path: list[Any], value: Any, message: str
) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_manifest(_broken(raw, path, value))


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="missing"):
        load_manifest(tmp_path / "manifest.json")
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not readable JSON"):
        load_manifest(tmp_path / "manifest.json")


# -- the seasonal cycle ----------------------------------------------------------------------------


@pytest.fixture
def cyclic(cycle_repository: Path) -> dict[str, Any]:
    return json.loads((cycle_repository / "hourly" / "1" / "manifest.json").read_text())


def test_cycle_absent_or_null_means_window_only(raw: dict[str, Any]) -> None:
    assert "cycle" not in raw  # as every manifest written before the cycle existed
    assert parse_manifest(raw).cycle is None
    assert parse_manifest({**raw, "cycle": None}).cycle is None


def test_cycle_manifest_parses(cyclic: dict[str, Any]) -> None:
    m = parse_manifest(cyclic)
    assert m.cycle is not None and (m.cycle.period, m.cycle.step_seconds) == (24, 3600.0)
    assert [(t.name, t.dtype, t.shape) for t in m.inputs][1] == ("phase", "int64", ("batch",))
    float_step = parse_manifest(_broken(cyclic, ["cycle", "step_seconds"], 3600.0))
    assert float_step.cycle is not None and float_step.cycle.step_seconds == 3600.0


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["cycle", "period"], 1, "period"),
        (["cycle", "period"], 0, "period"),
        (["cycle", "period"], 2.5, "period"),
        (["cycle", "period"], "24", "period"),
        (["cycle", "period"], KeyError, "period"),
        (["cycle", "step_seconds"], 0, "step_seconds"),
        (["cycle", "step_seconds"], -3600, "step_seconds"),
        (["cycle", "step_seconds"], float("inf"), "step_seconds"),
        (["cycle", "step_seconds"], KeyError, "step_seconds"),
        (["cycle", "step_seconds"], 1800, "differs from frequency_seconds"),
        (["frequency_seconds"], float("inf"), "differs from frequency_seconds"),
        (["cycle"], "daily", "cycle"),
        (["inputs", 1, "dtype"], "float32", "int64"),
        (["inputs", 1, "shape"], ["batch", 1], r"must be \['batch'\]"),
        (["inputs", 1, "shape"], [4], r"must be \['batch'\]"),
        (["inputs", 1, "name"], "hour", r"must be \['window', 'phase'\]"),
        (["inputs", 1], KeyError, r"inputs are \['window'\] but cycle has period 24"),
        (["cycle"], None, r"cycle is null, so they must be \['window'\]"),
        (["cycle"], KeyError, "cycle is null"),
    ],
)
def test_cycle_violations_are_named(
    cyclic: dict[str, Any], path: list[Any], value: Any, message: str
) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_manifest(_broken(cyclic, path, value))


def test_phase_must_follow_window(cyclic: dict[str, Any]) -> None:
    swapped = {**cyclic, "inputs": cyclic["inputs"][::-1]}
    with pytest.raises(ManifestError, match=r"inputs are \['phase', 'window'\]"):
        parse_manifest(swapped)


def test_cycle_step_below_a_microsecond(cyclic: dict[str, Any]) -> None:
    tiny = {**cyclic, "frequency_seconds": 1e-9, "cycle": {"period": 24, "step_seconds": 1e-9}}
    with pytest.raises(ManifestError, match="below one microsecond"):
        parse_manifest(tiny)


def test_phase_input_without_cycle(raw: dict[str, Any]) -> None:
    raw["inputs"].append({"name": "phase", "dtype": "int64", "shape": ["batch"]})
    with pytest.raises(ManifestError, match="cycle is null"):
        parse_manifest(raw)


@pytest.mark.parametrize(
    ("rows", "floor", "message"),
    [(8, [1.0, 1.0], "3 floors"), (9, [1.0, 1.0, 1.0], "rows <= 8"), (8, [1.0, 1.0, 1.0], None)],
)
def test_window_scaled_intervals_fit_the_model(raw: dict[str, Any], rows: int, floor: list, message) -> None:
    """One floor per channel, and no more rows than the window the model reads (L = 8, C = 3)."""
    raw["intervals"] = {
        "method": "split_conformal",
        "residuals": "absolute",
        "scale": "window",
        "window_scale": {"statistic": "std", "rows": rows, "floor": floor},
        "levels": [90.0],
        "widths": [[[1.0, 1.0, 1.0]] * 4],
    }
    if message is None:
        assert parse_manifest(raw).intervals.window_scale.rows == 8
        return
    with pytest.raises(ManifestError, match=message):
        parse_manifest(raw)
