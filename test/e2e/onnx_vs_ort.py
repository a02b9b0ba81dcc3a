#!/usr/bin/env python3
"""Loom against onnxruntime on ONNX models, for their forward outputs.

For each model: random inputs (float: standard normal; integer: 0..3;
seeded), onnxruntime's outputs (from PyPI, independent of Loom), then
`loomc MODEL -o M.mlir` run by `loom-interp`, and `loomc --target=cpu`
run by `loom-run --entry=forward`: every output is compared (max abs error
relative to the output's largest magnitude <= --rtol). One line per output;
exit status 0 when all agree.
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiled_vs_interp import run  # noqa: E402

ort.set_default_logger_severity(3)


def inputs_of(model, rng):
    feeds = {}
    inits = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[vi.name] = rng.integers(0, 4, shape).astype(dtype)
    return feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--interp", required=True)
    ap.add_argument("--loom-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    failures = 0
    for path in args.models:
        name = os.path.splitext(os.path.basename(path))[0]
        d = os.path.join(args.workdir, name)
        os.makedirs(d, exist_ok=True)
        model = onnx.load(path)
        feeds = inputs_of(model, np.random.default_rng(0))
        want = dict(zip([o.name for o in model.graph.output],
                        ort.InferenceSession(path).run(None, feeds)))
        flags = []
        for k, v in feeds.items():
            f = os.path.join(d, "in_%s.npy" % k)
            np.save(f, v)
            flags += ["--input", "%s=%s" % (k, f)]
        ir, art = os.path.join(d, "m.mlir"), os.path.join(d, "m.loom")
        run([args.loomc, path, "-o", ir])
        run([args.loomc, path, "--target=cpu", "-o", art])
        run([args.interp, ir, "--output-dir", os.path.join(d, "interp")] +
            flags)
        run([args.loom_run, art, "--entry=forward", "--output-dir",
             os.path.join(d, "compiled")] + flags)
        for how in ("interp", "compiled"):
            for k, w in want.items():
                got = np.load(os.path.join(d, how, k + ".npy"))
                if got.shape != w.shape:
                    err = float("inf")
                else:
                    err = float(np.abs(got.astype(np.float64) - w).max() /
                                max(np.abs(w).max(), 1e-30))
                ok = err <= args.rtol
                failures += not ok
                print("%-4s %s %s %s rel err %.2e" % (
                    "ok" if ok else "FAIL", name, how, k, err))
    print("%d models, %d failures" % (len(args.models), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
