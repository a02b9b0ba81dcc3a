#!/usr/bin/env bash
# Trains the character-level GPT of examples/charlm (transformers'
# GPT2LMHeadModel exported by PyTorch) on the license texts of
# /usr/share/common-licenses with Loom, then samples text from it with
# loom-run: make the data, compile, train with evaluation, plot, sample.
# Usage: examples/charlm/demo_charlm.sh [OUT_DIR]   (default out/charlm)
# Needs build/bin/{loomc,loom-run} and the .venv of scripts/setup.sh (numpy,
# matplotlib). About 5-10 minutes on 2 CPU cores (docs/demo-charlm.md).
# Hyper-parameters: AdamW, lr 5e-3, 50 warmup steps then cosine decay to 0
# over 600 steps of 32 x 64 characters, gradient norm clipped to 1.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$ROOT/out/charlm}"
PY="${LOOM_VENV:-$ROOT/.venv}/bin/python"
BIN="${LOOM_BIN:-$ROOT/build/bin}"
STEPS="${CHARLM_STEPS:-600}"
LR=5e-3
MAX_EVAL_LOSS=2.5

mkdir -p "$OUT"
echo "=== data: /usr/share/common-licenses -> $OUT/{train,eval}.bin (loom-tokens)"
# Each file a document of characters through the model's vocabulary,
# followed by a newline (id 0); Apache-2.0 and CC0-1.0 held out.
mapfile -t TRAIN_FILES < <("$PY" "$ROOT/examples/charlm/make_data.py" --list train)
mapfile -t EVAL_FILES < <("$PY" "$ROOT/examples/charlm/make_data.py" --list eval)
VOCAB="$ROOT/examples/charlm/vocab.json"
"$BIN/loom-tokens" -o "$OUT/train.bin" --vocab "$VOCAB" --separator 0 "${TRAIN_FILES[@]}"
"$BIN/loom-tokens" -o "$OUT/eval.bin" --vocab "$VOCAB" --separator 0 "${EVAL_FILES[@]}"
rm -rf "$OUT/charlm.loom" "$OUT/metrics.jsonl"

echo "=== compile: loomc examples/charlm/charlm.onnx --train --target=cpu"
t0=$(date +%s.%N)
"$BIN/loomc" "$ROOT/examples/charlm/charlm.onnx" --train --loss=cross_entropy \
  --labels=labels --optimizer=adamw --lr=$LR --schedule=warmup-cosine \
  --warmup-steps=50 --total-steps="$STEPS" --clip-norm=1.0 --target=cpu \
  -o "$OUT/charlm.loom"
t1=$(date +%s.%N)
COMPILE_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "compiled in $COMPILE_S s"

echo "=== train: $STEPS steps"
"$BIN/loom-run" "$OUT/charlm.loom" --train --data "$OUT/train.bin" \
  --eval-data "$OUT/eval.bin" --tokens=uint16 --eval-every 100 --steps "$STEPS" \
  --batch-size 32 --metrics "$OUT/metrics.jsonl" \
  --save-params "$OUT/charlm_trained.safetensors" --progress=lines
"$PY" "$ROOT/scripts/plot_loss.py" "$OUT/metrics.jsonl" "$OUT/loss.png" \
  --smooth 20 --title "character-level GPT-2 (0.8 M parameters) trained by Loom"

echo "=== sample: loom-run --entry=predict with the trained parameters"
"$PY" "$ROOT/examples/charlm/sample.py" "$OUT/charlm.loom" \
  --params "$OUT/charlm_trained.safetensors" --loom-run "$BIN/loom-run" \
  --length 120 --temperature 0.8 --seed 0 | tee "$OUT/samples.txt"

echo
"$PY" - "$OUT/metrics.jsonl" "$COMPILE_S" "$MAX_EVAL_LOSS" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if "loss" in r and r.get("loss") is not None]
evals = [r for r in rows if r.get("eval_loss") is not None]
tail = train[-20:]
ms = [32000.0 / r["samples_per_sec"] for r in train[1:] if r.get("samples_per_sec")]
ms.sort()
ok = evals[-1]["eval_loss"] < float(sys.argv[3])
print("charlm demo: compile %s s; %d steps, median %.0f ms/step; train loss "
      "%.3f at step 1, %.3f (mean of the last %d steps); held-out loss %.3f, "
      "next-character accuracy %.3f (%s %s)"
      % (sys.argv[2], train[-1]["step"], ms[len(ms) // 2], train[0]["loss"],
         sum(r["loss"] for r in tail) / len(tail), len(tail),
         evals[-1]["eval_loss"], evals[-1]["eval_accuracy"],
         "<" if ok else ">=", sys.argv[3]))
sys.exit(0 if ok else 1)
PYEOF
