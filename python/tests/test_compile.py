"""loom.compile and loom.ir: each kind of model, options as loomc flags."""

import json
import os
import threading

import numpy as np
import pytest

import loom
from conftest import DIGITS, MLP_JSON, MLP_ONNX, mlp_forward


def test_compile_onnx_path_gives_a_training_artifact(digits):
    assert {"predict", "train_step", "forward", "forward_backward",
            "apply_optimizer"} <= set(digits.entries)
    data = {i.name: (i.dtype, i.shape) for i in digits.data_inputs()}
    assert data == {"x": ("f32", (32, 64)), "labels": ("i64", (32,))}
    params = digits.parameters()
    assert sorted(params) == ["fc1.bias", "fc1.weight", "fc2.bias",
                              "fc2.weight"]
    assert params["fc1.weight"].shape == (128, 64)
    assert digits.step == 0
    assert digits.source == os.path.abspath(DIGITS)


def test_predict_matches_numpy(digits, data):
    x = data["x"][:32]
    logits = digits.run("predict", x=x)["logits"]
    expected = mlp_forward(digits.parameters(), x)
    assert logits.dtype == np.float32 and logits.shape == (32, 10)
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
    # Positionally, and through predict(), the same numbers.
    np.testing.assert_array_equal(digits.predict(x)["logits"], logits)


def test_compile_model_proto_matches_its_initializers(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    model = onnx.load(MLP_ONNX)
    art = loom.compile(model, tmp_path / "mlp.loom", train=False)
    assert art.entries == ["forward"]
    # The model was written into the artifact, the source for export_onnx.
    assert art.source == str(tmp_path / "mlp.loom" / "model.onnx")
    w = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    h = np.maximum(h @ w["fc2.weight"].T + w["fc2.bias"], 0)
    expected = h @ w["fc3.weight"] + w["fc3.bias"]
    np.testing.assert_allclose(art.predict(x)["logits"], expected, rtol=1e-4,
                               atol=1e-5)


def test_compile_json_dict(tmp_path):
    with open(MLP_JSON) as f:
        graph = json.load(f)
    art = loom.compile(graph, tmp_path / "json.loom", loss="cross_entropy",
                       optimizer="sgd", lr=0.1)
    assert "train_step" in art.entries
    p = art.parameters()
    x = np.random.default_rng(2).random((32, 64), dtype=np.float32)
    h = np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0)
    h = np.maximum(h @ p["fc2.weight"].T + p["fc2.bias"], 0)
    expected = h @ p["fc3.weight"] + p["fc3.bias"]
    np.testing.assert_allclose(art.predict(x)["logits"], expected, rtol=1e-4,
                               atol=1e-5)
    # The JSON file itself compiles to the same initial parameters.
    from_path = loom.compile(MLP_JSON, tmp_path / "path.loom", train=False)
    for name, value in from_path.parameters().items():
        np.testing.assert_array_equal(value, p[name], err_msg=name)
    # Reloaded from its directory, the same artifact.
    again = loom.Artifact(tmp_path / "json.loom")
    assert again.entries == art.entries


def test_options_become_loomc_flags(tmp_path):
    # --memory-budget and --precision reach loomc: a budget too small for
    # any plan is refused, naming the flag.
    with pytest.raises(loom.CompileError) as info:
        loom.compile(DIGITS, tmp_path / "a.loom", loss="cross_entropy",
                     memory_budget="1K")
    assert "1K" in str(info.value) or "budget" in str(info.value)
    with pytest.raises(loom.CompileError) as info:
        loom.compile(DIGITS, tmp_path / "b.loom", frobnicate=3)
    assert "--frobnicate=3" in str(info.value)
    assert info.value.exit_code == 2
    with pytest.raises(ValueError, match="would end the process"):
        loom.ir(DIGITS, help=True)
    art = loom.compile(DIGITS, tmp_path / "c.loom", loss="cross_entropy",
                       precision="bf16", memory_budget="64M")
    assert "train_step" in art.entries


def test_report_is_printed_and_kept(tmp_path, capsys):
    art = loom.compile(DIGITS, tmp_path / "r.loom", loss="cross_entropy",
                       report=True)
    assert art.report.startswith("loomc report: ")
    assert "@train_step: " in art.report
    assert art.report in capsys.readouterr().out
    quiet = loom.compile(DIGITS, tmp_path / "q.loom", loss="cross_entropy")
    assert quiet.report == "" and capsys.readouterr().out == ""


def test_compiling_from_two_threads_at_once(tmp_path):
    # The driver's global state (LLVM's option parser, the captured file
    # descriptors) is taken one compilation at a time.
    results, errors = {}, []

    def work(name):
        try:
            results[name] = loom.compile(DIGITS, tmp_path / name,
                                         loss="cross_entropy").entries
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=("t%d.loom" % i,))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 3
    assert all("train_step" in e for e in results.values())


def test_the_compiler_can_run_many_times_in_one_process(tmp_path):
    # loomc's command-line options are global in LLVM; each call must start
    # from their defaults, not from the last call's values.
    a = loom.ir(MLP_ONNX, emit="autodiff", loss="cross_entropy")
    b = loom.ir(MLP_ONNX, emit="mlir")
    c = loom.ir(MLP_ONNX, emit="autodiff", loss="cross_entropy")
    assert a == c
    assert "forward_backward" in a and "forward_backward" not in b


def test_ir_returns_each_phase():
    imported = loom.ir(MLP_ONNX)
    assert "func.func @forward" in imported
    assert 'loom.param = "fc1.weight"' in imported
    optimizer = loom.ir(MLP_ONNX, emit="optimizer", loss="cross_entropy",
                        optimizer="adamw")
    assert "func.func @train_step" in optimizer
    assert 'loom.opt_state = "fc1.weight.adam_m"' in optimizer
    fused = loom.ir(MLP_ONNX, emit="fuse", train=True, loss="cross_entropy",
                    target="cpu")
    assert "loom.fusion" in fused
