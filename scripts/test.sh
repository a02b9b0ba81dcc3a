#!/usr/bin/env bash
# Builds Loom and runs every test: the lit suite (dialect, importers, driver,
# ONNX conformance) and the runtime's GoogleTest suite, all through CTest;
# then a short fuzzing smoke run of the runtime's file readers (plan.json,
# safetensors, .npy, .npz) under ASan and UBSan (test/fuzz/README.md;
# LOOM_FUZZ_SECONDS per harness, default 15; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${JOBS:-$(nproc)}"
if [ "${LOOM_FUZZ_SECONDS:-15}" != 0 ]; then
  bash scripts/fuzz.sh --seconds "${LOOM_FUZZ_SECONDS:-15}" \
    fuzz_plan fuzz_safetensors fuzz_npy fuzz_npz
fi
