//===- GpuEmulator.cpp - Runs Loom's GPU kernels on the host (tests) ------===//
//
// `loomc --target=cuda:sm_NN --cuda-emulator-lib=libloom_gpu_emu.so` turns
// every gpu.func of the CUDA target into a host function for one GPU thread
// (gpu.thread_id, gpu.shuffle, gpu.barrier become calls into this library)
// and exports each launch as `void name(void **buffers)`, which calls
// loom_emu_launch. That runs the grid as the GPU would, block after block;
// the threads of a block are coroutines (ucontext), switched at every
// barrier and shuffle, so warp shuffles and shared memory behave as on the
// GPU. Used with the runtime's fake CUDA driver, it runs a CUDA artifact's
// plan, launches, grid sizes and scratch buffers end to end on a machine
// without a GPU. Not a performance tool.
//
// A sync point (barrier or shuffle) suspends the running thread; the
// scheduler resumes the block's threads in rounds, each until its next sync
// point, so all threads of a warp (and of a block, at a barrier) meet at
// the same point as long as control flow there is warp- (block-) uniform,
// as Loom's kernels make it.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>
#include <vector>

namespace {

using ThreadFn = void (*)(void **);

constexpr size_t kStackBytes = 128 * 1024;
constexpr int64_t kWarp = 32;

struct Emulator {
  ThreadFn fn = nullptr;
  void **buffers = nullptr;
  int64_t blockId = 0, gridDim = 0, blockDim = 0, current = 0;
  ucontext_t scheduler;
  std::vector<ucontext_t> threads;
  std::vector<char> done;
  std::vector<std::vector<char>> stacks;
  std::vector<uint64_t> slots; // one shuffle value per thread
};

thread_local Emulator emu;

void fail(const char *message) {
  std::fprintf(stderr, "loom gpu emulator: %s\n", message);
  std::abort();
}

void threadEntry() {
  emu.fn(emu.buffers);
  emu.done[emu.current] = 1;
  // Returning resumes uc_link: the scheduler.
}

/// Suspends the running thread until the next round.
void syncPoint() {
  int64_t t = emu.current;
  if (swapcontext(&emu.threads[t], &emu.scheduler) != 0)
    fail("swapcontext failed");
}

uint64_t shuffle(uint64_t bits, int32_t offset, int32_t width) {
  if (width != kWarp)
    fail("only full-warp shuffles are emulated");
  int64_t t = emu.current;
  emu.slots[t] = bits;
  syncPoint(); // every lane of the warp has written its value
  int64_t lane = t % kWarp, partner = t - lane + (lane ^ offset);
  if (partner >= emu.blockDim)
    fail("shuffle partner outside the block");
  if (emu.done[partner]) // control flow diverged inside the warp
    fail("shuffle with a lane that has finished");
  uint64_t result = emu.slots[partner];
  syncPoint(); // every lane has read before any writes again
  return result;
}

} // namespace

extern "C" {

int64_t loom_emu_block_id() { return emu.blockId; }
int64_t loom_emu_thread_id() { return emu.current; }
int64_t loom_emu_block_dim() { return emu.blockDim; }
int64_t loom_emu_grid_dim() { return emu.gridDim; }
void loom_emu_barrier() { syncPoint(); }

float loom_emu_shuffle_f32(float v, int32_t offset, int32_t width) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits = static_cast<uint32_t>(shuffle(bits, offset, width));
  std::memcpy(&v, &bits, 4);
  return v;
}

int32_t loom_emu_shuffle_i32(int32_t v, int32_t offset, int32_t width) {
  return static_cast<int32_t>(
      shuffle(static_cast<uint32_t>(v), offset, width));
}

void loom_emu_launch(ThreadFn fn, void **buffers, int64_t grid,
                     int64_t block) {
  if (grid < 1 || block < 1 || block > 1024)
    fail("bad launch dimensions");
  emu.fn = fn;
  emu.buffers = buffers;
  emu.gridDim = grid;
  emu.blockDim = block;
  emu.threads.resize(block);
  emu.done.assign(block, 0);
  emu.slots.assign(block, 0);
  while (static_cast<int64_t>(emu.stacks.size()) < block)
    emu.stacks.emplace_back(kStackBytes);
  for (int64_t b = 0; b < grid; ++b) {
    emu.blockId = b;
    for (int64_t t = 0; t < block; ++t) {
      emu.done[t] = 0;
      ucontext_t &ctx = emu.threads[t];
      if (getcontext(&ctx) != 0)
        fail("getcontext failed");
      ctx.uc_stack.ss_sp = emu.stacks[t].data();
      ctx.uc_stack.ss_size = kStackBytes;
      ctx.uc_link = &emu.scheduler;
      makecontext(&ctx, threadEntry, 0);
    }
    for (bool running = true; running;) {
      running = false;
      for (int64_t t = 0; t < block; ++t) {
        if (emu.done[t])
          continue;
        emu.current = t;
        if (swapcontext(&emu.scheduler, &emu.threads[t]) != 0)
          fail("swapcontext failed");
        running |= !emu.done[t];
      }
    }
  }
}

} // extern "C"
