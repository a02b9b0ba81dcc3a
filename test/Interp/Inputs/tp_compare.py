"""Compares one process's results of an entry point with a mesh's.

    tp_compare.py MESH.mlir ENTRY SINGLE_DIR MESH_DIR TP DP TOL [PARAM_ABS]

MESH_DIR/rankR/NAME.npy are the mesh's per-rank results (loom-interp's
--output-dir), rank R = dp index * TP + tp index. A result split over "tp"
(its loom.shard in MESH.mlir's signature of ENTRY) is joined here from the
ranks of dp index 0, with NumPy, from the definition of the split: along
`dim`, `groups` equal groups, rank r holding block r of each. Whole
results must be the same on every rank. Prints one line per tensor whose
max |difference| / max |single| exceeds TOL, then a summary line. With
PARAM_ABS, the parameters (every result but the loss, the step and the
optimizer state `NAME.SLOT`) are held to an absolute difference of
PARAM_ABS instead: Adam's step is lr * m / (sqrt(v) + eps) whatever the
gradient's size, so a gradient of rounding noise (GPT-2's key bias, whose
true gradient is zero) or one near eps moves its parameter by a step
that rounding decides.
"""
import os
import re
import sys

import numpy as np

mlir, entry, single, mesh = sys.argv[1:5]
tp, dp, tol = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
param_abs = float(sys.argv[8]) if len(sys.argv) > 8 else None

sig = re.search(r"func\.func @" + re.escape(entry) + r"\((.*)", open(mlir).read()).group(1)
splits = {}
for name, dim, groups in re.findall(
        r'loom\.(?:output|grad) = "([^"]+)", loom\.shard = \{axis = "tp", dim = (\d+) : i64'
        r'(?:, groups = (\d+) : i64)?', sig):
    splits[name] = (int(dim), int(groups or 1))


def join(parts, dim, groups):
    blocks = [np.split(p, groups, axis=dim) for p in parts]
    return np.concatenate([blocks[r][g] for g in range(groups) for r in range(len(parts))], axis=dim)


worst, count, bad = 0.0, 0, 0
for f in sorted(os.listdir(single)):
    name = f[:-len(".npy")]
    want = np.load(os.path.join(single, f)).astype(np.float64)
    ranks = [np.load(os.path.join(mesh, f"rank{r}", f)).astype(np.float64) for r in range(tp * dp)]
    got = join(ranks[:tp], *splits[name]) if name in splits else ranks[0]
    if name not in splits and any(not np.array_equal(r, ranks[0]) for r in ranks[:tp]):
        print(f"{name}: differs between the tp ranks of a whole tensor")
        bad += 1
    diff = np.abs(got - want).reshape(-1)
    count += 1
    state = re.search(r"\.(adam_m|adam_v|momentum)$", name) or name in ("loss", "step")
    if param_abs is not None and not state:
        if diff.max() > param_abs:
            print(f"{name}: max |diff| = {diff.max():.3g} > {param_abs}")
            bad += 1
        continue
    scale = max(np.abs(want).max(), 1e-30)
    rel = diff.max() / scale if diff.size else 0.0
    worst = max(worst, rel)
    if rel > tol:
        print(f"{name}: max |diff| / max |single| = {rel:.3g}")
        bad += 1
print(f"{entry}: {count} tensors, {len(splits)} split over tp, {bad} differ (worst {worst:.2g})")
