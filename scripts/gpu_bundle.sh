#!/usr/bin/env bash
# Prepares, on a machine with the compiler (MLIR), what the GPU checks need on
# a GPU machine that has no MLIR (scripts/gpu_checks.sh runs them there):
#
#   BUNDLE/bin/      loom-run, the runtime's GPU test and its test kernels
#   BUNDLE/libs.tar.xz  the shared libraries they need beyond glibc/libstdc++
#                    (OpenBLAS, protobuf, gfortran), compressed
#   BUNDLE/cvi/, BUNDLE/cvi-attention/
#                    test/e2e/compiled_vs_interp.py --phase=prepare for the
#                    example models at --target=cuda:sm_SM: the artifacts and
#                    the interpreter's outputs and trajectories
#   BUNDLE/conf-node/  the ONNX node tests of the .venv's onnx package that
#                    Loom imports, compiled for the GPU with their inputs and
#                    expected outputs (utils/onnx_conformance.py --defer-run)
#   BUNDLE/gpt2s.loom  (with --bench) bench/gpt2_gpu.py's GPT-2-small artifact,
#                    compiled here, without its weights (written there from
#                    the same generated model); BUNDLE/gpt2s-perop.loom the
#                    same with --cuda-fuse-rows=false (one launch per op);
#                    BUNDLE/gpt2s-bf16.loom the same in mixed precision
#                    (--precision bf16: its LM head fused; its attention,
#                    masked with -1e9, stays unfused, as in fp32)
#
# all of it packed as one BUNDLE.tar.xz (what travels to the GPU machine;
# about 30 MB with --bench), next to the BUNDLE folder itself.
#
# Usage: scripts/gpu_bundle.sh [--sm 90] [--bench] BUNDLE
# BUNDLE should be inside the repository and ignored by git (e.g. .gpu/b), so
# that the device tool can carry it. Needs `bash scripts/build.sh` first.
set -euo pipefail
cd "$(dirname "$0")/.."
SM=90
BENCH=0
while [[ $# -gt 1 ]]; do
  case "$1" in
    --sm) SM="$2"; shift 2 ;;
    --bench) BENCH=1; shift ;;
    *) echo "gpu_bundle.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -eq 1 ]] || { echo "usage: scripts/gpu_bundle.sh [--sm N] [--bench] BUNDLE" >&2; exit 2; }
OUTDIR="$1"
BUILD="${BUILD_DIR:-build}"
PY="${LOOM_VENV:-.venv}/bin/python"
for f in "$BUILD/bin/loomc" "$BUILD/bin/loom-run" "$BUILD/bin/loom-interp" \
         "$BUILD/runtime/tests/loomrt-cuda-gpu-test"; do
  [[ -x "$f" ]] || { echo "gpu_bundle.sh: $f is not built (bash scripts/build.sh)" >&2; exit 1; }
done
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR/bin" "$OUTDIR/lib"
cp "$BUILD/bin/loom-run" "$BUILD/runtime/tests/loomrt-cuda-gpu-test" \
   "$BUILD/runtime/tests/LoomRTTestKernels.so" "$OUTDIR/bin/"
# Libraries outside the C/C++ runtime that a GPU image may lack.
for bin in "$OUTDIR"/bin/*; do
  ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt|ld-linux)[.-]' |
  while read -r lib; do cp -L "$lib" "$OUTDIR/lib/"; done
# Where the binaries were built: the GPU test reads its PTX and test kernels
# from these absolute paths, which gpu_checks.sh recreates.
echo "$(pwd)" > "$OUTDIR/source_root"
echo "$(cd "$BUILD" && pwd)" > "$OUTDIR/build_root"
PATH="$BUILD/bin:$PATH" "$PY" test/e2e/compiled_vs_interp.py --phase=prepare \
  --loomc loomc --loom-interp loom-interp --work "$OUTDIR/cvi" --target="cuda:sm_$SM" \
  examples/onnx/mlp.onnx examples/onnx/cnn.onnx examples/onnx/transformer_block.onnx \
  examples/onnx/digits_mlp.onnx examples/onnx/gpt2.onnx
# The generated attention kernels (causal GQA with a window over packed
# documents; multi-query cross attention).
PATH="$BUILD/bin:$PATH" "$PY" test/e2e/compiled_vs_interp.py --phase=prepare \
  --loomc loomc --loom-interp loom-interp --work "$OUTDIR/cvi-attention" \
  --flags="--loss=mse --optimizer=adamw --lr=0.01" --target="cuda:sm_$SM" \
  test/e2e/Inputs/attention_window_docs.json test/e2e/Inputs/attention_cross.json
# The interpreter's per-step outputs are not needed there.
rm -rf "$OUTDIR"/cvi*/*/traj[0-9]* "$OUTDIR"/cvi*/*/traj.safetensors "$OUTDIR"/cvi*/*/train.mlir
# ONNX conformance on the GPU: the node tests, compiled here, run there.
NODE_TESTS="$(mktemp -d)"
"$PY" utils/gen_onnx_node_tests.py "$NODE_TESTS/data" | tail -n 1
# (Debian's python3, as test/Import/ONNX/node-tests-1.23.test runs it; its
# exit status is the interpreter's and the importer's, checked by that test.)
/usr/bin/python3 utils/onnx_conformance.py --data "$NODE_TESTS/data" --loomc "$BUILD/bin/loomc" \
  --compiled --target="cuda:sm_$SM" -j "$(nproc)" --defer-run "$OUTDIR/conf-node" |
  tail -n 2 || true
rm -rf "$NODE_TESTS"
if [[ $BENCH == 1 ]]; then
  "$PY" bench/gpt2_gpu.py --workdir "${BENCH_WORKDIR:-out/bench_gpt2}" \
    --target "cuda:sm_$SM" --loom-compile-only "$OUTDIR/gpt2s.loom"
  rm -f "$OUTDIR/gpt2s.loom/params.safetensors" "$OUTDIR/gpt2s.loom/final.mlir"
  # The same with one launch per linalg op, to time the fused launches.
  "$PY" bench/gpt2_gpu.py --workdir "${BENCH_WORKDIR:-out/bench_gpt2}" \
    --target "cuda:sm_$SM" --loomc-flags=--cuda-fuse-rows=false \
    --loom-compile-only "$OUTDIR/gpt2s-perop.loom"
  rm -f "$OUTDIR/gpt2s-perop.loom/params.safetensors" "$OUTDIR/gpt2s-perop.loom/final.mlir"
  "$PY" bench/gpt2_gpu.py --workdir "${BENCH_WORKDIR:-out/bench_gpt2}" \
    --target "cuda:sm_$SM" --precision bf16 --loom-compile-only "$OUTDIR/gpt2s-bf16.loom"
  rm -f "$OUTDIR/gpt2s-bf16.loom/params.safetensors" "$OUTDIR/gpt2s-bf16.loom/final.mlir"
fi
XZ_OPT="-T0 -6" tar -C "$OUTDIR" -cJf "$OUTDIR.tar.xz" .
du -sh "$OUTDIR" "$OUTDIR.tar.xz"
