"""Bad input gives a clear exception: models Loom cannot import (naming the
node), missing files, wrong dtypes and shapes, corrupt artifacts."""

import copy
import json
import os

import numpy as np
import pytest

import loom
from conftest import DIGITS, MLP_JSON, MLP_ONNX


def test_a_bad_json_node_is_named_in_the_compile_error():
    with open(MLP_JSON) as f:
        graph = json.load(f)
    bad = copy.deepcopy(graph)
    bad["nodes"][2] = {"id": "my_broken_relu", "op": "frobnicate",
                       "inputs": ["fc1.add"]}
    with pytest.raises(loom.CompileError) as info:
        loom.compile(bad, train=False)
    message = str(info.value)
    assert "my_broken_relu" in message
    assert "frobnicate" in message
    assert info.value.diagnostics and info.value.exit_code == 1


def test_an_onnx_node_loom_cannot_import_is_named(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    node = helper.make_node("Frobnicate", ["x"], ["y"], name="/block/Frob")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                    [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(loom.CompileError) as info:
        loom.compile(model, tmp_path / "frob.loom", train=False)
    assert "/block/Frob" in str(info.value)


def test_missing_files():
    with pytest.raises(FileNotFoundError, match="no-such-model.onnx"):
        loom.compile("/nonexistent/no-such-model.onnx")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        loom.Artifact("/nonexistent/model.loom")
    with pytest.raises(ValueError, match="cannot tell the format"):
        loom.compile(os.path.join(os.path.dirname(MLP_ONNX), "README.md"))
    with pytest.raises(TypeError, match="cannot compile a builtins.int"):
        loom.compile(42)


def test_wrong_inputs_to_run(digits):
    x = np.zeros((32, 64), np.float32)
    with pytest.raises(TypeError) as info:
        digits.run("predict", x=x.astype(np.float64))
    assert str(info.value) == ("loom: input 'x' of entry 'predict' is "
                               "f64 [32, 64], expected f32 [32, 64]")
    with pytest.raises(ValueError, match=r"shape \[16, 64\], expected "
                                         r"f32 \[32, 64\]"):
        digits.run("predict", x=x[:16])
    with pytest.raises(ValueError, match="has no input 'y'"):
        digits.run("predict", x=x, y=x)
    with pytest.raises(ValueError, match="needs input 'x'"):
        digits.run("predict")
    with pytest.raises(loom.RunError, match="no entry 'nope'"):
        digits.run("nope")
    # A non-contiguous view is accepted (copied): the same numbers.
    wide = np.zeros((32, 128), np.float32)
    wide[:, ::2] = 1.0
    np.testing.assert_array_equal(
        digits.run(x=wide[:, ::2])["logits"],
        digits.run(x=np.ones((32, 64), np.float32))["logits"])


def test_wrong_training_data(digits, data):
    with pytest.raises(TypeError, match="labels' is i32"):
        digits.train({"x": data["x"], "labels": data["labels"].astype(np.int32)},
                     steps=1)
    with pytest.raises(ValueError, match=r"'x' has shape \[640, 63\]"):
        digits.train({"x": data["x"][:, :63], "labels": data["labels"]},
                     steps=1)
    with pytest.raises(loom.RunError, match="no array 'labels'") as info:
        digits.train({"x": data["x"]}, steps=1)
    assert info.value.status == "LOOMRT_ERROR_FORMAT"
    with pytest.raises(loom.RunError, match="'x' has 640 samples but "
                                            "'labels' has 10|'labels' has 10 "
                                            "samples but 'x' has 640"):
        digits.train({"x": data["x"], "labels": data["labels"][:10]}, steps=1)
    with pytest.raises(FileNotFoundError):
        digits.train("/nonexistent/data.npz", steps=1)
    assert digits.step == 0  # nothing trained


def test_wrong_parameters(digits):
    p = digits.parameters()
    with pytest.raises(ValueError, match=r"'fc1.weight' has shape \[64, 128\]"):
        digits.load_parameters({"fc1.weight": p["fc1.weight"].T.copy()})
    with pytest.raises(TypeError, match="'fc1.bias' is f64"):
        digits.load_parameters({"fc1.bias": p["fc1.bias"].astype(np.float64)})
    with pytest.raises(KeyError, match="'fc9.weight' is not a parameter"):
        digits.load_parameters({"fc9.weight": p["fc1.weight"]})


def test_a_corrupt_artifact_is_refused(tmp_path):
    art = loom.compile(MLP_ONNX, tmp_path / "m.loom", train=False)
    del art
    plan = tmp_path / "m.loom" / "plan.json"
    plan.write_text(plan.read_text()[:200])
    with pytest.raises(loom.RunError) as info:
        loom.Artifact(tmp_path / "m.loom")
    assert info.value.status == "LOOMRT_ERROR_FORMAT"
    assert "plan.json" in str(info.value)


def test_training_an_inference_artifact_says_so(tmp_path):
    art = loom.compile(DIGITS, tmp_path / "p.loom", train=False)
    with pytest.raises(loom.RunError, match="compile with train=True"):
        art.train({"x": np.zeros((32, 64), np.float32)}, steps=1)
