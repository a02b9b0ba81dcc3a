#!/usr/bin/env bash
# Configures and builds Loom (compiler, tools and runtime) into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
bash scripts/configure.sh "$BUILD_DIR"
ninja -C "$BUILD_DIR" -j "$JOBS" all
