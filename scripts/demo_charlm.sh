#!/usr/bin/env bash
# Loom's second demo, a transformer: set up, build, then compile
# examples/charlm/charlm.onnx (transformers' GPT2LMHeadModel, 4 layers,
# d 128, a character vocabulary, exported by PyTorch) into a training
# artifact for the CPU, train it character by character on the license texts
# of /usr/share/common-licenses (on every Debian machine, nothing downloaded),
# plot the loss curve and print text sampled from the trained model with
# loom-run. Output goes to ./out/charlm/ (docs/demo-charlm.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
OUT=out/charlm
bash examples/charlm/demo_charlm.sh "$OUT"
echo
echo "=== results in $OUT/: loss.png (loss curve), metrics.jsonl, samples.txt,"
echo "    charlm.loom/ (the artifact), charlm_trained.safetensors (trained parameters)"
