"""Inputs for, and NumPy checks of, linear-cross-entropy-chunks.mlir.

  linear_cross_entropy_check.py make DIR       writes DIR/<fn>/<arg>.npy
  linear_cross_entropy_check.py check DIR OUT  checks OUT/<fn>/*.npy

Each function of the test takes x [10, 4], w, labels [10] and the loss's
cotangent g, and returns the fused head's loss and lse and its gradient's
dx and dw; the reference is ref.linear_cross_entropy in float64 (for the
bf16 head, of the inputs rounded to bf16, within bf16's rounding of the
logits, dlogits, dx and dw).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "Interp", "Inputs"))
import ref  # noqa: E402

# name: (reduction, ignore_index, transpose_w, label dtype, bf16)
CASES = {
    "mean_tied": ("mean", -100, True, np.int64, False),
    "sum_tied": ("sum", -100, True, np.int64, False),
    "none_untied": ("none", None, False, np.int32, False),
    "mean_tied_bf16": ("mean", -100, True, np.int64, True),
}


def to_bf16(a):
    """float32 `a` rounded to bf16 (to nearest, ties to even), as float32."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)
N, C, V = 10, 4, 7


def inputs(name):
    reduction, ignore, tied, dtype, _ = CASES[name]
    r = np.random.RandomState(sum(map(ord, name)))
    x = r.randn(N, C).astype(np.float32)
    w = (r.randn(V, C) if tied else r.randn(C, V)).astype(np.float32)
    y = r.randint(0, V, N).astype(dtype)
    if ignore is not None:
        y[[1, 6]] = ignore  # one ignored label in each of two chunks
    g = r.randn(N) if reduction == "none" else np.array(r.randn())
    return {"x": x, "w": w, "y": y, "g": g.astype(np.float32)}


def main():
    mode, d = sys.argv[1], sys.argv[2]
    for name in CASES:
        args = inputs(name)
        if mode == "make":
            os.makedirs(os.path.join(d, name), exist_ok=True)
            for k, v in args.items():
                np.save(os.path.join(d, name, k + ".npy"), v)
            continue
        reduction, ignore, tied, _, bf16 = CASES[name]
        x, w = args["x"], args["w"]
        if bf16:
            x, w = to_bf16(x), to_bf16(w)
        loss, lse, grad = ref.linear_cross_entropy(
            x, w, args["y"], reduction, ignore, tied)
        dx, dw = grad(args["g"])
        out = lambda n: np.load(os.path.join(sys.argv[3], name, n + ".npy"))
        tol = 1e-2 if bf16 else 1e-12
        for n, want in (("loss", loss), ("lse", lse), ("dx", dx), ("dw", dw)):
            ref.check(name + " " + n, out(n), want, rtol=tol, atol=tol)


if __name__ == "__main__":
    main()
