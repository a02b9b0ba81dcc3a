#!/usr/bin/env python3
"""Training speed from Python against loom-run, on one artifact and data set.

    PYTHONPATH=build/python python3 examples/python/bench_train.py \\
        ARTIFACT.loom DATA.npz --steps 1000 --repeats 3

Alternates `loom-run ARTIFACT --train --data DATA --steps N` and
`loom.Artifact(ARTIFACT).train(data, steps=N)` (the data loaded into numpy
first), each from the artifact's initial state, and reports for each the
samples per second of the training loop (the runtime's own measure: what
loom-run's closing line prints, and Artifact.last_train in Python) and the
wall time of the whole train call. docs/python.md records results.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import loom

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def loom_run(binary, artifact, data, steps):
    start = time.perf_counter()
    result = subprocess.run([binary, artifact, "--train", "--data", data,
                             "--steps", str(steps), "--progress=lines"],
                            capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    match = re.search(r"trained steps \d+\.\.\d+ in [0-9.]+ s: ([0-9.]+) "
                      r"samples/s", result.stderr)
    if not match:
        sys.exit("cannot read loom-run's summary:\n" + result.stderr)
    return float(match.group(1)), wall


def python_train(artifact, arrays, steps):
    art = loom.Artifact(artifact)
    start = time.perf_counter()
    art.train(arrays, steps=steps, progress=False)
    wall = time.perf_counter() - start
    return art.last_train["samples_per_second"], wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loom-run", default=os.path.join(ROOT, "build", "bin",
                                                       "loom-run"))
    args = ap.parse_args()
    with np.load(args.data) as f:
        arrays = {k: f[k] for k in f.files}
    runs = {"loom-run": [], "python": []}
    for _ in range(args.repeats):
        runs["loom-run"].append(loom_run(args.loom_run, args.artifact,
                                         args.data, args.steps))
        runs["python"].append(python_train(args.artifact, arrays, args.steps))
    for name, results in runs.items():
        sps = [r[0] for r in results]
        walls = [r[1] for r in results]
        print("%-8s  %s samples/s (median %.1f)  wall %s s" % (
            name, " ".join("%.1f" % v for v in sps), statistics.median(sps),
            " ".join("%.2f" % w for w in walls)))
    ratio = (statistics.median(s for s, _ in runs["python"]) /
             statistics.median(s for s, _ in runs["loom-run"]))
    print("python / loom-run samples/s: %.3f" % ratio)


if __name__ == "__main__":
    main()
