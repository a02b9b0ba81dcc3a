#!/usr/bin/env python3
"""Writes the handwritten-digits demo data set as .npz files for loom-run.

Source: scikit-learn's `load_digits()` (1797 8x8 images, 10 classes), which
ships inside the scikit-learn package: nothing is downloaded.

Usage:
  .venv/bin/python examples/data/make_digits.py [--out-dir DIR] [--test-fraction 0.2] [--seed 0]

Needs numpy and scikit-learn (both in the .venv that scripts/setup.sh makes).

Writes DIR/digits_train.npz and DIR/digits_test.npz, each with
  x       float32 [N, 64]  pixel intensities / 16, in [0, 1]
  labels  int64   [N]      the digit, 0..9
The split is stratified (each digit keeps its share in both files) and fixed
by the seed, so the same command always writes the same files. Array names
match the inputs of examples/onnx/digits_mlp.onnx (`x`) and loomc's
`--labels=labels`.
"""
import argparse
import os
import sys

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT_DIR = os.path.join(REPO_ROOT, "out", "data")


def load(test_fraction=0.2, seed=0):
    """Returns ((x_train, y_train), (x_test, y_test)) as described above."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y)
    return (x_tr, y_tr), (x_te, y_te)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=DEFAULT_OUT_DIR,
                    help="output folder (default: out/data in the repository, "
                         "which git ignores)")
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    (x_tr, y_tr), (x_te, y_te) = load(args.test_fraction, args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, x, y in (("digits_train", x_tr, y_tr), ("digits_test", x_te, y_te)):
        path = os.path.join(args.out_dir, name + ".npz")
        np.savez(path, x=x, labels=y)
        counts = np.bincount(y, minlength=10)
        print("wrote %s: x %s %s, labels %s %s, per class %s"
              % (path, x.dtype, list(x.shape), y.dtype, list(y.shape),
                 counts.tolist()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
