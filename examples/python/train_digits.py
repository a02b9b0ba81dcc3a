#!/usr/bin/env python3
"""Trains the digits MLP (examples/onnx/digits_mlp.onnx) from Python: the
README's demo as a script, with the loss curve in out/python-digits.png.

    bash scripts/build.sh
    PYTHONPATH=build/python .venv/bin/python examples/python/train_digits.py

Needs scikit-learn for the data (examples/data/make_digits.py; the .venv of
scripts/setup.sh has it); matplotlib, if installed, draws the curve.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "data"))

# --- the user's code -------------------------------------------------------
import loom
from make_digits import load

(x_train, y_train), (x_test, y_test) = load()
digits = loom.compile(os.path.join(ROOT, "examples/onnx/digits_mlp.onnx"),
                      loss="cross_entropy", optimizer="adamw", lr=1e-2,
                      schedule="cosine", total_steps=1000)
metrics = digits.train({"x": x_train, "labels": y_train}, steps=1000,
                       eval_data={"x": x_test, "labels": y_test}, eval_every=100)
accuracy = digits.evaluate({"x": x_test, "labels": y_test})["accuracy"]
print("held-out accuracy %.4f after %d steps" % (accuracy, digits.step))
# ---------------------------------------------------------------------------

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("(matplotlib is not installed: no plot)")
    sys.exit(0 if accuracy >= 0.97 else 1)
steps = [m["step"] for m in metrics if "loss" in m]
losses = [m["loss"] for m in metrics if "loss" in m]
evals = [m for m in metrics if "eval_loss" in m]
plt.plot(steps, losses, lw=0.5, label="training loss")
plt.plot([m["step"] for m in evals], [m["eval_loss"] for m in evals], "o-",
         label="held-out loss")
plt.xlabel("step")
plt.yscale("log")
plt.legend()
plt.title("digits_mlp trained by Loom from Python")
os.makedirs(os.path.join(ROOT, "out"), exist_ok=True)
plot = os.path.join(ROOT, "out", "python-digits.png")
plt.savefig(plot, dpi=100)
print("loss curve: %s" % plot)
sys.exit(0 if accuracy >= 0.97 else 1)
