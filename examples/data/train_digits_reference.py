#!/usr/bin/env python3
"""Trains examples/onnx/digits_mlp.onnx on the digits data in JAX: the
reference that Loom's digits demo is measured against.

The ONNX graph is evaluated by the JAX evaluator of test/e2e/train_vs_jax.py
(imported, not copied), starting from the ONNX initializers; the loss is mean
softmax cross-entropy and the update is PyTorch's AdamW rule (same file), as
`loomc --train --loss=cross_entropy --optimizer=adamw` builds them. Batches are
the model's static batch (32); each epoch visits the training set in a fresh
random order (--order shuffle, seed --seed) or in file order, wrapping around
(--order sequential). Held-out accuracy is over the whole test file (with
--full-batches, over its whole batches only, as loom-run evaluates).

Usage:
  .venv/bin/python examples/data/train_digits_reference.py \
      [--data-dir out/data] [--lr 1e-2] [--steps 500] [--weight-decay 0]
      [--schedule constant|cosine] [--eval-every 100] [--seeds 0,1,2]
      [--order shuffle|sequential] [--full-batches]
      [--metrics FILE.jsonl]

Prints one line per evaluation and, with several seeds, the final test
accuracy of each and their minimum. --metrics writes loom-run-style JSON
lines (step, loss; eval lines with eval_accuracy) for scripts/plot_loss.py.
Exit status 1 when a seed ends below --min-accuracy (default 0.97).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from train_vs_jax import adamw, cross_entropy, evaluate  # noqa: E402


def batches(n, batch, order, rng):
    """Yields index arrays of BATCH samples forever."""
    if order == "sequential":
        pos = 0
        while True:
            yield np.arange(pos, pos + batch) % n
            pos = (pos + batch) % n
    while True:
        perm = rng.permutation(n)
        for i in range(0, n - batch + 1, batch):  # drop the ragged tail
            yield perm[i:i + batch]


def train(model, data, args, seed, metrics=None):
    (x_tr, y_tr), (x_te, y_te) = data
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    batch = model.graph.input[0].type.tensor_type.shape.dim[0].dim_value
    in_name = model.graph.input[0].name

    def logits_fn(p, x):
        return evaluate(model, {**p, in_name: x})[0]

    def loss_fn(p, x, y):
        return cross_entropy(logits_fn(p, x), y)

    @jax.jit
    def step_fn(p, s, step, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        lr = args.lr
        if args.schedule == "cosine":  # loom-optimizer's cosine, to lr 0
            lr = lr * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(step / args.steps, 1.0)))
        p, s = adamw(p, g, s, step, lr, 0.9, 0.999, 1e-8, args.weight_decay)
        return loss, p, s

    @jax.jit
    def accuracy(p, x, y):
        return jnp.mean(jnp.argmax(logits_fn(p, x), axis=-1) == y)

    p = {k: jnp.asarray(v) for k, v in inits.items()}
    s = {k: (jnp.zeros_like(v), jnp.zeros_like(v)) for k, v in p.items()}
    it = batches(len(x_tr), batch, args.order, np.random.default_rng(seed))
    acc = None
    t0 = time.perf_counter()
    for step in range(args.steps):
        idx = next(it)
        loss, p, s = step_fn(p, s, jnp.asarray(step, jnp.float32),
                             x_tr[idx], y_tr[idx])
        if metrics is not None:
            metrics.write(json.dumps({"step": step + 1, "loss": float(loss)}) + "\n")
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            acc = float(accuracy(p, x_te, y_te))
            train_acc = float(accuracy(p, x_tr, y_tr))
            if metrics is not None:
                metrics.write(json.dumps({"step": step + 1, "eval_accuracy": acc}) + "\n")
            if not args.quiet:
                print("seed %d step %4d  loss %.4f  train acc %.4f  test acc %.4f"
                      % (seed, step + 1, float(loss), train_acc, acc))
    return acc, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "examples", "onnx",
                                                    "digits_mlp.onnx"))
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "out", "data"),
                    help="folder of digits_{train,test}.npz (made by "
                         "make_digits.py when missing)")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--schedule", choices=["constant", "cosine"], default="constant",
                    help="cosine: lr decays to 0 over --steps (loomc "
                         "--schedule=cosine --total-steps=STEPS)")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--order", choices=["shuffle", "sequential"], default="shuffle")
    ap.add_argument("--metrics", help="JSON-lines file (first seed only)")
    ap.add_argument("--min-accuracy", type=float, default=0.97)
    ap.add_argument("--full-batches", action="store_true",
                    help="evaluate on whole batches only (the first 352 of the "
                         "360 test images), as loom-run --eval-data does")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    train_f = os.path.join(args.data_dir, "digits_train.npz")
    test_f = os.path.join(args.data_dir, "digits_test.npz")
    if not (os.path.exists(train_f) and os.path.exists(test_f)):
        sys.path.insert(0, HERE)
        import make_digits
        make_digits.main(["--out-dir", args.data_dir])
    tr, te = np.load(train_f), np.load(test_f)
    model = onnx.load(args.model)
    x_te, y_te = te["x"], te["labels"]
    if args.full_batches:
        batch = model.graph.input[0].type.tensor_type.shape.dim[0].dim_value
        keep = len(y_te) // batch * batch
        x_te, y_te = x_te[:keep], y_te[:keep]
    data = ((tr["x"], tr["labels"]), (x_te, y_te))

    accs = []
    for i, seed in enumerate(int(s) for s in args.seeds.split(",")):
        metrics = open(args.metrics, "w") if args.metrics and i == 0 else None
        acc, secs = train(model, data, args, seed, metrics)
        if metrics:
            metrics.close()
        accs.append(acc)
        print("seed %d: final test accuracy %.4f (%d steps, lr %g %s, wd %g, %s, %.1f s)"
              % (seed, acc, args.steps, args.lr, args.schedule, args.weight_decay,
                 args.order, secs))
    if len(accs) > 1:
        print("min %.4f  mean %.4f  max %.4f over %d seeds"
              % (min(accs), float(np.mean(accs)), max(accs), len(accs)))
    return 0 if min(accs) >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
