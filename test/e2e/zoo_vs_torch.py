#!/usr/bin/env python3
"""Loom against PyTorch on models exported by PyTorch's default exporter.

For each model of the zoo (test/e2e/zoo/NAME.onnx, written by
utils/export_zoo.py from torchvision's and transformers' classes with random
weights), NAME.npz holds PyTorch's own numbers for one fixed batch: the loss,
the gradient of every parameter (keyed by its ONNX initializer name), and the
loss before each of 20 AdamW steps. PyTorch is not needed here: it is too
heavy for CI, so its numbers are checked in with the models.

Loom compiles the model with `loomc --train --loss=cross_entropy
--optimizer=adamw` (lr and weight decay as PyTorch used), then:
  1. the reference interpreter (`loom-interp`, @forward_backward) and the
     compiled CPU artifact (`loom-run --entry=forward_backward`) each give
     the loss and every gradient, compared with PyTorch's (norm-wise
     relative error <= --rtol; see `floor` for gradients that are exactly
     zero);
  2. `loom-run --train` takes the 20 steps on a data set of that one batch;
     its losses are compared with PyTorch's trajectory (each step's loss
     within --traj-rtol, relative; --traj-rtol 0 prints them without a
     check, for a model whose trajectory PyTorch itself does not reproduce
     in another precision).
For a model exported in training mode (the .npz holds `buffer.*`), the
BatchNorm running statistics are checked too: after one forward_backward
(its buffer outputs) and after the 20 steps (`--save-params`), against
PyTorch's.
Exit status 0 when everything agrees; one line per comparison, a summary
line per model.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiled_vs_interp import read_safetensors, run  # noqa: E402


def fname(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def norm_rel(got, want, floor=1e-30):
    """||got - want|| / ||want||; `floor` bounds the denominator from below."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.linalg.norm(got - want) /
                 max(np.linalg.norm(want), floor))


def check_model(args, path, work):
    name = os.path.splitext(os.path.basename(path))[0]
    ref = np.load(os.path.splitext(path)[0] + ".npz")
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    lr, wd = float(ref["meta.lr"]), float(ref["meta.weight_decay"])
    flags = ["--train", "--loss=cross_entropy", "--optimizer=adamw",
             "--lr=%r" % lr, "--weight-decay=%r" % wd]
    ir = os.path.join(d, "train.mlir")
    art = os.path.join(d, "train.loom")
    run([args.loomc, path] + flags + ["-o", ir])
    run([args.loomc, path] + flags + ["--target=cpu", "-o", art])

    batch = {k[3:]: ref[k] for k in ref.files if k.startswith("in.")}
    batch["labels"] = ref["labels"]
    feed = []
    for k, v in batch.items():
        f = os.path.join(d, "in_%s.npy" % fname(k))
        np.save(f, v)
        feed += ["--input", "%s=%s" % (k, f)]
    grads = {k[5:]: ref[k] for k in ref.files if k.startswith("grad.")}
    # A gradient that is exactly zero in exact arithmetic (BERT's key bias:
    # softmax ignores a shift shared by a row) is f32 rounding noise in any
    # implementation, ~1e-12 here; relative to itself it is not comparable.
    # Its error is taken relative to 1e-6 of the whole gradient's norm.
    floor = 1e-6 * np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64)))
                               for g in grads.values()))

    failures = []

    def check_buffers(what, ref, prefix, path_of, tensors=None):
        """The worst buffer of `ref` (keys `prefix` + name) against Loom's:
        `tensors[name]`, else the .npy file at path_of(name)."""
        keys = [k[len(prefix):] for k in ref.files if k.startswith(prefix)]
        if not keys:
            return
        worst = 0.0
        for k in keys:
            if tensors is not None:
                got = tensors.get(k)
            else:
                f = path_of(k)
                got = np.load(f) if os.path.exists(f) else None
            if got is None:
                failures.append("%s %s: no value for buffer %s" %
                                (name, what, k))
                continue
            worst = max(worst, norm_rel(got, ref[prefix + k]))
        check("%s (%d buffers, worst)" % (what, len(keys)), worst, args.rtol)

    def check(what, err, tol):
        ok = err <= tol
        print("%-4s %-18s %-58s rel err %.2e" % ("ok" if ok else "FAIL", name,
                                                 what[:58], err))
        if not ok:
            failures.append("%s %s: rel err %.3g > %g" % (name, what, err, tol))
        return err

    for how in ("interp", "compiled"):
        out = os.path.join(d, "fb_" + how)
        if how == "interp":
            run([args.interp, ir, "--entry=forward_backward",
                 "--output-dir", out] + feed)
        else:
            run([args.loom_run, art, "--entry=forward_backward",
                 "--output-dir", out] + feed)
        check("%s loss" % how, norm_rel(np.load(os.path.join(out, "loss.npy")),
                                        ref["loss0"]), args.rtol)
        worst = 0.0
        for k, want in grads.items():
            f = os.path.join(out, fname(k) + ".npy")
            if not os.path.exists(f):
                failures.append("%s %s: no gradient for parameter %s" %
                                (name, how, k))
                continue
            err = norm_rel(np.load(f), want, floor)
            worst = max(worst, err)
            if err > args.rtol or args.verbose:
                check("%s grad %s" % (how, k), err, args.rtol)
        print("     %-18s %s: %d gradients, worst rel err %.2e" %
              (name, how, len(grads), worst))
        check_buffers("%s running stats, 1 step" % how, ref, "buffer1.",
                      lambda k: os.path.join(out, fname(k) + ".npy"))

    data = os.path.join(d, "one_batch.npz")
    np.savez(data, **batch)
    metrics = os.path.join(d, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    want = ref["losses"]
    saved = os.path.join(d, "trained.safetensors")
    run([args.loom_run, art, "--train", "--data", data, "--steps",
         str(len(want)), "--metrics", metrics, "--progress=none",
         "--save-params", saved])
    got = [json.loads(l)["loss"] for l in open(metrics)
           if '"loss"' in l and '"eval' not in l][:len(want)]
    errs = [abs(g - w) / abs(w) for g, w in zip(got, want)]
    if len(got) != len(want):
        failures.append("%s trajectory: %d losses, want %d" %
                        (name, len(got), len(want)))
    elif args.traj_rtol > 0:
        check("trajectory (%d AdamW steps, worst step)" % len(want),
              max(errs), args.traj_rtol)
    check_buffers("running stats after %d steps" % len(want), ref, "buffer.",
                  None, read_safetensors(saved))
    print("     %-18s losses loom  %s" % (name, np.round(got, 4).tolist()))
    print("     %-18s losses torch %s" % (name, np.round(np.asarray(want, np.float64), 4).tolist()))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="zoo .onnx files (.npz beside)")
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--interp", required=True)
    ap.add_argument("--loom-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol", type=float, default=2e-3)
    ap.add_argument("--traj-rtol", type=float, default=2e-3)
    ap.add_argument("--verbose", action="store_true",
                    help="print every gradient, not only failures")
    args = ap.parse_args()
    failures = []
    for m in args.models:
        try:
            failures += check_model(args, m, args.workdir)
        except RuntimeError as e:
            failures.append("%s: %s" % (os.path.basename(m), e))
            print("FAIL %s: %s" % (os.path.basename(m), e))
    for f in failures:
        print("FAIL", f)
    print("%d models, %d failures" % (len(args.models), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
