#!/usr/bin/env bash
# Builds ONNX's C++ library (protobuf schema, checker, shape inference,
# version converter) at a pinned current release, from ONNX's source
# distribution on PyPI, against Debian's protobuf. Debian bookworm's
# libonnx-dev is 1.12 (IR <= 8, opsets <= 17), older than what today's
# exporters write. Cached: when the installed library is there, this does
# nothing. Needs python3 with pip (PyPI) and Debian's libprotobuf-dev.
#
#   LOOM_ONNX_PREFIX  where to install (default: .deps/onnx-<version>)
#   LOOM_VENV         the virtual environment that provides CMake >= 3.26
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ONNX_VERSION=1.23.2
ONNX_SHA256=008cb0467b2bbee41448acc7da8b6f4e704624cb0d327a2d5adafc7ce19bc5b8
PREFIX="${LOOM_ONNX_PREFIX:-$ROOT/.deps/onnx-$ONNX_VERSION}"
STAMP="$PREFIX/.loom-built"

if [ -f "$STAMP" ] && [ -f "$PREFIX/lib/cmake/ONNX/ONNXConfig.cmake" ]; then
  echo "setup: ONNX $ONNX_VERSION already built in $PREFIX"
  exit 0
fi

VENV="${LOOM_VENV:-$ROOT/.venv}"
# ONNX's CMake build needs CMake >= 3.26; bookworm has 3.25. PyPI's cmake
# package is the same CMake, as a wheel.
if ! "$VENV/bin/cmake" --version >/dev/null 2>&1; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "cmake>=3.26,<4"
fi
CMAKE="$VENV/bin/cmake"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/loom-onnx.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "setup: building ONNX $ONNX_VERSION's C++ library into $PREFIX (about 2 minutes)"
# --no-binary onnx: the source distribution (C++ sources and CMake build);
# its build requirements may still come as wheels.
"$VENV/bin/pip" download -q --disable-pip-version-check --no-deps \
  --no-binary onnx "onnx==$ONNX_VERSION" -d "$WORK"
TARBALL="$WORK/onnx-$ONNX_VERSION.tar.gz"
echo "$ONNX_SHA256  $TARBALL" | sha256sum -c --quiet -
tar -xzf "$TARBALL" -C "$WORK"

"$CMAKE" -S "$WORK/onnx-$ONNX_VERSION" -B "$WORK/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DONNX_BUILD_PYTHON=OFF -DONNX_BUILD_TESTS=OFF -DONNX_ML=1 \
  -DONNX_USE_PROTOBUF_SHARED_LIBS=ON -DONNX_GEN_PB_TYPE_STUBS=OFF \
  -DBUILD_ONNX_PYTHON=OFF >"$WORK/configure.log" 2>&1 ||
  { cat "$WORK/configure.log" >&2; exit 1; }
ninja -C "$WORK/build" -j "${JOBS:-$(nproc)}" onnx onnx_proto >"$WORK/build.log" 2>&1 ||
  { tail -50 "$WORK/build.log" >&2; exit 1; }
"$CMAKE" --install "$WORK/build" >/dev/null
touch "$STAMP"
echo "setup: ONNX $ONNX_VERSION installed in $PREFIX"
