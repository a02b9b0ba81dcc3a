#!/usr/bin/env python3
"""Trains the digits MLP (examples/onnx/digits_mlp.onnx) from Python: the
README's demo as a script, with the loss curve in out/python-digits.png.

    bash scripts/build.sh
    PYTHONPATH=build/python .venv/bin/python examples/python/train_digits.py

Needs scikit-learn for the data (examples/data/make_digits.py; the .venv of
scripts/setup.sh has it); matplotlib, if installed, draws the curve. Exits 1
if the held-out accuracy is under 97% (the README demo's bar).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "data"))
MODEL = os.path.join(ROOT, "examples", "onnx", "digits_mlp.onnx")
PLOT = os.path.join(ROOT, "out", "python-digits.png")
os.makedirs(os.path.dirname(PLOT), exist_ok=True)

# --- the user's code: 15 lines ---------------------------------------------
import loom
from make_digits import load

(x, y), (x_test, y_test) = load()
test = {"x": x_test, "labels": y_test}
digits = loom.compile(MODEL, loss="cross_entropy", optimizer="adamw", lr=1e-2,
                      schedule="cosine", total_steps=1000)
metrics = digits.train({"x": x, "labels": y}, steps=1000, eval_data=test,
                       eval_every=100)
print("held-out accuracy %.4f" % digits.evaluate(test)["accuracy"])
try:
    import matplotlib.pyplot as plt
    plt.semilogy(*zip(*[(m["step"], m["loss"]) for m in metrics if "loss" in m]))
    plt.savefig(PLOT)
except ImportError:
    print("matplotlib is not installed: no plot")
# ---------------------------------------------------------------------------

final = [m for m in metrics if "eval_accuracy" in m][-1]
print("after %d steps; loss curve: %s" % (final["step"], PLOT))
sys.exit(0 if final["eval_accuracy"] >= 0.97 else 1)
