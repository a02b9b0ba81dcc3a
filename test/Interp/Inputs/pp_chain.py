"""Runs a pipelined module's stages one after another in loom-interp and
compares the result with one process's @forward_backward.

    pp_chain.py ONE.mlir PP.mlir OUT_DIR TOL --input NAME=FILE.npy ...

ONE.mlir is `loomc --emit=optimizer` without --pp, PP.mlir the same with
--pp (its `loom.pipeline` attribute gives the number of stages). Each
stage's forward takes the data inputs it names and the boundary tensors
the stage before it wrote; the backwards run from the last stage to the
first, each taking its forward's inputs and the gradients the stage after
it wrote (`pp.b<s>.<i>.grad`); a parameter several stages read (tied)
gets the sum of their gradients. Stages whose backward is split
(`_backward_input`, `_backward_weight`) run both halves. The loss and
every parameter gradient are compared with ONE's: one line per tensor
whose max |difference| / max |ONE| exceeds TOL, then a summary.
"""
import os
import re
import subprocess
import sys

import numpy as np

one, pp, out, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
data = dict(a.split("=", 1) for a in sys.argv[6::2]) if len(sys.argv) > 5 else {}
text = open(pp).read()
stages = int(re.search(r"stages = (\d+) : i64", text).group(1))


def inputs_of(entry):
    sig = re.search(r"func\.func @" + re.escape(entry) + r"\((.*?)\) ->", text)
    return sig and re.findall(r'loom\.input = "([^"]+)"', sig.group(1))


def run(mlir, entry, files, where):
    args = ["loom-interp", mlir, "--entry=" + entry, "--output-dir", where]
    for name, path in files.items():
        args += ["--input", f"{name}={path}"]
    subprocess.run(args, check=True)
    # A module with a mesh writes each rank's results to rankR/.
    return os.path.join(where, "rank0") if os.path.isdir(os.path.join(where, "rank0")) else where


files = dict(data)  # everything computed so far, by name
for s in range(stages):
    entry = f"stage{s}_forward"
    d = run(pp, entry, {n: files[n] for n in inputs_of(entry)}, os.path.join(out, entry))
    for f in os.listdir(d):
        files[f[:-4]] = os.path.join(d, f)
grads = {}
for s in reversed(range(stages)):
    entries = [f"stage{s}_backward"] if inputs_of(f"stage{s}_backward") is not None else \
        [e for e in (f"stage{s}_backward_input", f"stage{s}_backward_weight") if inputs_of(e) is not None]
    for entry in entries:
        d = run(pp, entry, {n: files[n] for n in inputs_of(entry)}, os.path.join(out, entry))
        for f in os.listdir(d):
            name = f[:-4]
            if name.startswith("pp.b"):
                files[name] = os.path.join(d, f)
            else:  # a parameter's gradient; a shared one's summed over stages
                grads.setdefault(name, []).append(os.path.join(d, f))

ref = run(one, "forward_backward", data, os.path.join(out, "one"))
bad = count = 0
worst = 0.0
for f in sorted(os.listdir(ref)):
    name = f[:-4]
    got = files.get(name) if name == "loss" else grads.get(name)
    count += 1
    if got is None:
        print(f"{name}: no stage computed it")
        bad += 1
        continue
    want = np.load(os.path.join(ref, f)).astype(np.float64)
    have = sum(np.load(g).astype(np.float64) for g in ([got] if name == "loss" else got))
    rel = np.abs(have - want).max() / max(np.abs(want).max(), 1e-30)
    worst = max(worst, rel)
    if rel > tol:
        print(f"{name}: max |diff| / max |one| = {rel:.3g} > {tol}")
        bad += 1
print(f"{stages} stages: {count} tensors, {bad} differ")
print(f"worst relative difference: {worst:.2g}", file=sys.stderr)
