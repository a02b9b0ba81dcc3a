#!/usr/bin/env python3
"""Training speed from Python against loom-run, on one artifact and data set.

    PYTHONPATH=build/python python3 examples/python/bench_train.py \\
        ARTIFACT.loom DATA.npz --steps 1000 --repeats 3

Alternates (ABBA) `loom-run ARTIFACT --train --data DATA --steps N` and
`loom.Artifact(ARTIFACT).train(data, steps=N)` (the data loaded into numpy
first), each from the artifact's initial state, and reports for each the
samples per second of the training loop (the runtime's own measure: what
loom-run's closing line prints, and Artifact.last_train in Python) and the
wall time of the whole train call. docs/python.md records results.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import loom

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def median_step(metrics):
    """The median of the steps' own samples per second: robust to a
    machine whose load comes and goes."""
    return statistics.median(m["samples_per_sec"] for m in metrics
                             if m.get("samples_per_sec"))


def loom_run(binary, artifact, data, steps):
    with tempfile.TemporaryDirectory() as tmp:
        lines = os.path.join(tmp, "metrics.jsonl")
        start = time.perf_counter()
        result = subprocess.run([binary, artifact, "--train", "--data", data,
                                 "--steps", str(steps), "--progress=lines",
                                 "--metrics", lines],
                                capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
        with open(lines) as f:
            metrics = [json.loads(line) for line in f if line.strip()]
    match = re.search(r"trained steps \d+\.\.\d+ in [0-9.]+ s: ([0-9.]+) "
                      r"samples/s", result.stderr)
    if not match:
        sys.exit("cannot read loom-run's summary:\n" + result.stderr)
    return float(match.group(1)), median_step(metrics), wall


def python_train(artifact, arrays, steps):
    art = loom.Artifact(artifact)
    with tempfile.TemporaryDirectory() as tmp:
        # The same metrics file as loom-run's, so both loops do the same I/O.
        start = time.perf_counter()
        metrics = art.train(arrays, steps=steps, progress=False,
                            metrics_file=os.path.join(tmp, "metrics.jsonl"))
        wall = time.perf_counter() - start
    return art.last_train["samples_per_second"], median_step(metrics), wall


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
    ratios, step_ratios = [], []
    for i in range(args.repeats):
        # ABBA order, so that a load that drifts during the benchmark
        # weighs on both alike.
        if i % 2 == 0:
            a = loom_run(args.loom_run, args.artifact, args.data, args.steps)
            b = python_train(args.artifact, arrays, args.steps)
        else:
            b = python_train(args.artifact, arrays, args.steps)
            a = loom_run(args.loom_run, args.artifact, args.data, args.steps)
        runs["loom-run"].append(a)
        runs["python"].append(b)
        ratios.append(b[0] / a[0])
        step_ratios.append(b[1] / a[1])
    for name, results in runs.items():
        sps = [r[0] for r in results]
        steps = [r[1] for r in results]
        walls = [r[2] for r in results]
        print("%-8s  loop %s samples/s (median %.1f); median step %s "
              "samples/s (median %.1f); wall %s s" % (
                  name, " ".join("%.1f" % v for v in sps),
                  statistics.median(sps), " ".join("%.1f" % v for v in steps),
                  statistics.median(steps),
                  " ".join("%.2f" % w for w in walls)))
    print("python / loom-run, per pair: loop %s (median %.3f); median step "
          "%s (median %.3f)"
          % (" ".join("%.3f" % r for r in ratios), statistics.median(ratios),
             " ".join("%.3f" % r for r in step_ratios),
             statistics.median(step_ratios)))


if __name__ == "__main__":
    main()
