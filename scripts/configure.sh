#!/usr/bin/env bash
# Configures a Loom build directory with Ninja, clang-22, lld and Debian's
# MLIR/LLVM 22, unless it is configured already:
#   scripts/configure.sh BUILD_DIR [extra cmake arguments...]
# scripts/build.sh uses it for ./build, scripts/fuzz.sh for the sanitized
# build-fuzz (with its flags as the extra arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=$1
shift
[ -f "$BUILD_DIR/build.ninja" ] && exit 0
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DLLVM_USE_LINKER=lld \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
  "$@"
