#!/usr/bin/env bash
# Installs everything Loom needs on Debian bookworm. Idempotent: packages
# already present are left alone. Needs root (or sudo) for apt-get.
set -euo pipefail

PACKAGES=(
  # Compiler infrastructure: MLIR/LLVM 22 and the toolchain that builds Loom.
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22 lld-22
  cmake ninja-build ccache
  # Libraries MLIR's CMake package expects to find.
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libcurl4-openssl-dev
  # Model formats and their dependencies.
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev
  # Runtime: BLAS and collectives.
  libopenblas-dev libopenmpi-dev openmpi-bin
  # Tests: GoogleTest and the Python used by model scripts.
  libgtest-dev python3 python3-numpy python3-onnx
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
