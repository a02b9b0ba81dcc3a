#!/usr/bin/env python3
"""GatherND and ScatterND with indices computed at run time (graph inputs),
interpreted and compiled for the CPU, against onnxruntime.

    nd_runtime_vs_ort.py WORKDIR   (loomc, loom-interp, loom-run on PATH)

Cases: GatherND with batch_dims=1 and negative indices; ScatterND with
reduction none on distinct (row, column) pairs, one negative; ScatterND
with reduction add on repeated rows. Each output must equal onnxruntime's:
exactly where nothing is added, within 1e-6 where updates are (onnxruntime
adds each update to the data in turn; Loom sums a row's updates, then adds
the sum). Then an index out of range must stop the interpreter with an
error.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h


def graph(node, inputs, output):
    return h.make_graph(
        [node], "g",
        [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [h.make_tensor_value_info("y", T.FLOAT, output)])


def cases():
    r = np.random.RandomState(0)
    i = np.stack([r.randint(-3, 3, (2, 6)), r.randint(-4, 4, (2, 6))], -1)
    yield ("gathernd_batch", graph(
        h.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1),
        [("x", T.FLOAT, [2, 3, 4, 5]), ("i", T.INT64, [2, 6, 2])], [2, 6, 5]),
        dict(x=r.randn(2, 3, 4, 5).astype(np.float32), i=i.astype(np.int64)))
    yield ("scatternd_none", graph(
        h.make_node("ScatterND", ["x", "i", "u"], ["y"]),
        [("x", T.FLOAT, [4, 3, 2]), ("i", T.INT64, [3, 2]),
         ("u", T.FLOAT, [3, 2])], [4, 3, 2]),
        dict(x=r.randn(4, 3, 2).astype(np.float32),
             i=np.array([[0, 2], [-1, 0], [2, -2]], np.int64),
             u=r.randn(3, 2).astype(np.float32)))
    yield ("scatternd_add", graph(
        h.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add"),
        [("x", T.FLOAT, [4, 3]), ("i", T.INT64, [2, 3, 1]),
         ("u", T.FLOAT, [2, 3, 3])], [4, 3]),
        dict(x=r.randn(4, 3).astype(np.float32),
             i=np.array([[[1], [1], [3]], [[-1], [0], [1]]], np.int64),
             u=r.randn(2, 3, 3).astype(np.float32)))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    work = sys.argv[1]
    bad = 0
    for name, g, feed in cases():
        path = os.path.join(work, name + ".onnx")
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]),
                  path)
        want = ort.InferenceSession(path).run(None, feed)[0]
        args = []
        for k, v in feed.items():
            f = os.path.join(work, "%s_%s.npy" % (name, k))
            np.save(f, v)
            args += ["--input", "%s=%s" % (k, f)]
        ir, art = path[:-5] + ".mlir", path[:-5] + ".loom"
        for cmd in (["loomc", path, "-o", ir],
                    ["loomc", path, "--target=cpu", "-o", art]):
            p = run(cmd)
            if p.returncode:
                print("FAIL", name, " ".join(cmd), p.stderr)
                return 1
        for how, cmd in (("interp", ["loom-interp", ir]),
                         ("compiled", ["loom-run", art, "--entry=forward"])):
            out = os.path.join(work, name + "_" + how)
            p = run(cmd + ["--output-dir", out] + args)
            got = (np.load(os.path.join(out, "y.npy")) if not p.returncode
                   else None)
            ok = got is not None and got.shape == want.shape and (
                np.allclose(got, want, rtol=1e-6, atol=1e-6)
                if name.endswith("_add") else np.array_equal(got, want))
            bad += not ok
            print("%-4s %-16s %s = onnxruntime" % ("ok" if ok else "FAIL",
                                                   name, how))
    # An index past the end stops the interpreter, naming the op.
    far = os.path.join(work, "far.npy")
    np.save(far, np.array([[0, 2], [4, 0], [2, 1]], np.int64))
    p = run(["loom-interp", os.path.join(work, "scatternd_none.mlir"),
             "--output-dir", os.path.join(work, "far"),
             "--input", "x=" + os.path.join(work, "scatternd_none_x.npy"),
             "--input", "i=" + far,
             "--input", "u=" + os.path.join(work, "scatternd_none_u.npy")])
    ok = p.returncode != 0 and "out of range" in p.stderr
    bad += not ok
    print("%-4s out-of-range index stops the interpreter: %s" %
          ("ok" if ok else "FAIL", p.stderr.strip().splitlines()[-1:]))
    print("%d failures" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
