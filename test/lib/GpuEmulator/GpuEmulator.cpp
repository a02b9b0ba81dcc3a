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
// point, so all threads of a warp meet at the same shuffle as long as
// control flow there is warp-uniform, as Loom's kernels make it. A thread
// at a barrier is not resumed until every thread of the block that has not
// finished waits at one: a warp may shuffle while the others wait (a
// block-wide reduction's last warp).
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>
#include <vector>

// Switching threads. ucontext's swapcontext saves the signal mask with a
// system call at every switch, which made emulation slow; on x86-64 a switch
// of the callee-saved registers, the stack pointer and the FP control words
// is all a cooperative thread needs. Elsewhere, ucontext.
#if defined(__x86_64__)
extern "C" void loom_emu_switch(void **save, void *next);
asm(R"(
  .text
  .p2align 4
  .type loom_emu_switch,@function
loom_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size loom_emu_switch, .-loom_emu_switch
)");
#define LOOM_EMU_FAST_SWITCH 1
#endif

namespace {

using ThreadFn = void (*)(void **);

constexpr size_t kStackBytes = 128 * 1024;
constexpr int64_t kWarp = 32;

struct Emulator {
  ThreadFn fn = nullptr;
  void **buffers = nullptr;
  int64_t blockId = 0, gridDim = 0, blockDim = 0, current = 0;
#if LOOM_EMU_FAST_SWITCH
  void *scheduler = nullptr;
  std::vector<void *> threads; // saved stack pointers
#else
  ucontext_t scheduler;
  std::vector<ucontext_t> threads;
#endif
  std::vector<char> done;
  std::vector<char> atBarrier;
  std::vector<std::vector<char>> stacks;
  std::vector<uint64_t> slots; // one shuffle value per thread
};

thread_local Emulator emu;

void fail(const char *message) {
  std::fprintf(stderr, "loom gpu emulator: %s\n", message);
  std::abort();
}

/// Runs thread `t` until its next sync point or its end.
void resume(int64_t t) {
  emu.current = t;
#if LOOM_EMU_FAST_SWITCH
  loom_emu_switch(&emu.scheduler, emu.threads[t]);
#else
  if (swapcontext(&emu.scheduler, &emu.threads[t]) != 0)
    fail("swapcontext failed");
#endif
}

/// Suspends the running thread until the next round.
void syncPoint() {
  int64_t t = emu.current;
  if (t >= static_cast<int64_t>(emu.threads.size()))
    fail("a launch declared without synchronization synchronized");
#if LOOM_EMU_FAST_SWITCH
  loom_emu_switch(&emu.threads[t], emu.scheduler);
#else
  if (swapcontext(&emu.threads[t], &emu.scheduler) != 0)
    fail("swapcontext failed");
#endif
}

#if LOOM_EMU_FAST_SWITCH
[[noreturn]] void threadEntry() {
  emu.fn(emu.buffers);
  emu.done[emu.current] = 1;
  void *unused;
  loom_emu_switch(&unused, emu.scheduler);
  fail("a finished thread was resumed");
  std::abort();
}

/// A fresh thread's stack, as loom_emu_switch leaves a suspended one: the
/// FP control words, six callee-saved registers, then threadEntry as the
/// return address (entered with the stack aligned as after a call).
void *initialStack(char *base, size_t bytes) {
  auto top = reinterpret_cast<uintptr_t>(base + bytes) & ~uintptr_t(15);
  auto *slot = reinterpret_cast<uint64_t *>(top);
  *--slot = 0;                                          // fake return address
  *--slot = reinterpret_cast<uint64_t>(&threadEntry);   // ret target
  for (int i = 0; i < 6; ++i)
    *--slot = 0;                                        // rbp ... r15
  *--slot = 0x1F80 | (uint64_t(0x037F) << 32);          // mxcsr, x87 cw
  return slot;
}
#else
void threadEntry() {
  emu.fn(emu.buffers);
  emu.done[emu.current] = 1;
  // Returning resumes uc_link: the scheduler.
}
#endif

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
  if (emu.atBarrier[partner])
    fail("shuffle with a lane that waits at a barrier");
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
void loom_emu_barrier() {
  emu.atBarrier[emu.current] = 1;
  syncPoint();
}

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
                     int64_t block, int64_t synchronizes) {
  if (grid < 1 || block < 1 || block > 1024)
    fail("bad launch dimensions");
  emu.fn = fn;
  emu.buffers = buffers;
  emu.gridDim = grid;
  emu.blockDim = block;
  if (!synchronizes) {
    // No barrier, no shuffle: the threads are independent, and running
    // them one after another is one of the orders the GPU may choose.
    emu.slots.clear(); // a sync point now would fail loudly
    emu.threads.clear();
    for (int64_t b = 0; b < grid; ++b) {
      emu.blockId = b;
      for (int64_t t = 0; t < block; ++t) {
        emu.current = t;
        fn(buffers);
      }
    }
    return;
  }
  emu.threads.resize(block);
  emu.done.assign(block, 0);
  emu.atBarrier.assign(block, 0);
  emu.slots.assign(block, 0);
  while (static_cast<int64_t>(emu.stacks.size()) < block)
    emu.stacks.emplace_back(kStackBytes);
  for (int64_t b = 0; b < grid; ++b) {
    emu.blockId = b;
    for (int64_t t = 0; t < block; ++t) {
      emu.done[t] = 0;
#if LOOM_EMU_FAST_SWITCH
      emu.threads[t] = initialStack(emu.stacks[t].data(), kStackBytes);
#else
      ucontext_t &ctx = emu.threads[t];
      if (getcontext(&ctx) != 0)
        fail("getcontext failed");
      ctx.uc_stack.ss_sp = emu.stacks[t].data();
      ctx.uc_stack.ss_size = kStackBytes;
      ctx.uc_link = &emu.scheduler;
      makecontext(&ctx, threadEntry, 0);
#endif
    }
    for (;;) {
      bool resumed = false;
      for (int64_t t = 0; t < block; ++t) {
        if (emu.done[t] || emu.atBarrier[t])
          continue;
        resume(t);
        resumed = true;
      }
      if (resumed)
        continue;
      // No thread could run: every live one waits at a barrier, which they
      // all pass now; or all have finished.
      bool waiting = false;
      for (int64_t t = 0; t < block; ++t)
        waiting |= emu.atBarrier[t] != 0;
      if (!waiting)
        break;
      emu.atBarrier.assign(block, 0);
    }
  }
}

} // extern "C"
