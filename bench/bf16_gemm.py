#!/usr/bin/env python3
"""Times one bf16 GEMM step against one f32 GEMM step of the same size on the
CPU runtime (oneDNN's matmul for bf16, its sgemm for f32; LOOMRT_CPU_GEMM=
openblas for OpenBLAS and the widening fallback).

For each size S it writes a JSON graph computing x @ w (S x S x S; once in
f32, once with both operands cast to bf16) with an MSE loss, compiles its
training step with loomc --train --target=cpu, trains it for a few steps
with loom-run --profile, and reads the forward GEMM step's time per call
(the steps after the first) from the profile.

  python3 bench/bf16_gemm.py [--sizes 512,1024,2048] [--calls 20] [--threads N]
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def graph(size, bf16):
    nodes = []
    a, b = "x", "w"
    if bf16:
        nodes += [{"id": "x16", "op": "cast", "inputs": ["x"], "attrs": {"to": "bf16"}},
                  {"id": "w16", "op": "cast", "inputs": ["w"], "attrs": {"to": "bf16"}}]
        a, b = "x16", "w16"
    nodes.append({"id": "y", "op": "matmul", "inputs": [a, b]})
    if bf16:
        nodes.append({"id": "y32", "op": "cast", "inputs": ["y"], "attrs": {"to": "f32"}})
    return {"format": "loom-graph", "version": 1, "name": "gemm", "seed": 0,
            "inputs": [{"name": "x", "shape": [size, size], "dtype": "f32"}],
            "parameters": [{"name": "w", "shape": [size, size], "dtype": "f32",
                            "init": {"uniform": {"low": -1, "high": 1}}}],
            "nodes": nodes, "outputs": ["y32" if bf16 else "y"]}


def gemm_ms(tools, work, size, bf16, calls, threads):
    tag = "%s_%d" % ("bf16" if bf16 else "f32", size)
    model = os.path.join(work, tag + ".json")
    json.dump(graph(size, bf16), open(model, "w"))
    art = os.path.join(work, tag + ".loom")
    subprocess.run([os.path.join(tools, "loomc"), model, "--train", "--loss=mse",
                    "--optimizer=sgd", "--target=cpu", "-o", art],
                   check=True, capture_output=True)
    data = os.path.join(work, "d_%d.npz" % size)
    r = np.random.default_rng(0)
    np.savez(data, x=r.uniform(-1, 1, (size, size)).astype(np.float32),
             labels=r.uniform(-1, 1, (size, size)).astype(np.float32))
    prof = os.path.join(work, tag + ".csv")
    cmd = [os.path.join(tools, "loom-run"), art, "--train", "--data", data,
           "--steps", str(calls + 1), "--profile", prof, "--progress=none"]
    if threads:
        cmd += ["--threads", str(threads)]
    subprocess.run(cmd, check=True, capture_output=True)
    want = "gemm %dx%dx%d" % (size, size, size)
    for row in csv.DictReader(open(prof)):
        if row["kind"] == "gemm" and row["what"] == want:
            return float(row["ms_per_call"])
    raise RuntimeError("no '%s' row in %s" % (want, prof))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tools", default="build/bin")
    ap.add_argument("--sizes", default="512,1024,2048")
    ap.add_argument("--calls", type=int, default=5,
                    help="training steps timed per size (after one more)")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    print("| S (S x S x S) | f32 ms | bf16 ms | f32 GFLOP/s | bf16 GFLOP/s | bf16 speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as work:
        for size in [int(s) for s in args.sizes.split(",")]:
            f = gemm_ms(args.tools, work, size, False, args.calls, args.threads)
            b = gemm_ms(args.tools, work, size, True, args.calls, args.threads)
            flops = 2.0 * size ** 3
            print("| %d | %.2f | %.2f | %.0f | %.0f | %.2fx |"
                  % (size, f, b, flops / f / 1e6, flops / b / 1e6, f / b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
