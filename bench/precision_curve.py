#!/usr/bin/env python3
"""Loss curves of one model trained in fp32 and in mixed precision.

Trains the character-level GPT of examples/charlm (transformers'
GPT2LMHeadModel, 4 layers, d 128, T 64, batch 32) with the demo's
hyper-parameters (AdamW, lr 5e-3, 50 warmup steps, cosine decay over STEPS,
clip 1.0) once per precision, same data, seed and initial weights, and
compares the curves: the largest relative difference of the 20-step means
of the training loss, and the held-out losses every 100 steps. fp32 is also
trained with another data order (loom-run --seed 1): how far two fp32 runs
drift apart is the yardstick for the others.

  .venv/bin/python bench/precision_curve.py [--steps 300] [--precisions fp32,bf16,fp16] [--seed 0]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), proc.stdout,
                                               proc.stderr))


def train(tools, work, precision, steps, seed=0):
    art = os.path.join(work, precision + ".loom")
    run([os.path.join(tools, "loomc"),
         os.path.join(ROOT, "examples/charlm/charlm.onnx"), "--train",
         "--loss=cross_entropy", "--labels=labels", "--optimizer=adamw",
         "--lr=5e-3", "--schedule=warmup-cosine", "--warmup-steps=50",
         "--total-steps=%d" % steps, "--clip-norm=1.0",
         "--precision=" + precision, "--target=cpu", "-o", art])
    metrics = os.path.join(work, "%s-%d.jsonl" % (precision, seed))
    run([os.path.join(tools, "loom-run"), art, "--train", "--seed", str(seed),
         "--data",
         os.path.join(work, "train.npz"), "--eval-data",
         os.path.join(work, "eval.npz"), "--eval-every", "100", "--steps",
         str(steps), "--batch-size", "32", "--metrics", metrics,
         "--progress=none"])
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    loss = [r["loss"] for r in rows if "loss" in r and "eval_loss" not in r]
    evals = [(r["step"], r["eval_loss"]) for r in rows if "eval_loss" in r]
    skipped = max([r.get("skipped_steps", 0) for r in rows] or [0])
    return np.array(loss, dtype=float), evals, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--precisions", default="fp32,bf16,fp16")
    ap.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--seed", type=int, default=0,
                    help="data order of every run (the yardstick: seed + 1)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="loom-precision-")
    run([args.python, os.path.join(ROOT, "examples/charlm/make_data.py"),
         "--out-dir", work])
    curves = {p: train(args.tools, work, p, args.steps, args.seed)
              for p in args.precisions.split(",")}
    # The yardstick: fp32 again with another data order (loom-run --seed).
    curves["fp32 seed %d" % (args.seed + 1)] = train(
        args.tools, work, "fp32", args.steps, args.seed + 1)
    base, base_evals, _ = curves["fp32"]
    windows = len(base) // 20
    mean = lambda c: c[:windows * 20].reshape(windows, 20).mean(axis=1)
    print("charlm, %d steps; 20-step means of the training loss and the "
          "held-out losses:" % args.steps)
    for p, (loss, evals, skipped) in curves.items():
        diff = np.abs(mean(loss) / mean(base) - 1)
        print("  %-11s final mean %.4f; max |rel diff| vs fp32 %.2f%% (window "
              "%d); held-out %s%s" % (
                  p, mean(loss)[-1], 100 * diff.max(), diff.argmax() + 1,
                  " / ".join("%.3f@%d" % (l, s) for s, l in evals),
                  "; %d steps skipped by loss scaling" % skipped
                  if skipped else ""))


if __name__ == "__main__":
    main()
