//===- CpuConv.h - The CPU backend's convolutions ---------------*- C++ -*-===//
//
// A plan's conv steps (f32, NCHW, any groups, strides, padding and
// dilations) run on oneDNN's convolution primitives where libdnnl is
// installed, as PyTorch and XLA do on CPUs: forward, backward data and
// backward weights, each a primitive created once per geometry (oneDNN's
// JIT picks kernels for the machine) with the layouts oneDNN prefers
// (blocked, e.g. nChw16c); the plan's NCHW tensors are reordered into and
// out of them around the call. Without oneDNN (or with LOOMRT_CPU_CONV=
// reference) the steps run as direct loops: correct, and the oracle the
// oneDNN path is tested against, but one thread and far slower.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CPU_CPUCONV_H
#define LOOMRT_SRC_CPU_CPUCONV_H

#include "loomrt/Plan.h"

#include <cstdint>
#include <memory>
#include <string>

namespace loomrt {

/// The sizes of a conv step: x [N, C, H, W], w [O, C/groups, KH, KW],
/// y [N, O, OH, OW].
/// (The sizes whatever the layout: NHWC buffers, a channels-last step,
/// have the same n, c, h, w.)
struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t o = 0, kh = 0, kw = 0;
  int64_t oh = 0, ow = 0;
};

/// The shape of `step`, whose buffers are `x`, `w` and `y` (checked by
/// parsePlan).
ConvShape convShape(const ConvStep &step, const PlanBuffer &x,
                    const PlanBuffer &w, const PlanBuffer &y) noexcept;

/// Writes the step's output (y, x or w by its direction) with direct loops.
void referenceConv(const ConvStep &step, const ConvShape &shape, float *x,
                   float *w, float *y) noexcept;

class CpuConv {
public:
  CpuConv();
  ~CpuConv();
  CpuConv(const CpuConv &) = delete;
  CpuConv &operator=(const CpuConv &) = delete;

  /// Runs the step on oneDNN, or on referenceConv where oneDNN is absent,
  /// refused (LOOMRT_CPU_CONV=reference) or has no primitive for it. False
  /// with a message only when oneDNN fails while running.
  bool run(const ConvStep &step, const ConvShape &shape, float *x, float *w,
           float *y, std::string *error) noexcept;

  /// "onednn" or "reference": where the steps go (opens oneDNN; call after
  /// the kernels are loaded, as dnnlLibrary() says).
  const char *library() noexcept;

  /// Steps run on the reference loops so far (all of them without oneDNN;
  /// with it, those oneDNN has no primitive for).
  uint64_t referenceRuns() const noexcept { return fallbacks; }

private:
  struct Dnnl;
  uint64_t fallbacks = 0;
  std::unique_ptr<Dnnl> dnnl;
  bool opened = false;
};

} // namespace loomrt

#endif // LOOMRT_SRC_CPU_CPUCONV_H
