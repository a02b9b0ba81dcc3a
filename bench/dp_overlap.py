#!/usr/bin/env python3
"""Data parallelism on the CPU: speed of two ranks, and the all-reduce
hidden behind the backward.

Compiles the character-level GPT of examples/charlm (4 layers, d 128, T 64,
batch 32 per micro-batch, AdamW) and trains it for STEPS steps of a global
batch of two micro-batches:

  - one process, one thread, --accumulate 2 (the reference);
  - one process, two threads, --accumulate 2;
  - mpirun -np 2, one thread each, gradients summed in buckets during the
    backward (--bucket-mb, default 25) and after it (--bucket-mb 0);
  - mpirun -np 2, one thread each, of the artifact compiled with
    `loomc --dp=2` and `--zero=1` and `--zero=3`: the step's own collectives,
    issued as the backward produces each gradient and waited for only
    where a later step needs their bytes.

For the compiled runs it reports, from loom-run's summary of the same
runs, the plan's collectives per step, the ms per step they were in flight
(from each one's issue until a run found it done: runs look between steps,
so an upper bound) and the ms per step the rank waited for them; the share
hidden behind compute is 1 - waited / in flight. The wait includes waiting
for the other rank when it is slower.

It reports the median ms per step of steps 4.. (metrics' samples_per_sec),
and for the two-rank runs the all-reduce calls per step and the time each
step waited for them after its backward (loom-run's summary), and the
share of the no-bucket run's wait that buckets hid behind the backward.

  .venv/bin/python bench/dp_overlap.py [--steps 30] [--bucket-mb 25] [--repeats 2]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def run(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), proc.stdout,
                                               proc.stderr))
    return proc.stdout + proc.stderr


def ms_per_step(metrics, batch):
    rows = [json.loads(line) for line in open(metrics)]
    rates = [r["samples_per_sec"] for r in rows if r["step"] >= 4]
    return 1000.0 * batch / statistics.median(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--bucket-mb", default="25")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="loom-dp-")
    run([sys.executable, os.path.join(ROOT, "examples/charlm/make_data.py"),
         "--out-dir", work])
    art = os.path.join(work, "charlm.loom")
    run([os.path.join(args.tools, "loomc"),
         os.path.join(ROOT, "examples/charlm/charlm.onnx"), "--train",
         "--loss=cross_entropy", "--labels=labels", "--optimizer=adamw",
         "--lr=1e-3", "--clip-norm=1.0", "--target=cpu", "-o", art])
    compiled = {}
    for zero in (0, 1, 3):
        compiled[zero] = os.path.join(work, "charlm-dp2-z%d.loom" % zero)
        run([os.path.join(args.tools, "loomc"),
             os.path.join(ROOT, "examples/charlm/charlm.onnx"), "--train",
             "--loss=cross_entropy", "--labels=labels", "--optimizer=adamw",
             "--lr=1e-3", "--clip-norm=1.0", "--target=cpu", "--dp=2",
             "--zero=%d" % zero, "-o", compiled[zero]])
    loom_run = os.path.join(args.tools, "loom-run")
    data = os.path.join(work, "train.npz")
    common = [art, "--train", "--data", data, "--steps", str(args.steps),
              "--progress=lines"]
    runs = [
        ("1 process, 1 thread, --accumulate 2", None,
         ["--accumulate", "2", "--threads", "1"]),
        ("1 process, 2 threads, --accumulate 2", None,
         ["--accumulate", "2", "--threads", "2"]),
        ("2 ranks x 1 thread, --bucket-mb %s (during the backward)"
         % args.bucket_mb, 2, ["--threads", "1", "--bucket-mb", args.bucket_mb]),
        ("2 ranks x 1 thread, --bucket-mb 0 (after the backward)", 2,
         ["--threads", "1", "--bucket-mb", "0"]),
    ] + [("2 ranks x 1 thread, loomc --dp=2 --zero=%d" % z, 2,
          ["--threads", "1"], compiled[z]) for z in (0, 1, 3)]
    print("| run | ms per step | all-reduce calls per step | ms per step waited after the backward |")
    print("|---|---:|---:|---:|")
    waits = {}
    step_ms, hidden = {}, []
    for name, ranks, flags, *artifact in runs:
        times, reduce, flight = [], "-", []
        args_common = ([artifact[0]] + common[1:]) if artifact else common
        for r in range(args.repeats):
            metrics = os.path.join(work, "m%d.jsonl" % r)
            if os.path.exists(metrics):
                os.remove(metrics)
            cmd = [loom_run] + args_common + flags + ["--metrics", metrics]
            if ranks:
                cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
            out = run(cmd, MPI_ENV if ranks else None)
            times.append(ms_per_step(metrics, 64))
            p = re.search(r"plan collectives: (\d+) per step, (\S+) ms per "
                          r"step in flight, (\S+) ms waited for", out)
            if p:
                flight.append((int(p.group(1)), float(p.group(2)),
                               float(p.group(3))))
            m = re.search(r"gradient all-reduce: (\d+) call\(s\) per step, "
                          r"(\S+) ms per step waited", out)
            if m:
                reduce = m.group(1)
                waits.setdefault(name, []).append(float(m.group(2)))
        step_ms[name] = statistics.median(times)
        if flight:
            calls = flight[0][0]
            f = statistics.median(x[1] for x in flight)
            w = statistics.median(x[2] for x in flight)
            hidden.append((name, calls, f, w, 1 - w / f if f > 0 else 0))
        wait = waits.get(name)
        print("| %s | %s | %s | %s |" % (
            name, ", ".join("%.1f" % t for t in times), reduce,
            ", ".join("%.2f" % w for w in wait) if wait else "-"))
    with_b, without = [waits.get(runs[i][0]) for i in (2, 3)]
    if with_b and without:
        print("\nwait after the backward, buckets against none: %.0f%% hidden"
              % (100 * (1 - statistics.mean(with_b) / statistics.mean(without))))


    base = step_ms[runs[0][0]]
    print("\nsamples/s against 1 process x 1 thread (the same global batch):")
    for name, ms in step_ms.items():
        print("  %s: %.2fx" % (name, base / ms))
    if hidden:
        print("\nthe plans' collectives (medians over the runs):")
        print("| run | per step | ms per step in flight | ms per step waited for | hidden |")
        print("|---|---:|---:|---:|---:|")
        for name, calls, f, w, h in hidden:
            print("| %s | %d | %.1f | %.1f | %.0f%% |" % (name, calls, f, w, 100 * h))


if __name__ == "__main__":
    main()
