"""read_initializers (issue 48): a graph's constants read from its protobuf bytes without the `onnx`
package, equal to what onnx's numpy_helper wrote, for every data type and shape the exporters use."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from app.artifacts.initializers import read_initializers, replace_initializers


def graph_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    inits = [numpy_helper.from_array(a, name) for name, a in arrays.items()]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    node = helper.make_node("Identity", ["x"], ["y"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], inits))
    return model.SerializeToString()


def test_every_type_and_shape_reads_back() -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "matrix": rng.standard_normal((5, 3)).astype(np.float32),
        "vector": rng.standard_normal(7).astype(np.float32),
        "scalar": np.asarray(2.5, np.float32),
        "shape": np.asarray([-1, 12, 1], np.int64),
        "wide": rng.standard_normal((2, 2, 2)).astype(np.float64),
        "ints": np.arange(4, dtype=np.int32),
    }
    model = graph_bytes(arrays)
    got = read_initializers(model, frozenset(arrays) | {"absent"})
    assert set(got) == set(arrays)  # a name the graph lacks is left out
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape
        np.testing.assert_array_equal(got[name], a)
    # after a replacement, the new values read back
    new = {"matrix": np.ones((5, 3), np.float32)}
    replaced = read_initializers(replace_initializers(model, new), {"matrix"})
    np.testing.assert_array_equal(replaced["matrix"], 1)


def test_an_initializer_without_raw_data_is_refused() -> None:
    tensor = helper.make_tensor("listed", TensorProto.FLOAT, [2], [1.0, 2.0])  # float_data, not raw
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y], [tensor])
    model = helper.make_model(graph).SerializeToString()
    with pytest.raises(ValueError, match="no raw data"):
        read_initializers(model, {"listed"})
    assert onnx.load_from_string(model).graph.initializer[0].name == "listed"
