#!/usr/bin/env bash
# Builds Loom and runs every test: the lit suite (dialect, importers, driver,
# ONNX conformance) and the runtime's GoogleTest suite, all through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${JOBS:-$(nproc)}"
