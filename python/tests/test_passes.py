"""loom.passes.run: pass pipelines on IR text, errors as exceptions."""

import pytest

import loom
from conftest import MLP_ONNX


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
