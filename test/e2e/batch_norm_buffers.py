#!/usr/bin/env python3
"""BatchNorm running statistics as buffers, through loomc and loom-run.

Model: test/Import/ONNX/Inputs/current/batch_norm_modes.onnx (three
BatchNormalization nodes in a row: `bn_train`, traced by PyTorch in training
mode; `bn_eval`, in eval mode; `bn_tm`, training_mode=1). Trained with MSE
and SGD on a fixed batch, then checked against NumPy:
  1. `bn_train`'s input is the data itself, so its running statistics after
     k steps are known in closed form, whatever the parameters do:
     mean_k = 0.9^k mean_0 + (1 - 0.9^k) batch_mean, the same for the
     variance with the unbiased batch variance (PyTorch's rule);
  2. `bn_eval`'s statistics are constants (no buffer, not in the files);
  3. the model file (`--save-params`) holds the params and the four
     buffers, and no optimizer state;
  4. training 3 steps, then resuming from the checkpoint to 6, gives the
     same buffers, bit for bit, as 6 steps at once (checkpoints keep them);
  5. `--entry=predict` with the trained file equals NumPy's inference-mode
     batch norm with those params and running statistics.
Prints one line per check; exit status 0 when all pass.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiled_vs_interp import read_safetensors, run  # noqa: E402

EPS = np.float32(1e-5)


def bn(x, w, b, m, v):
    c = (1, -1, 1, 1)
    return ((x - m.reshape(c)) / np.sqrt(v.reshape(c) + EPS) * w.reshape(c)
            + b.reshape(c))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--loom-run", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    d = args.workdir
    failures = []

    def check(what, ok, detail=""):
        print("%-4s %s %s" % ("ok" if ok else "FAIL", what, detail))
        if not ok:
            failures.append(what)

    art = os.path.join(d, "bn.loom")
    run([args.loomc, args.model, "--train", "--loss=mse", "--optimizer=sgd",
         "--lr=0.1", "--target=cpu", "-o", art])
    plan = open(os.path.join(art, "plan.json")).read()
    check("plan: the running statistics are buffer inputs",
          plan.count('"kind": "buffer"') > 0 or plan.count('"kind":"buffer"') > 0)

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 4, 4)) * 2 + 1).astype(np.float32)
    labels = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    data = os.path.join(d, "data.npz")
    np.savez(data, x=x, labels=labels)
    init = read_safetensors(os.path.join(art, "params.safetensors"))

    def train(steps, tag, extra=()):
        out = os.path.join(d, tag + ".safetensors")
        run([args.loom_run, art, "--train", "--data", data, "--steps",
             str(steps), "--progress=none", "--save-params", out,
             "--checkpoint-dir", os.path.join(d, "ckpt-" + tag)] + list(extra))
        return read_safetensors(out), out

    six, six_path = train(6, "six")
    names = sorted(six)
    buffers = [k for k in names if "running" in k]
    check("model file: params and the 4 buffers, no optimizer state",
          buffers == ["bn_tm.running_mean", "bn_tm.running_var",
                      "bn_train.running_mean", "bn_train.running_var"] and
          not any("momentum" in k or "adam" in k for k in names),
          str(names))
    check("bn_eval's statistics are constants",
          not any(k.startswith("bn_eval.running") for k in names))

    n = x.size // x.shape[1]
    mean = x.mean(axis=(0, 2, 3), dtype=np.float64)
    var = x.var(axis=(0, 2, 3), dtype=np.float64) * n / (n - 1)
    keep = 0.9 ** 6
    want_m = keep * init["bn_train.running_mean"] + (1 - keep) * mean
    want_v = keep * init["bn_train.running_var"] + (1 - keep) * var
    err = max(np.abs(six["bn_train.running_mean"] - want_m).max(),
              np.abs(six["bn_train.running_var"] - want_v).max())
    check("bn_train's running statistics after 6 steps (closed form)",
          err < 1e-5, "max abs err %.2e" % err)
    moved = np.abs(six["bn_tm.running_mean"] -
                   init["bn_tm.running_mean"]).max()
    check("bn_tm's running statistics moved", moved > 1e-3,
          "by %.3g" % moved)

    train(3, "three")
    resumed, _ = train(6, "three_resumed",
                       ["--resume", os.path.join(d, "ckpt-three")])
    same = all(np.array_equal(resumed[k], six[k]) for k in names)
    check("3 steps + resume to 6 == 6 steps (params and buffers)", same)

    np.save(os.path.join(d, "x.npy"), x)
    out = os.path.join(d, "predict")
    run([args.loom_run, art, "--entry=predict", "--params", six_path,
         "--input", "x=" + os.path.join(d, "x.npy"), "--output-dir", out])
    got = np.load(os.path.join(out, "y.npy"))
    p = six
    h = bn(x, p["bn_train.weight"], p["bn_train.bias"],
           p["bn_train.running_mean"], p["bn_train.running_var"])
    h = bn(h, p["bn_eval.weight"], p["bn_eval.bias"],
           np.full(3, 0.2, np.float32), np.full(3, 2.0, np.float32))
    want = bn(h, p["bn_tm.weight"], p["bn_tm.bias"],
              p["bn_tm.running_mean"], p["bn_tm.running_var"])
    err = float(np.abs(got - want).max() / np.abs(want).max())
    check("predict uses the trained running statistics", err < 1e-5,
          "rel err %.2e" % err)

    print("%d checks failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
