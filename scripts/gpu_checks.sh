#!/usr/bin/env bash
# The GPU checks of docs/status.md, on a GPU machine without MLIR, from a
# bundle made by scripts/gpu_bundle.sh on the compiler's machine:
#
#   1. the runtime's GPU test (driver API, cuBLASLt GEMMs, cubin and PTX
#      loading, CUDA graphs, out-of-memory errors, training with resume);
#   2. the example models' CUDA artifacts against the reference interpreter
#      (every entry's outputs and a 5-step trajectory; what
#      test/e2e/cuda-gpu.test checks where the compiler and the GPU are on
#      one machine);
#   3. compute-sanitizer (memcheck, racecheck) on training steps;
#   3b. the ONNX node tests compiled for the GPU, against their expected
#      outputs (utils/onnx_conformance.py --run-deferred);
#   4. with --bench: bench/gpt2_gpu.py (Loom's prebuilt GPT-2-small artifact,
#      PyTorch eager and torch.compile; then Loom with one launch per linalg
#      op, where the bundle has gpt2s-perop.loom; then all three in bf16
#      mixed precision, where it has gpt2s-bf16.loom);
#   5. with --profile (after --bench): Nsight Compute's duration of every
#      launch of one GPT-2-small step (no CUDA graph), summarized by
#      bench/ncu_summary.py; the CSV is LOGDIR/ncu.csv.
#
# Usage: scripts/gpu_checks.sh [--bench] [--profile] [--skip-checks] BUNDLE[.tar.xz] [LOGDIR]
# (a .tar.xz is unpacked into /tmp/loom-gpu-bundle first)
# Exit status: the number of failed parts (0: all passed).
set -uo pipefail
cd "$(dirname "$0")/.."
BENCH=0
PROFILE=0
CHECKS=1
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --bench) BENCH=1 ;;
    --profile) PROFILE=1 ;;
    --skip-checks) CHECKS=0 ;;
    *) echo "gpu_checks.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
B="${1:?usage: scripts/gpu_checks.sh [--bench] [--skip-checks] BUNDLE[.tar.xz] [LOGDIR]}"
if [[ -f "$B" ]]; then
  rm -rf /tmp/loom-gpu-bundle && mkdir -p /tmp/loom-gpu-bundle
  tar -C /tmp/loom-gpu-bundle -xJf "$B" || exit 1
  B=/tmp/loom-gpu-bundle
fi
B="$(cd "$B" && pwd)"
LOGS="${2:-$B/logs}"
mkdir -p "$LOGS"
PY="${PYTHON:-python3}"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The GPU test was built with absolute paths to its PTX (in the source tree)
# and its test kernels (in the build tree): recreate them.
SRC_ROOT="$(cat "$B/source_root")"
BUILD_ROOT="$(cat "$B/build_root")"
if [[ ! -e "$SRC_ROOT/runtime/tests/gpu/kernels.ptx" ]]; then
  mkdir -p "$(dirname "$SRC_ROOT")" && ln -sfn "$(pwd)" "$SRC_ROOT"
fi
mkdir -p "$BUILD_ROOT/runtime/tests"
cp "$B/bin/LoomRTTestKernels.so" "$BUILD_ROOT/runtime/tests/"
failed=0
part() {  # part NAME COMMAND...: runs, logs, reports
  local name="$1"; shift
  local t0=$SECONDS
  if "$@" > "$LOGS/$name.log" 2>&1; then
    echo "PASS  $name ($((SECONDS - t0)) s)"
  else
    echo "FAIL  $name ($((SECONDS - t0)) s, exit $?): last lines of $LOGS/$name.log"
    tail -n 25 "$LOGS/$name.log" | sed 's/^/      /'
    failed=$((failed + 1))
  fi
}
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
if [[ $CHECKS == 1 ]]; then
  part runtime-gpu-test "$B/bin/loomrt-cuda-gpu-test"
  part compiled-vs-interp-cuda "$PY" test/e2e/compiled_vs_interp.py --phase=check \
    --loom-run "$B/bin/loom-run" --work "$B/cvi"
  part attention-vs-interp-cuda "$PY" test/e2e/compiled_vs_interp.py --phase=check \
    --loom-run "$B/bin/loom-run" --work "$B/cvi-attention"
  part memcheck-attention compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/bin/loom-run" "$B/cvi-attention/attention_window_docs/train.loom" --train \
    --data "$B/cvi-attention/attention_window_docs/one_batch.npz" --steps 2 --progress=none
  for model in mlp cnn gpt2; do
    art="$B/cvi/$model/train.loom"
    data="$B/cvi/$model/one_batch.npz"
    part "memcheck-$model" compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$B/bin/loom-run" "$art" --train --data "$data" --steps 3 --progress=none
    part "racecheck-$model" compute-sanitizer --tool racecheck --error-exitcode 1 \
      "$B/bin/loom-run" "$art" --train --data "$data" --steps 2 --progress=none
  done
  part conformance-node "$PY" utils/onnx_conformance.py --run-deferred "$B/conf-node" \
    --loom-run "$B/bin/loom-run" -j 8
  tail -n 1 "$LOGS/conformance-node.log"
  part "initcheck-gpt2" compute-sanitizer --tool initcheck --error-exitcode 1 \
    "$B/bin/loom-run" "$B/cvi/gpt2/train.loom" --train --data "$B/cvi/gpt2/one_batch.npz" \
    --steps 2 --progress=none
fi
if [[ $BENCH == 1 ]]; then
  bench() {  # bench NAME ARTIFACT LINES [gpt2_gpu.py flags...]: one part
    local name="$1" art="$2" lines="$3"; shift 3
    [[ -d "$art" ]] || return 0
    part "$name" env PYTHONUNBUFFERED=1 "$PY" bench/gpt2_gpu.py \
      --loom-prebuilt "$art" --loom-run "$B/bin/loom-run" \
      --workdir /tmp/loom-bench-gpt2 --json "$LOGS/$name.json" --markdown "$@"
    tail -n "$lines" "$LOGS/$name.log"
  }
  bench bench-gpt2 "$B/gpt2s.loom" 40
  # Loom again, one launch per linalg op (--cuda-fuse-rows=false).
  bench bench-gpt2-perop "$B/gpt2s-perop.loom" 12 --frameworks loom
  # Mixed precision: Loom's bf16 artifact against PyTorch's autocast.
  bench bench-gpt2-bf16 "$B/gpt2s-bf16.loom" 40 --precision bf16
fi
if [[ $PROFILE == 1 ]]; then
  data="$(ls -d /tmp/loom-bench-gpt2/gpt_*/data.npz 2>/dev/null | head -n 1)"
  if [[ $BENCH != 1 || -z "$data" ]]; then
    echo "FAIL  profile: needs --bench (its data and the artifact's weights)"
    failed=$((failed + 1))
  else
    part profile ncu --metrics gpu__time_duration.sum --csv --log-file "$LOGS/ncu.csv" \
      "$B/bin/loom-run" "$B/gpt2s.loom" --train --data "$data" --steps 1 \
      --no-cuda-graph --progress=none
    "$PY" bench/ncu_summary.py "$LOGS/ncu.csv"
  fi
fi
echo "$failed part(s) failed"
exit "$failed"
