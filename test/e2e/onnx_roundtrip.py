#!/usr/bin/env python3
"""Trained models go back to ONNX and run elsewhere: onnxruntime.

For each model: `loomc --train --target=cpu`, then `loom-run --train` for a
few AdamW steps on one batch with `--save-params` and `--export-onnx`; the
exported model (the source ONNX with its initializers replaced by the
trained parameters) is run by onnxruntime (from PyPI, independent of Loom)
on the same batch, and its logits are compared with what `loom-run
--entry=predict --params TRAINED` gives (max abs error relative to the
largest logit <= --rtol). Also checks that training moved the parameters
(the exported logits differ from the untrained model's), so the comparison
cannot pass by exporting the initial weights.
Exit status 0 when every model agrees.
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiled_vs_interp import run  # noqa: E402


ort.set_default_logger_severity(3)  # errors only


def rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def check(args, path, work):
    name = os.path.splitext(os.path.basename(path))[0]
    ref = np.load(os.path.splitext(path)[0] + ".npz")
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    art = os.path.join(d, "train.loom")
    run([args.loomc, path, "--train", "--loss=cross_entropy",
         "--optimizer=adamw", "--lr=1e-3", "--target=cpu", "-o", art])
    batch = {k[3:]: ref[k] for k in ref.files if k.startswith("in.")}
    data = os.path.join(d, "batch.npz")
    np.savez(data, labels=ref["labels"], **batch)
    trained = os.path.join(d, "trained.safetensors")
    exported = os.path.join(d, "trained.onnx")
    run([args.loom_run, art, "--train", "--data", data, "--steps",
         str(args.steps), "--save-params", trained, "--export-onnx", exported,
         "--progress=none"])
    onnx.checker.check_model(exported)

    feed = []
    for k, v in batch.items():
        f = os.path.join(d, "in_%s.npy" % k)
        np.save(f, v)
        feed += ["--input", "%s=%s" % (k, f)]
    out = os.path.join(d, "predict")
    run([args.loom_run, art, "--entry=predict", "--params", trained,
         "--output-dir", out] + feed)
    loom = np.load(os.path.join(out, "logits.npy"))

    def ort_logits(model_path):
        sess = ort.InferenceSession(model_path,
                                    providers=["CPUExecutionProvider"])
        return sess.run(["logits"], batch)[0]

    got = ort_logits(exported)
    before = ort_logits(path)
    err, moved = rel(got, loom), rel(before, loom)
    ok = err <= args.rtol and moved > 100 * args.rtol
    print("%-4s %-20s onnxruntime vs loom-run predict: rel err %.2e "
          "(untrained model differs by %.2e)" %
          ("ok" if ok else "FAIL", name, err, moved))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--loom-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    failed = 0
    for m in args.models:
        try:
            failed += not check(args, m, args.workdir)
        except RuntimeError as e:
            failed += 1
            print("FAIL %s: %s" % (os.path.basename(m), e))
    print("%d models, %d failed" % (len(args.models), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
