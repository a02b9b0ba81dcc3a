#!/usr/bin/env python3
"""Writes examples/onnx/digits_mlp.onnx, the model of the digits training demo.

Usage:
  examples/onnx/make_digits_mlp.py [--out PATH]

Model: input `x` float[32, 64] (a batch of 8x8 digit images, see
examples/data/make_digits.py) -> Gemm 64->128 (transB) -> Relu -> Gemm
128->10 (transB) -> output `logits` float[32, 10]. Parameters `fc1.weight`
[128, 64], `fc1.bias` [128], `fc2.weight` [10, 128], `fc2.bias` [10], stored
[out, in] as PyTorch's nn.Linear does and initialized like its default
(weight and bias uniform in +-1/sqrt(fan_in)) from a fixed seed. Opset 17,
IR version 8, PyTorch-export-style node names. Deterministic: byte-identical
output on every run. Checked with onnx.checker and strict shape inference
(the helpers of utils/gen_onnx_models.py).

Needs onnx and numpy (Debian's python3-onnx or the .venv).
"""
import argparse
import os
import sys

from onnx import TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "utils"))
from gen_onnx_models import GraphBuilder, param_count, save, verify_valid  # noqa: E402

BATCH, D_IN, HIDDEN, CLASSES = 32, 64, 128, 10
SEED = 1797  # the number of images in the data set; any fixed value will do


def build_digits_mlp():
    b = GraphBuilder(seed=SEED)
    x = b.input("x", TensorProto.FLOAT, [BATCH, D_IN])
    w1 = b.weight("fc1.weight", (HIDDEN, D_IN), D_IN)
    b1 = b.weight("fc1.bias", (HIDDEN,), D_IN)
    h = b.node("Gemm", [x, w1, b1], "/fc1/Gemm", transB=1)
    h = b.node("Relu", [h], "/act1/Relu")
    w2 = b.weight("fc2.weight", (CLASSES, HIDDEN), HIDDEN)
    b2 = b.weight("fc2.bias", (CLASSES,), HIDDEN)
    b.node("Gemm", [h, w2, b2], "/fc2/Gemm", outputs=["logits"], transB=1)
    b.output("logits", TensorProto.FLOAT, [BATCH, CLASSES])
    return b.model("digits_mlp", "2-layer MLP for 8x8 digits: 64 -> 128 -> 10")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "digits_mlp.onnx"))
    args = ap.parse_args(argv)
    model = build_digits_mlp()
    verify_valid(model, "digits_mlp")
    save(model, args.out)
    print("wrote %s (%d parameters)" % (args.out, param_count(model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
