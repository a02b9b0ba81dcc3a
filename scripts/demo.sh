#!/usr/bin/env bash
# Loom's main job, today: set up, build, then import the bundled example models
# (ONNX and JSON) into the loom dialect, print their IR and a summary, and
# write their parameters beside the IR. Output goes to ./out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
mkdir -p out
for model in examples/onnx/mlp.onnx examples/onnx/cnn.onnx \
             examples/onnx/transformer_block.onnx examples/json/mlp.json; do
  name=$(basename "${model%.*}")
  kind=${model##*.}
  echo
  echo "=== $model -> out/$name.$kind.mlir (+ out/$name.$kind.safetensors)"
  build/bin/loomc "$model" --emit=mlir -o "out/$name.$kind.mlir" --summary
done
echo
echo "=== the imported IR of examples/onnx/mlp.onnx:"
cat out/mlp.onnx.mlir
