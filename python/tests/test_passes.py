"""loom.passes: pass pipelines on IR text, errors as exceptions; passes
written in Python."""

import os
import subprocess
import sys

import pytest

import loom
from conftest import MLP_ONNX, REPO


def test_a_pipeline_transforms_the_ir():
    ir = loom.ir(MLP_ONNX, emit="autodiff", loss="cross_entropy")
    assert "loom.fusion" not in ir
    fused = loom.passes.run(ir, "loom-fuse")
    assert "loom.fusion" in fused
    # The same with the anchor spelled out, and upstream passes after it.
    wrapped = loom.passes.run(ir, "builtin.module(loom-fuse,canonicalize,cse)")
    assert "loom.fusion" in wrapped
    # Output parses again: the round trip is stable.
    assert loom.passes.run(fused, "") == fused


def test_an_unknown_pass_is_a_pass_error():
    ir = loom.ir(MLP_ONNX)
    with pytest.raises(loom.PassError, match="loom-frobnicate"):
        loom.passes.run(ir, "loom-frobnicate")


def test_a_bad_pass_option_is_named_in_the_error():
    # The option parser prints to stderr, not to the diagnostic handler.
    ir = loom.ir(MLP_ONNX)
    with pytest.raises(loom.PassError) as info:
        loom.passes.run(ir, "loom-training{los=x}")
    assert "no such option los" in str(info.value)
    # Options that exist work (the training pipeline, as loomc builds it).
    out = loom.passes.run(ir, "loom-training{loss=cross_entropy optimizer=sgd}")
    assert "func.func @train_step" in out


def test_bad_ir_is_a_pass_error_with_its_location():
    with pytest.raises(loom.PassError) as info:
        loom.passes.run("func.func @f() {\n  %0 = loom.nope : i32\n}\n",
                        "canonicalize")
    assert "<ir>:2:" in str(info.value)
    with pytest.raises(TypeError):
        loom.passes.run(b"bytes", "canonicalize")


def test_a_failing_pass_reports_its_diagnostic():
    # loom-autodiff on a module without @forward fails with a diagnostic.
    with pytest.raises(loom.PassError) as info:
        loom.passes.run("module {}\n", "loom-autodiff")
    assert "error" in str(info.value)


# Passes written in Python: loom.passes.parse and the Module, Operation and
# Value classes.

IDENTITIES = """
func.func @forward(%x: tensor<2x3xf32> {loom.input = "x"}) -> tensor<2x3xf32> {
  %one = loom.constant dense<1.000000e+00> : tensor<2x3xf32>
  %zero = loom.constant dense<0.000000e+00> : tensor<2x3xf32>
  %two = loom.constant dense<2.000000e+00> : tensor<2x3xf32>
  %a = loom.mul %x, %one : tensor<2x3xf32>
  %b = loom.add %zero, %a : tensor<2x3xf32>
  %c = loom.relu %b : tensor<2x3xf32>
  %d = loom.sub %c, %zero : tensor<2x3xf32>
  %e = loom.sub %zero, %d : tensor<2x3xf32>
  %f = loom.mul %e, %two : tensor<2x3xf32>
  return %f : tensor<2x3xf32>
}
"""


def fold_identities_pass():
    sys.path.insert(0, os.path.join(REPO, "examples", "python"))
    try:
        from fold_identities import fold_identities
    finally:
        sys.path.pop(0)
    return fold_identities


def test_a_module_walks_its_ops_with_their_operands_and_attributes():
    m = loom.passes.parse(IDENTITIES)
    ops = m.walk()
    names = [op.name for op in ops]
    assert names[0] == "func.func"
    assert names.count("loom.constant") == 3 and names[-1] == "func.return"
    relu = next(op for op in ops if op.name == "loom.relu")
    assert relu.parent.name == "func.func"
    assert [v.type for v in relu.results] == ["tensor<2x3xf32>"]
    add = relu.operands[0].owner
    assert add.name == "loom.add"
    assert relu in add.results[0].users
    assert add.operands[0].owner.attributes["value"] == \
        "dense<0.000000e+00> : tensor<2x3xf32>"
    # A function argument has no defining op.
    x = next(op for op in ops if op.name == "loom.mul").operands[0]
    assert x.owner is None and x.type == "tensor<2x3xf32>"
    # Attributes are set from their text.
    relu.set_attribute("loom.checkpoint", "unit")
    assert "loom.checkpoint" in relu.attributes
    relu.remove_attribute("loom.checkpoint")
    assert "loom.checkpoint" not in relu.attributes
    assert "loom.relu" in str(relu)
    m.verify()


