"""nest.load_onnx: models made with python3-onnx's helpers, against numpy."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nest as ng


def mlp_model(w1, b1, w2, batch="batch"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, w1.shape[0]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, w2.shape[1]])
    h = helper.make_tensor_value_info("h", TensorProto.FLOAT, [batch, w1.shape[1]])
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m"]),
             helper.make_node("Add", ["m", "b1"], ["a"]),
             helper.make_node("Relu", ["a"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["y"])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
             numpy_helper.from_array(w2, "w2")]
    graph = helper.make_graph(nodes, "mlp", [x], [y, h], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_load_onnx_runs_a_model(tmp_path):
    rng = np.random.default_rng(5)
    w1, b1 = rng.standard_normal((6, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    path = tmp_path / "tiny_mlp.onnx"
    path.write_bytes(mlp_model(w1, b1, w2).SerializeToString())
    model = ng.load_onnx(str(path), dims={"batch": 4})
    assert model.name == "tiny_mlp"
    assert model.placeholders[0].name == "x" and model.placeholders[0].shape == (4, 6)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y, h = model(x)
    want_h = np.maximum(x @ w1 + b1, 0)
    np.testing.assert_allclose(h, want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y, want_h @ w2, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"x.*expected shape \(4, 6\)"):
        model(np.zeros((3, 6), np.float32))
    # from bytes, under another name; the C source and the .so as for any computation
    m2 = ng.load_onnx(mlp_model(w1, b1, w2).SerializeToString(), name="mlp", dims={"batch": 2})
    assert "int mlp(" in m2.c_source()
    np.testing.assert_allclose(m2(x[:2])[1], want_h[:2], rtol=1e-5, atol=1e-6)


def test_load_onnx_errors_carry_the_importer_message(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a model")
    with pytest.raises(ng.NestError, match="bad.onnx"):
        ng.load_onnx(str(bad))
    with pytest.raises(ng.NestError, match="missing.onnx"):
        ng.load_onnx(str(tmp_path / "missing.onnx"))
    rng = np.random.default_rng(1)
    model = mlp_model(*(rng.standard_normal(s).astype(np.float32) for s in ((6, 8), 8, (8, 3))))
    with pytest.raises(ng.NestError, match="batch"):
        ng.load_onnx(model.SerializeToString())  # the named dim is not given
