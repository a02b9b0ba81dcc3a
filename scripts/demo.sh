#!/usr/bin/env bash
# Loom's main job, on a bundled model: set up, build, then compile
# examples/onnx/digits_mlp.onnx into a training artifact for the CPU and train
# it on scikit-learn's handwritten digits (shipped with scikit-learn, nothing
# downloaded) to >= 97% held-out accuracy; write the loss curve as a PNG and
# the trained weights back into an ONNX model. Output goes to ./out/digits/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
OUT=out/digits
bash examples/data/demo_digits.sh "$OUT"
build/bin/loom-run "$OUT/digits.loom" --export-onnx="$OUT/digits_trained.onnx" \
  --params "$OUT/digits_trained.safetensors"
echo
echo "=== what loomc compiled (kernels, GEMMs and arena of each entry point):"
build/bin/loomc examples/onnx/digits_mlp.onnx --train --loss=cross_entropy \
  --labels=labels --optimizer=adamw --lr=1e-2 --schedule=cosine \
  --total-steps=1000 --target=cpu -o "$OUT/digits.loom" --report
echo
echo "=== results in $OUT/: loss.png (loss and accuracy curves), metrics.jsonl,"
echo "    digits.loom/ (the artifact), digits_trained.onnx (the trained model)"
