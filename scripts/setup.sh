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
  # Model formats and their dependencies. ONNX's C++ library itself is built
  # from a current release below (Debian's libonnx-dev is 1.12, too old);
  # libonnx-testdata is the old release's node tests, kept as a regression set.
  libonnx-testdata libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev
  # Runtime: BLAS (OpenBLAS; oneDNN, opened by loom-run where it is
  # installed, for f32 GEMMs and convolutions: runtime/src/cpu/CpuGemm.h,
  # CpuConv.h, whose API comes from libdnnl-dev's headers) and collectives;
  # LLVM's OpenMP runtime, which the CPU kernels' thread teams run on (loomc
  # links kernels.so against it).
  libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin libomp-22-dev
  # Tests: GoogleTest and the Python used by model scripts.
  libgtest-dev python3 python3-numpy python3-onnx python3-venv
  # The loom Python package (python/): pybind11 builds its native module,
  # patchelf gives it a private libprotobuf (python/CMakeLists.txt); pytest
  # runs its tests (CTest's loom-python); tqdm draws its progress bars.
  pybind11-dev python3-pybind11 python3-dev python3-pytest patchelf
  python3-tqdm
  # Fuzzing (scripts/fuzz.sh): libFuzzer and the sanitizer runtimes of clang-22.
  libclang-rt-22-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} Debian packages already installed"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The independent oracles of the numerical tests, in a virtual environment
# of its own (so that its numpy does not meet Debian's python3-onnx): JAX
# (CPU); onnx 1.23, whose node tests the conformance run checks; onnxruntime,
# which runs the models loom-run exports (test/e2e/onnx-roundtrip.test);
# PyTorch (PyPI's wheel, the CUDA build: about 5 GB with its nvidia-*
# wheels; it runs on the CPU here) with torchvision, transformers and
# onnxscript, which export the zoo's models afresh and train them for
# test/e2e/zoo-live.test and run the loom package's torch.nn.Module path
# (CTest's loom-python-torch, with pytest). scikit-learn ships the digits
# data set of the training demo (examples/data/make_digits.py); matplotlib
# draws loss curves (scripts/plot_loss.py).
#
# A missing oracle is an error: the tests that need one would otherwise be
# skipped and the suite pass without them. LOOM_ALLOW_MISSING_ORACLES=1 (set
# by `scripts/test.sh --allow-missing-oracles`) makes it a warning, for a
# quick local run offline.
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${LOOM_VENV:-$ROOT/.venv}"
PY_PACKAGES=(jax==0.10.2 jaxlib==0.10.2 onnx==1.23.2 onnxruntime==1.32.0
             scikit-learn==1.9.1 matplotlib==3.11.2
             torch==2.15.0 torchvision==0.29.2 transformers==5.25.0
             onnxscript==0.7.2 pytest)
PY_IMPORTS="jax, onnx, onnxruntime, sklearn, matplotlib, torch, torchvision, transformers, onnxscript, pytest"
if "$VENV/bin/python" -c "import $PY_IMPORTS" 2>/dev/null; then
  echo "setup: $VENV has $PY_IMPORTS"
else
  echo "setup: installing into $VENV: ${PY_PACKAGES[*]} (PyTorch: about 5 GB)"
  if ! { { [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"; } &&
         "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}" &&
         "$VENV/bin/python" -c "import $PY_IMPORTS"; }; then
    if [ "${LOOM_ALLOW_MISSING_ORACLES:-0}" = "1" ]; then
      echo "setup: warning: could not install ${PY_PACKAGES[*]} from PyPI;" \
           "the tests that need them will not run (LOOM_ALLOW_MISSING_ORACLES=1)" >&2
    else
      echo "setup: error: could not install ${PY_PACKAGES[*]} from PyPI: the" \
           "tests compare Loom against them (for a quick local run without" \
           "them: scripts/test.sh --allow-missing-oracles)" >&2
      exit 1
    fi
  fi
fi

# ONNX's C++ library at a current release, built once into .deps/.
bash "$ROOT/scripts/build_onnx.sh"
