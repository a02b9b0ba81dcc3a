#!/usr/bin/env bash
# The runtime's NCCL collectives (runtime/src/cuda/NcclCollectives.cpp) on
# real GPUs with the real libnccl.so.2 and libcuda.so.1: what the fake NCCL
# and fake driver of the CTest runs cannot show. Runs
# runtime/tests/CollectivesNcclTest.cpp under mpirun, one rank per GPU:
# world size 1 on one GPU, then 2 where the machine has two or more (NCCL
# refuses two ranks on one GPU). Also runs the header checks of
# NcclApi.h/CudaApi.h when nccl.h and cuda.h are installed.
#
# Usage: scripts/gpu_nccl_check.sh [BUILD_DIR]
#   BUILD_DIR: a build holding LoomRTCollectivesNcclTest (the Loom build's
#   `build`, or a runtime-only build); without one, the runtime alone is
#   configured and built in build-nccl (needs CMake, a C++17 compiler,
#   libopenmpi-dev, nlohmann-json3-dev, zlib, OpenBLAS; no CUDA toolkit).
# Exit status: the number of failed runs (0: all passed).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-}"
if [[ -z "$BUILD" ]]; then
  BUILD=build-nccl
  cmake -S runtime -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    || exit 1
  ninja -C "$BUILD" LoomRTCollectivesNcclTest || exit 1
  ninja -C "$BUILD" LoomRTNcclApiAbiCheck LoomRTCudaApiAbiCheck 2>/dev/null
fi
TEST="$(find "$BUILD" -name LoomRTCollectivesNcclTest -type f -perm -u+x | head -1)"
if [[ -z "$TEST" ]]; then
  echo "gpu_nccl_check: no LoomRTCollectivesNcclTest under $BUILD (was MPI found?)" >&2
  exit 1
fi
GPUS="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
echo "gpu_nccl_check: $GPUS GPU(s); test $TEST"
if [[ "$GPUS" -lt 1 ]]; then
  echo "gpu_nccl_check: no GPU (nvidia-smi -L lists none)" >&2
  exit 1
fi
# The real libraries, not the fakes the CTest runs name.
unset LOOMRT_NCCL_LIBRARY LOOMRT_CUDA_DRIVER LOOMRT_CUDA_DEVICE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
for check in LoomRTNcclApiAbiCheck LoomRTCudaApiAbiCheck; do
  bin="$(find "$BUILD" -name "$check" -type f -perm -u+x | head -1)"
  [[ -n "$bin" ]] || continue
  if "$bin"; then echo "PASS $check"; else echo "FAIL $check"; failed=$((failed + 1)); fi
done
for ranks in 1 2; do
  if [[ "$ranks" -gt "$GPUS" ]]; then
    echo "SKIP $ranks ranks (needs $ranks GPUs)"
    continue
  fi
  log="$(mktemp)"
  # NCCL_DEBUG=WARN: NCCL's own reason if it fails.
  if timeout 300 mpirun -np "$ranks" -x NCCL_DEBUG=WARN "$TEST" 2>&1 | tee "$log" &&
      grep -q "$ranks ranks (nccl, real NCCL): [0-9]* checks per rank, 0 failed in all" "$log"; then
    echo "PASS $ranks rank(s) on real NCCL"
  else
    echo "FAIL $ranks rank(s) on real NCCL (log: $log)"
    failed=$((failed + 1))
  fi
done
exit "$failed"
