#!/usr/bin/env python3
"""fp16 training survives an injected overflow (dynamic loss scaling).

Compiles a model with `loomc --train --precision=fp16` and trains it with
loom-run in three legs that resume from each other's checkpoints:

  1. clean data, 3 steps;
  2. one step (step 4) on data holding a value beyond fp16's range (1e6 >
     65504), which makes the forward's fp16 GEMM overflow: the step must be
     skipped (parameters and optimizer state bit for bit those of the
     checkpoint before it), the scale must halve and `good_steps` restart;
  3. clean data again, steps 5 to 4 + 2 * GROWTH: every update applied, the
     scale doubling after every GROWTH good steps in a row, the parameters
     finite and moving.

The scale each step should use is simulated here with PyTorch GradScaler's
rules (halve on a skip, double after GROWTH good steps), not read from Loom. Prints one line per check; exit status 1 on any failure.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

from compiled_vs_interp import read_safetensors

INIT = 65536.0
GROWTH = 2  # --loss-scale-growth-interval
OVERFLOW_STEP = 4
LAST = OVERFLOW_STEP + 2 * GROWTH


def expected_scales():
    """GradScaler: the scale each step uses, and the state after the last."""
    scale, good, used = INIT, 0, {}
    for step in range(1, LAST + 1):
        used[step] = scale
        if step == OVERFLOW_STEP:
            scale, good = scale * 0.5, 0
        else:
            good += 1
            if good == GROWTH:
                scale, good = scale * 2, 0
    return used, scale, good


def run(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (
            proc.returncode, " ".join(cmd), proc.stdout, proc.stderr))
    return proc.stdout + proc.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--loom-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--target-flags", default="")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    art = os.path.join(args.work, "fp16.loom")
    run([args.loomc, args.model, "--train", "--loss=cross_entropy",
         "--optimizer=adamw", "--precision=fp16",
         "--loss-scale-growth-interval=%d" % GROWTH,
         "--target=" + args.target, "-o", art] + args.target_flags.split())
    plan = json.load(open(os.path.join(art, "plan.json")))
    entry = next(e for e in plan["entries"] if e["name"] == "train_step")
    data_inputs = [(b["name"], entry["buffers"][b["buffer"]])
                   for b in entry["inputs"]
                   if b["kind"] == "input" and b["name"] not in ("step", "seed")]
    rng = np.random.default_rng(0)
    clean = {}
    for name, buf in data_inputs:
        shape = [4 * buf["shape"][0]] + buf["shape"][1:]  # four batches
        if buf["dtype"] == "i64":
            clean[name] = rng.integers(0, 10, shape).astype(np.int64)
        else:
            clean[name] = rng.standard_normal(shape).astype(np.float32)
    bad = {k: v.copy() for k, v in clean.items()}
    x = next(name for name, buf in data_inputs if buf["dtype"] == "f32")
    bad[x].reshape(bad[x].shape[0], -1)[:, 0] = 1e6  # every sample overflows
    np.savez(os.path.join(args.work, "clean.npz"), **clean)
    np.savez(os.path.join(args.work, "bad.npz"), **bad)

    ck = os.path.join(args.work, "ckpt")
    metrics = os.path.join(args.work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)

    def leg(data, steps, resume):
        cmd = [args.loom_run, art, "--train", "--data",
               os.path.join(args.work, data), "--steps", str(steps),
               "--checkpoint-dir", ck, "--save-every", "1",
               "--keep-checkpoints", "0",
               "--metrics", metrics, "--progress=none"]
        if resume:
            cmd += ["--resume", ck]
        return run(cmd)

    failures = []

    def check(ok, what):
        print("%-4s %s" % ("ok" if ok else "FAIL", what))
        if not ok:
            failures.append(what)

    def ckpt(step):
        return read_safetensors(os.path.join(ck, "ckpt-%08d.safetensors" % step))

    leg("clean.npz", OVERFLOW_STEP - 1, False)
    leg("bad.npz", OVERFLOW_STEP, True)
    leg("clean.npz", LAST, True)
    lines = [json.loads(l) for l in open(metrics)]
    by_step = {l["step"]: l for l in lines if "loss_scale" in l}
    used, final_scale, final_good = expected_scales()

    for s in range(1, LAST + 1):
        m = by_step[s]
        overflow = s == OVERFLOW_STEP
        check(m["skipped"] == overflow and m["loss_scale"] == used[s] and
              m["skipped_steps"] == (1 if s >= OVERFLOW_STEP else 0) and
              (overflow or np.isfinite(m["loss"])),
              "step %d (%s): %s at scale %g (expected %g), loss %s" % (
                  s, "overflow" if overflow else "clean",
                  "skipped" if m["skipped"] else "applied", m["loss_scale"],
                  used[s], m["loss"]))
    before, after = ckpt(OVERFLOW_STEP - 1), ckpt(OVERFLOW_STEP)
    kept = [k for k in before if not k.startswith("loss_scale") and k != "step"]
    same = all(np.array_equal(before[k], after[k]) for k in kept)
    check(same, "the overflow step kept all %d parameter and optimizer "
          "tensors bit for bit" % len(kept))
    check(float(after["loss_scale"]) == used[OVERFLOW_STEP] / 2 and
          int(after["loss_scale.good_steps"]) == 0 and
          int(after["loss_scale.skipped"]) == 1,
          "after it: scale %g (halved), good_steps %d, skipped %d" % (
              float(after["loss_scale"]), int(after["loss_scale.good_steps"]),
              int(after["loss_scale.skipped"])))
    final = ckpt(LAST)
    check(float(final["loss_scale"]) == final_scale and
          int(final["loss_scale.good_steps"]) == final_good,
          "after step %d: scale %g, good_steps %d (expected %g, %d)" % (
              LAST, float(final["loss_scale"]),
              int(final["loss_scale.good_steps"]), final_scale, final_good))
    moved = any(not np.array_equal(after[k], final[k]) for k in kept)
    finite = all(np.all(np.isfinite(final[k])) for k in kept)
    check(moved and finite, "training went on: parameters moved and finite")
    print("%d checks failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