def test_a_pass_written_in_python_folds_identities():
    fold = fold_identities_pass()
    m = loom.passes.parse(IDENTITIES)
    # x * 1, 0 + a and c - 0 fold; 0 - d and e * 2 stay.
    assert fold(m) == 3
    m.verify()
    names = [op.name for op in m.walk()]
    assert names.count("loom.mul") == 1 and names.count("loom.add") == 0
    assert names.count("loom.sub") == 1
    relu = next(op for op in m.walk() if op.name == "loom.relu")
    assert relu.operands[0].owner is None  # reads %x directly now
    # Chained with Loom's passes, as a list: the dead constants go.
    out = loom.passes.run(str(m), ["canonicalize"])
    assert "dense<1.000000e+00>" not in out
    # The whole chain from text in one call gives the same IR.
    assert loom.passes.run(IDENTITIES, [fold, "canonicalize"]) == out
    # A list of pipeline texts runs each in turn, each with its own anchor.
    assert loom.passes.run(str(m), ["builtin.module(canonicalize)", "cse"]) \
        == loom.passes.run(str(m), "canonicalize,cse")


def test_the_fold_identities_example_runs_on_a_model():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(loom.__path__[0]))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "python",
                                      "fold_identities.py"), MLP_ONNX],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "folded 0 identity ops" in result.stdout
    assert "the training step has" in result.stdout


def test_a_python_pass_can_create_ops():
    m = loom.passes.parse(IDENTITIES)
    relu = next(op for op in m.walk() if op.name == "loom.relu")
    x = next(op for op in m.walk() if op.name == "loom.mul").operands[0]
    neg = m.create_op("loom.neg", [x], ["tensor<2x3xf32>"], before=relu)
    assert neg.name == "loom.neg" and neg.operands[0] == x
    relu_in = relu.operands[0]
    assert relu_in.owner.name == "loom.add"
    relu_in.replace_all_uses_with(neg.results[0])
    assert relu.operands[0].owner == neg
    m.verify()
    # Unknown ops, bad types and ops the verifier refuses are PassErrors.
    with pytest.raises(loom.PassError, match="no operation named"):
        m.create_op("loom.frobnicate", [x], ["tensor<2x3xf32>"], before=relu)
    with pytest.raises(loom.PassError):
        m.create_op("loom.neg", [x], ["tensor<2x"], before=relu)
    with pytest.raises(loom.PassError):
        m.create_op("loom.neg", [x], ["tensor<3x2xf32>"], before=relu)
    # None of the failed ones stayed.
    assert [op.name for op in m.walk()].count("loom.neg") == 1


def test_misuse_of_the_ir_classes_raises():
    m = loom.passes.parse(IDENTITIES)
    ops = m.walk()
    relu = next(op for op in ops if op.name == "loom.relu")
    add = relu.operands[0].owner
    # A result still read cannot go.
    with pytest.raises(loom.PassError, match="still used"):
        add.erase()
    # Types must match.
    other = m.create_op("loom.constant", [], ["tensor<3x2xf32>"],
                        {"value": "dense<1.0> : tensor<3x2xf32>"},
                        before=relu)
    with pytest.raises(loom.PassError, match="type"):
        add.results[0].replace_all_uses_with(other.results[0])
    other.erase()
    with pytest.raises(loom.PassError, match="attribute"):
        relu.set_attribute("x", "dense<")
    # An erased op's handles raise ValueError.
    mul = next(op for op in m.walk() if op.name == "loom.mul"
               and op.results[0].users[0].name == "loom.add")
    mul.results[0].replace_all_uses_with(mul.operands[0])
    result = mul.results[0]
    mul.erase()
    with pytest.raises(ValueError, match="erased"):
        mul.name
    with pytest.raises(ValueError, match="erased"):
        result.type
    m.verify()
    with pytest.raises(TypeError):
        loom.passes.parse(b"bytes")
    with pytest.raises(TypeError):
        loom.passes.run(IDENTITIES, [42])
    with pytest.raises(loom.PassError, match="<ir>:2:"):
        loom.passes.parse("func.func @f() {\n  %0 = loom.nope : i32\n}\n")


def test_handles_from_before_a_pipeline_raise():
    # canonicalize erases the folded ops' dead constants: an earlier handle
    # could point at freed memory, so every earlier handle refuses.
    m = loom.passes.parse(IDENTITIES)
    const = next(op for op in m.walk() if op.name == "loom.constant")
    value = const.results[0]
    loom.passes.run(m, "canonicalize")
    with pytest.raises(ValueError, match="before a pass pipeline ran"):
        const.name
    with pytest.raises(ValueError, match="before a pass pipeline ran"):
        value.type
    # A fresh walk works.
    assert any(op.name == "loom.relu" for op in m.walk())
