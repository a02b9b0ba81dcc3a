#!/usr/bin/env bash
# A plan's collective steps over NCCL on real GPUs (the CUDA backend's
# arena and stream, runtime/src/CollectiveSteps.cpp): what the CTest runs
# against the fake driver and fake NCCL cannot show. Runs
# runtime/tests/MeshNcclTest.cpp with the real libcuda.so.1 and
# libnccl.so.2 under mpirun, one rank per GPU:
#
#   1 rank (any GPU): NCCL of one rank through CollectiveSteps on the
#     backend's arena and stream (every op, f32 and bf16, ordered with the
#     uploads and copies around it, no synchronization in between), and
#     a one-rank mesh plan through Artifact::run (there its collective
#     steps are device copies, recorded into a CUDA graph);
#   2 ranks (2 GPUs; NCCL refuses two ranks on one GPU): every op of a plan
#     with mesh dp=2 through Artifact::run against the values each rank
#     computes, and NCCL missing on one rank or both failing on both;
#   4 ranks (4 GPUs): the same on dp=4 and on a mesh [dp=2, tp=2] (one
#     NCCL communicator per axis).
#
# Not here (they need kernels compiled for the GPU, i.e. loomc): training
# a mesh plan on GPUs; the fakes' checks of call order and buffers.
#
# Usage: runtime/tests/gpu/nccl_plans_check.sh [BUILD_DIR]
#   BUILD_DIR: a runtime build holding LoomRTMeshNcclTest (configured with
#   MPI); without one, runtime/ is configured and built in build-nccl-plans.
# Exit status: the number of failed runs (0: all passed).
set -uo pipefail
cd "$(dirname "$0")/../../.."
BUILD="${1:-}"
if [[ -z "$BUILD" ]]; then
  BUILD=build-nccl-plans
  cmake -S runtime -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    || exit 1
  ninja -C "$BUILD" LoomRTMeshNcclTest || exit 1
fi
TEST="$(find "$BUILD" -name LoomRTMeshNcclTest -type f -perm -u+x | head -1)"
if [[ -z "$TEST" ]]; then
  echo "nccl_plans_check: no LoomRTMeshNcclTest under $BUILD (was MPI found?)" >&2
  exit 1
fi
GPUS="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
echo "nccl_plans_check: $GPUS GPU(s); test $TEST"
if [[ "$GPUS" -lt 1 ]]; then
  echo "nccl_plans_check: no GPU (nvidia-smi -L lists none)" >&2
  exit 1
fi
# The real libraries, not the fakes the CTest runs name.
unset LOOMRT_NCCL_LIBRARY LOOMRT_CUDA_DRIVER LOOMRT_CUBLASLT_LIBRARY \
  LOOMRT_CUDA_DEVICE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
for ranks in 1 2 4; do
  if [[ "$ranks" -gt "$GPUS" ]]; then
    echo "SKIP $ranks ranks (needs $ranks GPUs)"
    continue
  fi
  log="$(mktemp)"
  # NCCL_DEBUG=WARN: NCCL's own reason if it fails.
  if timeout 300 mpirun -np "$ranks" -x NCCL_DEBUG=WARN "$TEST" 2>&1 | tee "$log" &&
      grep -q "$ranks ranks (nccl, real NCCL): mesh plans over nccl: [0-9]* checks per rank, 0 failed in all" "$log"; then
    echo "PASS $ranks rank(s): plan collective steps on real NCCL"
  else
    echo "FAIL $ranks rank(s): plan collective steps on real NCCL (log: $log)"
    failed=$((failed + 1))
  fi
done
exit "$failed"
