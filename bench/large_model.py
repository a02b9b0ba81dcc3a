#!/usr/bin/env python3
"""Peak memory and time of importing a model whose weights exceed 2 GiB.

    bench/large_model.py --workdir DIR [--gib 3] [--loomc build/bin/loomc]
                         [--optimizer sgd]

Writes an ONNX model of `--gib` GiB of float32 weights (an MLP of square
linear layers, [4096, 4096] each, so about 64 MiB per layer) with its
weights as external data (one file beside the model, as PyTorch's exporter
writes models over 2 GiB), then runs `loomc --train --loss=mse
--target=cpu` on it under GNU time and prints loomc's peak resident set
size, its wall time, the artifact's params.safetensors size and the ratio
of peak RSS to the weights' size (1.0 would be one copy of the weights in
memory). The model file and weights are written once per size and kept in
DIR.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np


def write_model(path, layers, width, batch):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits = [], []
    x = "x"
    rng = np.random.RandomState(0)
    for i in range(layers):
        w = "w%d" % i
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((width, width)) / np.sqrt(width))
            .astype(np.float32), w))
        y = "h%d" % i
        nodes.append(helper.make_node("MatMul", [x, w], [y + "_mm"],
                                      name="/layer%d/MatMul" % i))
        nodes.append(helper.make_node("Tanh", [y + "_mm"], [y],
                                      name="/layer%d/Tanh" % i))
        x = y
    graph = helper.make_graph(
        nodes, "large",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, width])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, path, save_as_external_data=True,
                    all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data",
                    size_threshold=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--gib", type=float, default=3.0)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--loomc", default="build/bin/loomc")
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--loom-run", default="build/bin/loom-run")
    ap.add_argument("--train-steps", type=int, default=0,
                    help="then train this many steps with loom-run --train "
                    "--save-params and report its peak RSS too")
    ap.add_argument("--emit", default="",
                    help="stop at this phase instead of writing an artifact")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    layer_bytes = args.width * args.width * 4
    layers = max(1, int(round(args.gib * 2**30 / layer_bytes)))
    weights = layers * layer_bytes
    path = os.path.join(args.workdir, "large_%dx%d.onnx" % (layers, args.width))
    if not os.path.exists(path + ".data"):
        t = time.time()
        write_model(path, layers, args.width, 8)
        print("wrote %s (%d layers, %.2f GiB of weights) in %.0f s" %
              (path, layers, weights / 2**30, time.time() - t))
    out = os.path.join(args.workdir, "large.loom")
    cmd = [args.loomc, path, "--train", "--loss=mse",
           "--optimizer=" + args.optimizer, "--target=cpu", "-o", out]
    if args.emit:
        cmd = [args.loomc, path, "--train", "--loss=mse",
               "--optimizer=" + args.optimizer, "--emit=" + args.emit,
               "-o", os.devnull]
    rss, wall = measured(cmd)
    if rss is None:
        return 1
    print("loomc %s: peak RSS %.2f GiB for %.2f GiB of weights (%.2fx), "
          "wall %s" % (" ".join(cmd[1:]), rss / 2**30, weights / 2**30,
                       rss / weights, wall))
    st = os.path.join(out, "params.safetensors")
    if not args.emit and os.path.exists(st):
        print("params.safetensors: %.2f GiB" % (os.path.getsize(st) / 2**30))
    if args.train_steps and not args.emit:
        data = os.path.join(args.workdir, "data.npz")
        rng = np.random.RandomState(1)
        np.savez(data, x=rng.standard_normal((8, args.width)).astype(np.float32),
                 labels=rng.standard_normal((8, args.width)).astype(np.float32))
        cmd = [args.loom_run, out, "--train", "--data", data, "--steps",
               str(args.train_steps), "--progress=none", "--save-params",
               os.path.join(args.workdir, "trained.safetensors")]
        rss, wall = measured(cmd)
        if rss is None:
            return 1
        print("loom-run %s: peak RSS %.2f GiB for %.2f GiB of weights "
              "(%.2fx), wall %s" % (" ".join(cmd[1:]), rss / 2**30,
                                    weights / 2**30, rss / weights, wall))
    return 0


def measured(cmd):
    """Runs `cmd` under GNU time: (peak RSS in bytes, wall time), or (None,
    None) after printing its output when it fails."""
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(r.stdout[-3000:])
        return None, None
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                        r.stdout).group(1)) * 1024
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", r.stdout).group(1)
    return rss, wall


if __name__ == "__main__":
    sys.exit(main())
