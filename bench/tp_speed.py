#!/usr/bin/env python3
"""Tensor parallelism on the CPU: the speed of `loomc --tp=2` on two ranks.

Compiles the character-level GPT of examples/charlm (4 layers, d 128, T 64,
batch 32, AdamW; a torch.onnx.export of a transformers GPT-2) as one
process and with `--tp=2` (attention and MLP split Megatron-style: 2 of
the 4 heads and half of each MLP per rank), and trains it for STEPS steps
of the same batch:

  - one process, one thread (the reference);
  - one process, two threads;
  - mpirun -np 2, one thread each, the `--tp=2` artifact.

It reports the median ms per step of steps 4.. (metrics' samples_per_sec)
per repeat, the speed against the reference, and from loom-run's summary
the plan's collectives per step, the ms per step they were in flight and
the ms per step the rank waited for them (which includes waiting for the
other rank).

  .venv/bin/python bench/tp_speed.py [--steps 20] [--repeats 3]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

from dp_overlap import MPI_ENV, ROOT, ms_per_step, run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="loom-tp-")
    run([sys.executable, os.path.join(ROOT, "examples/charlm/make_data.py"),
         "--out-dir", work])
    arts = {}
    for tp in (1, 2):
        arts[tp] = os.path.join(work, "charlm-tp%d.loom" % tp)
        run([os.path.join(args.tools, "loomc"),
             os.path.join(ROOT, "examples/charlm/charlm.onnx"), "--train",
             "--loss=cross_entropy", "--labels=labels", "--optimizer=adamw",
             "--lr=1e-3", "--target=cpu", "--tp=%d" % tp, "-o", arts[tp]])
    data = os.path.join(work, "train.npz")
    runs = [("1 process, 1 thread", arts[1], None, "1"),
            ("1 process, 2 threads", arts[1], None, "2"),
            ("2 ranks x 1 thread, loomc --tp=2", arts[2], 2, "1")]
    print("| run | ms per step (repeats) | collectives per step | ms in flight | ms waited for |")
    print("|---|---:|---:|---:|---:|")
    median = {}
    for name, art, ranks, threads in runs:
        times, plan = [], []
        for r in range(args.repeats):
            metrics = os.path.join(work, "m%d.jsonl" % r)
            if os.path.exists(metrics):
                os.remove(metrics)
            cmd = [os.path.join(args.tools, "loom-run"), art, "--train",
                   "--data", data, "--steps", str(args.steps),
                   "--threads", threads, "--progress=lines",
                   "--metrics", metrics]
            if ranks:
                cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
            out = run(cmd, MPI_ENV if ranks else None)
            times.append(ms_per_step(metrics, 32))
            p = re.search(r"plan collectives: (\d+) per step, (\S+) ms per "
                          r"step in flight, (\S+) ms waited for", out)
            if p:
                plan.append((int(p.group(1)), float(p.group(2)),
                             float(p.group(3))))
        median[name] = statistics.median(times)
        cols = ("%d" % plan[0][0],
                "%.1f" % statistics.median(x[1] for x in plan),
                "%.1f" % statistics.median(x[2] for x in plan)) if plan else ("-",) * 3
        print("| %s | %s | %s | %s | %s |" % (
            (name, ", ".join("%.1f" % t for t in times)) + cols))
    base = median[runs[0][0]]
    print("\nsamples/s against 1 process x 1 thread (the same batch):")
    for name, ms in median.items():
        print("  %s: %.2fx" % (name, base / ms))


if __name__ == "__main__":
    main()
