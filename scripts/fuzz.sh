#!/usr/bin/env bash
# Builds Loom's libFuzzer harnesses (test/fuzz/) with ASan + UBSan into
# ./build-fuzz and runs each of them. Exits non-zero if any harness finds
# something (crash, leak, undefined behaviour, timeout, out of memory).
#
#   scripts/fuzz.sh [--seconds N | --runs N] [--parallel P] [--build-only]
#                   [HARNESS...]
#
#   --seconds N    run each harness for N seconds (default 30)
#   --runs N       run each harness for N executions instead
#   --parallel P   harnesses run at once (default: 2, at most the core count)
#   --build-only   configure and build, run nothing
#   HARNESS        fuzz_onnx_import fuzz_json_import fuzz_plan
#                  fuzz_safetensors fuzz_npy fuzz_npz (default: all)
#
# New corpus entries and findings go to build-fuzz/fuzz-work/<harness>/, never
# into the checked-in seeds (test/fuzz/corpus/) or the regressions
# (test/fuzz/regressions/), which are read as seeds too.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
ALL=(fuzz_onnx_import fuzz_json_import fuzz_plan fuzz_safetensors fuzz_npy fuzz_npz)

seconds=30
runs=""
parallel=2
build_only=0
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; runs=""; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    fuzz_*) harnesses+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${ALL[@]}")
cores=$(nproc)
[ "$parallel" -le "$cores" ] || parallel=$cores
[ "$parallel" -ge 1 ] || parallel=1

# libFuzzer and the sanitizer runtimes of clang-22 (scripts/setup.sh installs
# them).
if [ ! -f "$(clang++-22 -print-file-name=libclang_rt.fuzzer-x86_64.a)" ] &&
   [ ! -f "$(clang++-22 -print-resource-dir)/lib/x86_64-unknown-linux-gnu/libclang_rt.fuzzer.a" ]; then
  echo "fuzz.sh: clang-22's libFuzzer is missing: run scripts/setup.sh" \
       "(Debian package libclang-rt-22-dev)" >&2
  exit 1
fi

SAN="-fsanitize=address,undefined -fsanitize=fuzzer-no-link"
SAN="$SAN -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# scripts/build.sh's configuration, plus the sanitizers everywhere, debug
# information for the stack traces, and assertions left on (no -DNDEBUG): a
# failed assert in the LLVM/MLIR headers is a finding too.
bash scripts/configure.sh "$BUILD_DIR" \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -g" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -g" \
  -DLOOM_BUILD_FUZZERS=ON
# Only the harnesses asked for (the runtime's are much quicker to build than
# the importers', which instrument the dialect).
ninja -C "$BUILD_DIR" -j "$JOBS" "${harnesses[@]}"
[ "$build_only" -eq 0 ] || exit 0

# Findings must stop the run: UBSan aborts (the code is built without
# recovery), ASan reports leaks at exit, OpenBLAS stays on one thread.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OPENBLAS_NUM_THREADS=1

WORK="$BUILD_DIR/fuzz-work"
run_one() {
  local h=$1 dir="$WORK/$1"
  mkdir -p "$dir/corpus"
  local seeds=("$ROOT/test/fuzz/corpus/$h")
  [ -d "$ROOT/test/fuzz/regressions/$h" ] && seeds+=("$ROOT/test/fuzz/regressions/$h")
  local limit dict=()
  [ -f "$ROOT/test/fuzz/dict/$h.dict" ] && dict=("-dict=$ROOT/test/fuzz/dict/$h.dict")
  if [ -n "$runs" ]; then limit="-runs=$runs"; else limit="-max_total_time=$seconds"; fi
  # -timeout: one input taking longer is a finding; -rss_limit_mb: so is
  # using more memory (libFuzzer's malloc limit defaults to the same).
  "$BUILD_DIR/fuzz/$h" "$dir/corpus" "${seeds[@]}" "$limit" "${dict[@]}" \
      -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$dir/" >"$dir/log.txt" 2>&1
}

status=0
declare -A running=() # pid -> harness
wait_one() {
  # Whichever harness ends first (bash >= 5.1: wait -n -p).
  local pid rc=0 h
  wait -n -p pid "${!running[@]}" || rc=$?
  h=${running[$pid]}
  unset "running[$pid]"
  if [ "$rc" -eq 0 ]; then
    local done_line
    done_line=$(grep -E '^Done [0-9]+ runs' "$WORK/$h/log.txt" | tail -1 || true)
    echo "fuzz.sh: $h: ok: $done_line" \
         "($(grep -E 'stat::average_exec_per_sec' "$WORK/$h/log.txt" | awk '{print $2}') exec/s," \
         "$(( $(date +%s) - ${started[$h]} )) s)"
  else
    status=1
    echo "fuzz.sh: $h: FINDING (log: $WORK/$h/log.txt)" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|loom-fuzz:|artifact_prefix|Test unit written)' \
      "$WORK/$h/log.txt" | head -20 >&2 || true
  fi
}
declare -A started=() # harness -> start time
for h in "${harnesses[@]}"; do
  [ -x "$BUILD_DIR/fuzz/$h" ] || { echo "fuzz.sh: no harness '$h'" >&2; exit 2; }
  if [ ${#running[@]} -ge "$parallel" ]; then wait_one; fi
  started[$h]=$(date +%s)
  run_one "$h" &
  running[$!]=$h
done
while [ ${#running[@]} -gt 0 ]; do wait_one; done
if [ "$status" -ne 0 ]; then
  echo "fuzz.sh: findings: reproduce with $BUILD_DIR/fuzz/<harness> <artifact>" >&2
fi
exit "$status"
