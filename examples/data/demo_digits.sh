#!/usr/bin/env bash
# Trains examples/onnx/digits_mlp.onnx on the digits data with Loom and checks
# the held-out accuracy: make the data, compile, train with evaluation, plot.
# Usage: examples/data/demo_digits.sh [OUT_DIR]   (default out/digits)
# Needs build/bin/{loomc,loom-run} and the .venv of scripts/setup.sh.
# LOOMC_FLAGS adds loomc flags (e.g. --precision=bf16).
# Hyper-parameters: those of examples/data/README.md (AdamW, lr 1e-2, cosine
# decay to 0 over 1000 steps of batch 32), which reach >= 97% in JAX too.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$ROOT/out/digits}"
PY="${LOOM_VENV:-$ROOT/.venv}/bin/python"
BIN="${LOOM_BIN:-$ROOT/build/bin}"
STEPS=1000
MIN_ACCURACY=0.97

mkdir -p "$OUT"
"$PY" "$ROOT/examples/data/make_digits.py" --out-dir "$OUT"
rm -rf "$OUT/digits.loom" "$OUT/metrics.jsonl"
"$BIN/loomc" "$ROOT/examples/onnx/digits_mlp.onnx" --train --loss=cross_entropy \
  --labels=labels --optimizer=adamw --lr=1e-2 --schedule=cosine \
  --total-steps=$STEPS --target=cpu ${LOOMC_FLAGS:-} -o "$OUT/digits.loom"
"$BIN/loom-run" "$OUT/digits.loom" --train --data "$OUT/digits_train.npz" \
  --eval-data "$OUT/digits_test.npz" --eval-every 100 --steps $STEPS \
  --batch-size 32 --metrics "$OUT/metrics.jsonl" \
  --save-params "$OUT/digits_trained.safetensors" --progress=lines
"$PY" "$ROOT/scripts/plot_loss.py" "$OUT/metrics.jsonl" "$OUT/loss.png" \
  --smooth 20 --title "digits_mlp trained by Loom"
"$PY" - "$OUT/metrics.jsonl" "$MIN_ACCURACY" <<'PYEOF'
import json, sys
evals = [r for r in map(json.loads, open(sys.argv[1])) if "eval_accuracy" in r]
acc = evals[-1]["eval_accuracy"]
ok = acc >= float(sys.argv[2])
print("digits demo: held-out accuracy %.4f after %d steps (%s %s)"
      % (acc, evals[-1]["step"], ">=" if ok else "<", sys.argv[2]))
sys.exit(0 if ok else 1)
PYEOF
