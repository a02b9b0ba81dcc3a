#!/usr/bin/env python3
"""Plots a training run's loss curve (and eval accuracy) from a metrics file.

Usage:
  .venv/bin/python scripts/plot_loss.py METRICS.jsonl OUT.png [--title T]
      [--smooth N] [--log]

METRICS.jsonl holds one JSON object per line, as `loom-run --metrics` (or
examples/data/train_digits_reference.py --metrics) writes them. A line with
`step` and a training loss (`loss` or `train_loss`) is a training point; a
line with `step` and an eval metric (`eval_accuracy`, `eval_acc`,
`accuracy`, `eval_loss`; also inside a nested `"eval": {...}` object) is an
evaluation point. Other keys (samples/s, time) are ignored; lines that are
not JSON objects are skipped with a count. The loss goes on the left axis,
eval accuracy (when present) on the right; eval loss, when present, is drawn
beside the training loss. --smooth N adds an N-step moving average of the loss.

Uses matplotlib's Agg backend: works on a headless machine (no display).
"""
import argparse
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LOSS_KEYS = ("loss", "train_loss")
ACC_KEYS = ("eval_accuracy", "eval_acc", "accuracy", "acc", "test_accuracy")
EVAL_LOSS_KEYS = ("eval_loss", "test_loss")


def _flatten(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            out.update(_flatten(v, prefix + k + "_"))
        else:
            out[prefix + k] = v
    return out


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _first(rec, keys):
    for k in keys:
        if _num(rec.get(k)):
            return float(rec[k])
    return None


def read_metrics(path):
    """Returns (train [(step, loss)], eval_acc [(step, acc)],
    eval_loss [(step, loss)], skipped lines)."""
    train, acc, eval_loss, skipped = [], [], [], 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if not isinstance(rec, dict) or not _num(rec.get("step")):
                skipped += 1
                continue
            rec = _flatten(rec)
            step = rec["step"]
            is_eval = rec.get("kind") == "eval" or rec.get("type") == "eval" \
                or rec.get("phase") == "eval" or any(k.startswith("eval") for k in rec)
            a = _first(rec, ACC_KEYS)
            if a is not None:
                acc.append((step, a))
            # A plain `loss` is the training loss, unless the line is an
            # eval line with no key of its own for the eval loss.
            el = _first(rec, EVAL_LOSS_KEYS)
            loss = _first(rec, LOSS_KEYS)
            if el is None and is_eval:
                el, loss = loss, None
            if loss is not None:
                train.append((step, loss))
            if el is not None:
                eval_loss.append((step, el))
    return train, acc, eval_loss, skipped


def moving_average(values, n):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= n:
            total -= values[i - n]
        out.append(total / min(i + 1, n))
    return out


def plot(path, out, title=None, smooth=0, log=False):
    train, acc, eval_loss, skipped = read_metrics(path)
    if not train and not acc and not eval_loss:
        raise SystemExit("plot_loss: no training or eval points in %s" % path)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    handles = []
    if train:
        steps, losses = zip(*train)
        alpha = 0.35 if smooth > 1 else 1.0
        handles += ax.plot(steps, losses, color="tab:blue", lw=1, alpha=alpha,
                           label="train loss")
        if smooth > 1:
            handles += ax.plot(steps, moving_average(list(losses), smooth),
                               color="tab:blue", lw=1.8,
                               label="train loss (%d-step mean)" % smooth)
    if eval_loss:
        s, v = zip(*eval_loss)
        handles += ax.plot(s, v, "s-", color="tab:orange", ms=3, label="eval loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    if log:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if acc:
        ax2 = ax.twinx()
        s, v = zip(*acc)
        handles += ax2.plot(s, v, "o-", color="tab:green", ms=3, label="eval accuracy")
        ax2.set_ylabel("eval accuracy")
        ax2.set_ylim(min(0.0, min(v)), 1.0)
        best = max(v)
        ax2.axhline(best, color="tab:green", ls=":", lw=0.8)
        ax2.annotate("final %.4f" % v[-1], xy=(s[-1], v[-1]), xytext=(-60, -14),
                     textcoords="offset points", color="tab:green", fontsize=8)
    ax.legend(handles=handles, loc="center right", fontsize=8)
    ax.set_title(title or path)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return len(train), len(acc), len(eval_loss), skipped


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("out")
    ap.add_argument("--title")
    ap.add_argument("--smooth", type=int, default=0,
                    help="also draw an N-step moving average of the loss")
    ap.add_argument("--log", action="store_true", help="log-scale loss axis")
    args = ap.parse_args(argv)
    n_train, n_acc, n_eval_loss, skipped = plot(args.metrics, args.out, args.title,
                                                args.smooth, args.log)
    print("plot_loss: wrote %s (%d loss points, %d eval accuracy points, "
          "%d eval loss points%s)" % (args.out, n_train, n_acc, n_eval_loss,
                                      ", %d lines skipped" % skipped if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
