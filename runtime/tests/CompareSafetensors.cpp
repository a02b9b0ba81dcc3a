//===- CompareSafetensors.cpp - Two runs' tensors, within a tolerance -----===//
//
// `loomrt-compare-safetensors A B RTOL`: the same tensor names, dtypes and
// shapes in both files, and every tensor's values within RTOL norm-wise
// (the largest absolute difference over the largest magnitude of B's, so
// that near-zero elements do not dominate). Prints "N tensors agree (rtol
// R)" and exits 0, or names the first that does not and exits 1. What the
// loom-run tests under mpirun use to check a run against the one-process
// run it claims to equal (runtime/tests/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "loomrt/DType.h"
#include "loomrt/Safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace loomrt;

namespace {

/// Element i of `t` as a double, or NaN for a dtype this tool does not
/// read.
double element(const TensorView &t, size_t i) {
  switch (t.dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, t.data + i * 4, 4);
    return v;
  }
  case DType::F64: {
    double v;
    std::memcpy(&v, t.data + i * 8, 8);
    return v;
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, t.data + i * 8, 8);
    return double(v);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, t.data + i * 4, 4);
    return v;
  }
  default:
    return std::nan("");
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: loomrt-compare-safetensors A B RTOL\n");
    return 2;
  }
  const double rtol = std::atof(argv[3]);
  std::string error;
  auto a = SafetensorsFile::open(argv[1], &error);
  auto b = a ? SafetensorsFile::open(argv[2], &error) : nullptr;
  if (!a || !b) {
    std::fprintf(stderr, "compare: %s\n", error.c_str());
    return 1;
  }
  if (a->tensors().size() != b->tensors().size()) {
    std::printf("compare: %zu tensors in %s, %zu in %s\n",
                a->tensors().size(), argv[1], b->tensors().size(), argv[2]);
    return 1;
  }
  for (const TensorView &x : a->tensors()) {
    const TensorView *y = b->find(x.name);
    if (!y || y->dtype != x.dtype || y->shape != x.shape) {
      std::printf("compare: tensor '%s' is not in %s with the same dtype "
                  "and shape\n",
                  x.name.c_str(), argv[2]);
      return 1;
    }
    const size_t n = x.nbytes / dtypeSize(x.dtype);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; ++i) {
      const double u = element(x, i), v = element(*y, i);
      if (std::isnan(u) || std::isnan(v)) {
        std::printf("compare: tensor '%s': element %zu is NaN (or of a "
                    "dtype this tool does not read)\n",
                    x.name.c_str(), i);
        return 1;
      }
      diff = std::max(diff, std::fabs(u - v));
      scale = std::max(scale, std::fabs(v));
    }
    const double err = scale > 0 ? diff / scale : diff;
    if (!(err <= rtol)) {
      std::printf("compare: tensor '%s': relative error %.3g > %g\n",
                  x.name.c_str(), err, rtol);
      return 1;
    }
  }
  std::printf("%zu tensors agree (rtol %g)\n", a->tensors().size(), rtol);
  return 0;
}
