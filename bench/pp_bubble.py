#!/usr/bin/env python3
"""Pipeline parallelism on the CPU: the bubble of each schedule, measured.

Writes a deep MLP in Loom's JSON format (LAYERS tanh layers of WIDTH,
batch 32, 10 classes: enough work per stage, milliseconds, that message
latency does not dominate), compiles it with `loomc --pp=P` for each
schedule (gpipe, 1f1b, interleaved with 2 stages per rank, zb-h1) and
trains STEPS steps of M micro-batches under `mpirun -np P`, one thread per
rank. From loom-run's metrics (per-action timestamps, `--pp-trace`'s
source) it reports per schedule:

  - the bubble: the idle share of each rank's step, 1 - (time in F, B, I,
    W) / (the rank's step), averaged over the ranks and the steps after
    the first, next to the schedule's ideal idle share (docs/pipeline.md:
    (P-1)/(M+P-1) for gpipe and 1f1b, (P-1)/(VM+P-1) interleaved,
    (P-1)/(3M+P-1) zb-h1) and the ratio idle/busy the issue's formulas
    give ((p-1)/m, (p-1)/(vm), (p-1)/(3m));
  - the peak activation memory per stage: the most bytes of stage inputs
    kept for the backward at once, and the micro-batches in flight (1f1b
    keeps at most P - r, gpipe M);
  - ms per step (the median of the steps after the first, from the
    metrics' samples_per_sec).

The ideal assumes B = 2F; here a stage's backward also recomputes its
forward (activations are checkpointed at stage boundaries), so B is about
3F, and zb-h1's two halves each recompute it: the measured bubbles are
not expected to equal the ideal ones.

  python bench/pp_bubble.py [--pp 2] [--microbatches 8] [--steps 6]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV)
    if r.returncode:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout + r.stderr


def deep_mlp(layers, width):
    nodes, params = [], []
    prev = "x"
    bound = 1.0 / width ** 0.5
    for i in range(layers):
        params.append({"name": f"l{i}.weight", "shape": [width, width], "dtype": "f32",
                       "init": {"uniform": {"low": -bound, "high": bound}}})
        nodes.append({"id": f"l{i}", "op": "matmul", "inputs": [prev, f"l{i}.weight"]})
        nodes.append({"id": f"l{i}.tanh", "op": "tanh", "inputs": [f"l{i}"]})
        prev = f"l{i}.tanh"
    params.append({"name": "head.weight", "shape": [width, 10], "dtype": "f32",
                   "init": {"uniform": {"low": -bound, "high": bound}}})
    nodes.append({"id": "head", "op": "matmul", "inputs": [prev, "head.weight"]})
    return {"format": "loom-graph", "version": 1, "name": "deep_mlp", "seed": 0,
            "inputs": [{"name": "x", "shape": [32, width], "dtype": "f32"}],
            "parameters": params, "nodes": nodes, "outputs": ["head"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="loom-pp-")
    model = os.path.join(work, "mlp.json")
    json.dump(deep_mlp(args.layers, args.width), open(model, "w"))
    loomc, loom_run = os.path.join(args.tools, "loomc"), os.path.join(args.tools, "loom-run")
    train = ["--train", "--loss=cross_entropy", "--optimizer=sgd", "--target=cpu"]
    plain = os.path.join(work, "plain.loom")
    run([loomc, model] + train + ["-o", plain])
    run([sys.executable, os.path.join(ROOT, "test/e2e/make_batches.py"), plain,
         os.path.join(work, "data.npz"), "--batches", "8", "--int-high", "10"])
    P, M = args.pp, args.microbatches
    print(f"deep MLP {args.layers} x {args.width}, batch 32, {P} ranks x 1 thread, "
          f"{M} micro-batches, {args.steps} steps")
    print("| schedule | V | ideal idle share | measured (mean of ranks) | per rank | "
          "issue's idle/busy | measured idle/busy | peak stash per stage (micro-batches in flight) | ms/step |")
    print("|---|---:|---:|---:|---|---:|---:|---|---:|")
    for schedule, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)):
        art = os.path.join(work, f"{schedule}.loom")
        run([loomc, model] + train + [f"--pp={P}", f"--pp-schedule={schedule}",
                                      f"--virtual-stages={v}", f"--microbatches={M}", "-o", art])
        metrics = os.path.join(work, f"{schedule}.jsonl")
        run(["mpirun", "--oversubscribe", "-np", str(P), loom_run, art, "--train",
             "--data", os.path.join(work, "data.npz"), "--steps", str(args.steps),
             "--threads", "1", "--quiet", "--metrics", metrics])
        lines = [json.loads(l) for l in open(metrics)]
        pipe = [l["pipeline"] for l in lines if "pipeline" in l][-1]
        times = [32 * M / l["samples_per_sec"] for l in lines if l.get("samples_per_sec")]
        bubbles = [r["bubble"] for r in pipe["per_rank"]]
        mean = sum(bubbles) / len(bubbles)
        ideal = pipe["ideal_bubble"]
        issue = {"interleaved": (P - 1) / (v * M), "zb-h1": (P - 1) / (3 * M)}.get(schedule, (P - 1) / M)
        stash = "; ".join(
            f"s{s['stage']} {s['peak_stash_bytes'] / 1024:.0f} KiB ({s['peak_in_flight']})"
            for r in pipe["per_rank"] for s in r["stages"])
        ms = 1000 * sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else float("nan")
        print(f"| {schedule} | {v} | {ideal:.3f} | {mean:.3f} | {' '.join(f'{b:.3f}' for b in bubbles)} | "
              f"{issue:.3f} | {mean / (1 - mean):.3f} | {stash} | {ms:.1f} |")


if __name__ == "__main__":
    main()
