#!/usr/bin/env python3
"""Random training data for a compiled artifact: BATCHES batches of
train_step's data inputs (compiled_vs_interp.make_batch: floats standard
normal, integers in [0, --int-high)), concatenated along dim 0 into one
.npz that loom-run --train reads.

  make_batches.py ART.loom OUT.npz [--batches 8] [--seed 0] [--int-high 4]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiled_vs_interp import make_batch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("out")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--int-high", type=int, default=4)
    args = ap.parse_args()
    with open(os.path.join(args.artifact, "plan.json")) as f:
        plan = json.load(f)
    rng = np.random.default_rng(args.seed)
    batches = [make_batch(plan, rng, args.int_high)
               for _ in range(args.batches)]
    np.savez(args.out, **{k: np.concatenate([b[k] for b in batches])
                          for k in batches[0]})


if __name__ == "__main__":
    main()
