#!/usr/bin/env python3
"""Compares two safetensors files tensor by tensor: the same names and
shapes, and values within a norm-wise relative tolerance (the largest
absolute difference over the largest magnitude). Prints "N tensors agree"
or the first disagreement (exit status 1)."""
import argparse
import sys

import numpy as np

from compiled_vs_interp import read_safetensors, rel_err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-6)
    args = ap.parse_args()
    a, b = read_safetensors(args.a), read_safetensors(args.b)
    if sorted(a) != sorted(b):
        print("different tensors: %s vs %s" % (sorted(a), sorted(b)))
        return 1
    for k in sorted(a):
        err = rel_err(a[k], b[k])
        if not err <= args.rtol:
            print("%s: rel err %.3g > %g" % (k, err, args.rtol))
            return 1
    print("%d tensors agree (rtol %g)" % (len(a), args.rtol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
