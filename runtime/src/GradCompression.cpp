//===- GradCompression.cpp - Compressed gradient reductions --------------===//
//
// See GradCompression.h. Every rank of the dp axis runs the same
// collectives in the same order for a step (the plan's), whatever its
// values: the decisions that change the collectives (whether a tensor is
// compressed, k, whether int8's scale is finite) depend only on shapes, the
// spec and values every rank shares after a reduction.
//
//===----------------------------------------------------------------------===//

#include "GradCompression.h"

#include "Support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>

namespace loomrt {

using detail::quoteName;

//===----------------------------------------------------------------------===//
// The spec
//===----------------------------------------------------------------------===//

namespace {

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool allDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
}

/// A plain decimal: digits with an optional fraction, or a fraction alone,
/// then an optional exponent ("0.01", ".5", "1", "1e-3", "2.5E-2").
bool isDecimal(std::string_view text) {
  size_t i = 0, n = text.size();
  size_t intDigits = 0, fracDigits = 0;
  while (i < n && text[i] >= '0' && text[i] <= '9')
    ++i, ++intDigits;
  if (i < n && text[i] == '.') {
    ++i;
    while (i < n && text[i] >= '0' && text[i] <= '9')
      ++i, ++fracDigits;
  }
  if (intDigits + fracDigits == 0)
    return false;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-'))
      ++i;
    size_t expDigits = 0;
    while (i < n && text[i] >= '0' && text[i] <= '9')
      ++i, ++expDigits;
    if (expDigits == 0)
      return false;
  }
  return i == n;
}

/// The shortest "%.Ng" that reads back as `v`.
std::string shortestDecimal(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

} // namespace

bool parseGradCompression(std::string_view text, GradCompressionSpec *spec,
                          std::string *error) {
  auto bad = [&](const std::string &why) {
    if (error)
      *error = "gradient compression " + quoteName(text) + ": " + why;
    return false;
  };
  GradCompressionSpec s;
  if (text == "none") {
    s.method = GradCompressionSpec::Method::None;
    s.text = "none";
  } else if (text == "int8") {
    s.method = GradCompressionSpec::Method::Int8;
    s.text = "int8";
  } else if (startsWith(text, "powersgd:")) {
    std::string_view rest = text.substr(9);
    if (!startsWith(rest, "rank="))
      return bad("expected powersgd:rank=R (R the rank of the approximation, "
                 "e.g. powersgd:rank=2)");
    std::string_view digits = rest.substr(5);
    if (!allDigits(digits) || digits.size() > 6)
      return bad("the rank must be an integer from 1 to 65536");
    int64_t r = std::stoll(std::string(digits));
    if (r < 1 || r > 65536)
      return bad("the rank must be an integer from 1 to 65536");
    s.method = GradCompressionSpec::Method::PowerSgd;
    s.rank = r;
    s.text = "powersgd:rank=" + std::to_string(r);
  } else if (startsWith(text, "topk:")) {
    std::string_view number = text.substr(5);
    if (!isDecimal(number))
      return bad("expected topk:FRACTION, the share of each gradient's "
                 "entries sent, a decimal in (0, 1] (e.g. topk:0.01)");
    double f = std::strtod(std::string(number).c_str(), nullptr);
    if (!(f > 0) || f > 1)
      return bad("the fraction must be in (0, 1] (e.g. topk:0.01)");
    s.method = GradCompressionSpec::Method::TopK;
    s.fraction = f;
    s.text = "topk:" + shortestDecimal(f);
  } else {
    return bad("expected none, powersgd:rank=R, topk:FRACTION or int8");
  }
  if (spec)
    *spec = s;
  return true;
}

std::string gradResidualName(const std::string &param, int64_t dpRank) {
  return param + ".grad_residual.dp" + std::to_string(dpRank);
}

std::string powerSgdQName(const std::string &param) {
  return param + ".powersgd_q";
}

bool isGradCompressionTensorName(std::string_view name) noexcept {
  const std::string_view q = ".powersgd_q", r = ".grad_residual.dp";
  if (name.size() > q.size() && name.substr(name.size() - q.size()) == q)
    return true;
  size_t at = name.rfind(r);
  return at != std::string_view::npos && at > 0 &&
         allDigits(name.substr(at + r.size()));
}

//===----------------------------------------------------------------------===//
// The algorithms
//===----------------------------------------------------------------------===//

namespace gradcomp {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// Uniform in [0, 1) with 24 random bits (exact as a float).
float unit24(uint64_t bits) { return float(bits >> 40) * (1.0f / 16777216.0f); }

} // namespace

bool powerSgdCompresses(const std::vector<int64_t> &shape, int64_t rank,
                        int64_t *n, int64_t *m) {
  if (shape.size() < 2)
    return false;
  int64_t rows = shape[0], cols = 1;
  for (size_t i = 1; i < shape.size(); ++i)
    cols *= shape[i];
  // In double: the products of large tensors overflow nothing there.
  if (!(double(rows + cols) * double(rank) < double(rows) * double(cols)))
    return false;
  *n = rows;
  *m = cols;
  return true;
}

void orthonormalizeColumns(float *a, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < cols; ++i) {
    double norm = 0;
    for (int64_t r = 0; r < rows; ++r)
      norm += double(a[r * cols + i]) * double(a[r * cols + i]);
    norm = std::sqrt(norm);
    // A vanishing column (a zero gradient) stays zero rather than NaN.
    if (norm > 0)
      for (int64_t r = 0; r < rows; ++r)
        a[r * cols + i] = float(double(a[r * cols + i]) / norm);
    for (int64_t j = i + 1; j < cols; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r)
        dot += double(a[r * cols + i]) * double(a[r * cols + j]);
      for (int64_t r = 0; r < rows; ++r)
        a[r * cols + j] =
            float(double(a[r * cols + j]) - dot * a[r * cols + i]);
    }
  }
}

void matmul(const float *a, const float *b, float *c, int64_t rows,
            int64_t inner, int64_t cols, bool transposeA) {
  std::vector<double> acc(static_cast<size_t>(cols));
  for (int64_t i = 0; i < rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < inner; ++k) {
      double x = transposeA ? a[k * rows + i] : a[i * inner + k];
      if (x == 0)
        continue;
      const float *row = b + k * cols;
      for (int64_t j = 0; j < cols; ++j)
        acc[size_t(j)] += x * double(row[j]);
    }
    for (int64_t j = 0; j < cols; ++j)
      c[i * cols + j] = float(acc[size_t(j)]);
  }
}

void multiplyTransposed(const float *p, const float *q, float *c, int64_t rows,
                        int64_t cols, int64_t r) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0;
      for (int64_t k = 0; k < r; ++k)
        s += double(p[i * r + k]) * double(q[j * r + k]);
      c[i * cols + j] = float(s);
    }
}

std::vector<float> initialQ(std::string_view param, int64_t m, int64_t r) {
  constexpr double kPi = 3.14159265358979323846;
  std::vector<float> q(size_t(m * r));
  uint64_t state = mix(fnv1a(param) ^ 0x706f7765727367ull); // "powersg"
  // Box-Muller on our own generator: the same numbers on every platform.
  for (size_t i = 0; i < q.size(); i += 2) {
    double u1 = (double((state = mix(state)) >> 11) + 1.0) * 0x1p-53;
    double u2 = double((state = mix(state)) >> 11) * 0x1p-53;
    double radius = std::sqrt(-2.0 * std::log(u1));
    q[i] = float(radius * std::cos(2 * kPi * u2));
    if (i + 1 < q.size())
      q[i + 1] = float(radius * std::sin(2 * kPi * u2));
  }
  return q;
}

uint64_t topKCount(double fraction, uint64_t numel) {
  double k = std::ceil(fraction * double(numel));
  uint64_t count = k < 1 ? 1 : uint64_t(k);
  return std::min(count, numel);
}

std::vector<uint32_t> topK(const float *v, uint64_t n, uint64_t k) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (k < n) {
    // NaN counts as the largest magnitude, so that a non-finite gradient
    // is sent (and shows) rather than breaking the ordering.
    auto magnitude = [&](uint32_t i) {
      float a = std::fabs(v[i]);
      return std::isnan(a) ? std::numeric_limits<float>::infinity() : a;
    };
    std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(k),
                     order.end(), [&](uint32_t a, uint32_t b) {
                       float x = magnitude(a), y = magnitude(b);
                       return x > y || (x == y && a < b);
                     });
    order.resize(k);
    std::sort(order.begin(), order.end());
  }
  return order;
}

uint64_t int8Key(uint64_t seed, int64_t step, int64_t rank,
                 std::string_view param) {
  uint64_t x = mix(mix(seed) + uint64_t(step));
  x = mix(x + uint64_t(rank));
  return mix(x ^ fnv1a(param));
}

void quantizeInt8(const float *v, uint64_t n, float scale, uint64_t key,
                  int8_t *q) {
  if (!(scale > 0)) {
    std::memset(q, 0, n);
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    float x = v[i] / scale;
    float f = std::floor(x);
    float up = unit24(mix(key + i)) < x - f ? 1.0f : 0.0f;
    float r = std::min(127.0f, std::max(-127.0f, f + up));
    q[i] = int8_t(r);
  }
}

} // namespace gradcomp

//===----------------------------------------------------------------------===//
// GradientCompression
//===----------------------------------------------------------------------===//

GradientCompression::GradientCompression(GradCompressionSpec spec,
                                         uint64_t seed)
    : spec_(std::move(spec)), seed_(seed) {}

bool GradientCompression::addEntry(const Plan &plan, const PlanEntry &entry,
                                   std::string *error) {
  for (const PlanStep &step : entry.steps) {
    const CollectiveStep &c = step.collective;
    if (step.kind != PlanStep::Kind::Collective || c.grad.empty() ||
        c.ranks <= 1 || !plan.mesh || plan.mesh->axes[c.axis] != "dp")
      continue;
    const PlanBuffer &src = entry.buffers[c.src];
    auto it = registered_.find(c.grad);
    if (it != registered_.end()) {
      if (it->second.shape != src.shape ||
          it->second.f32 != (src.dtype == DType::F32)) {
        if (error)
          *error = "entry " + quoteName(entry.name) + ": two reductions of " +
                   "the gradient of " + quoteName(c.grad) +
                   " disagree on its type: " + detail::formatShape(src.shape) +
                   " and " + detail::formatShape(it->second.shape);
        return false;
      }
      continue;
    }
    State st;
    st.shape = src.shape;
    st.numel = src.elements;
    st.f32 = src.dtype == DType::F32;
    if (st.f32) {
      switch (spec_.method) {
      case GradCompressionSpec::Method::PowerSgd:
        st.compressed =
            gradcomp::powerSgdCompresses(st.shape, spec_.rank, &st.n, &st.m);
        break;
      case GradCompressionSpec::Method::TopK:
        // Indices go as 32 bits.
        st.compressed = st.numel <= std::numeric_limits<uint32_t>::max();
        break;
      case GradCompressionSpec::Method::Int8:
        st.compressed = true;
        break;
      case GradCompressionSpec::Method::None:
        break;
      }
    }
    if (st.compressed) {
      st.residual.assign(st.numel, 0.0f);
      if (spec_.method == GradCompressionSpec::Method::PowerSgd)
        st.q = gradcomp::initialQ(c.grad, st.m, spec_.rank);
    }
    registered_.emplace(c.grad, std::move(st));
  }
  return true;
}

size_t GradientCompression::compressedCount() const noexcept {
  size_t n = 0;
  for (const auto &[name, st] : registered_)
    n += st.compressed;
  return n;
}

std::vector<std::string> GradientCompression::notF32() const {
  std::vector<std::string> names;
  for (const auto &[name, st] : registered_)
    if (!st.f32)
      names.push_back(name);
  return names;
}

bool GradientCompression::compresses(const PlanStep &step) const noexcept {
  const CollectiveStep &c = step.collective;
  if (step.kind != PlanStep::Kind::Collective || c.grad.empty() || c.ranks <= 1)
    return false;
  auto it = registered_.find(c.grad);
  return it != registered_.end() && it->second.compressed;
}

void GradientCompression::countExact(const PlanBuffer &src) noexcept {
  bytes_.sent += src.bytes;
  bytes_.exact += src.bytes;
  ++bytes_.reductions;
}

bool GradientCompression::reduce(const PlanStep &step, const PlanBuffer &src,
                                 const void *srcData, void *dstData,
                                 Collectives &comm, std::string *error) {
  const CollectiveStep &c = step.collective;
  auto it = registered_.find(c.grad);
  if (it == registered_.end() || !it->second.compressed ||
      it->second.numel != src.elements || src.dtype != DType::F32) {
    *error = "the gradient of " + quoteName(c.grad) +
             " has no compression state of its size";
    return false;
  }
  State &st = it->second;
  if (comm.size() != c.ranks) {
    *error = "the communicator has " + std::to_string(comm.size()) +
             " ranks, the step's axis " + std::to_string(c.ranks);
    return false;
  }
  // M = g + e (a copy: dst may be src).
  std::vector<float> m(st.numel);
  std::memcpy(m.data(), srcData, st.numel * 4);
  for (uint64_t i = 0; i < st.numel; ++i)
    m[i] += st.residual[i];
  // The mean of the ranks' decompressed values, and e's next value.
  std::vector<float> out(st.numel), residual(st.numel);
  std::vector<float> savedQ = st.q; // PowerSGD's: kept after an overflow
  uint64_t sent = 0;
  bool ok = false;
  switch (spec_.method) {
  case GradCompressionSpec::Method::PowerSgd:
    ok = powerSgd(st, m, out, residual, comm, error);
    sent = uint64_t(st.n + st.m) * uint64_t(spec_.rank) * 4;
    break;
  case GradCompressionSpec::Method::TopK:
    ok = topK(st, m, out, residual, comm, error);
    sent = gradcomp::topKCount(spec_.fraction, st.numel) * 8;
    break;
  case GradCompressionSpec::Method::Int8:
    ok = int8(c.grad, m, out, residual, comm, error);
    sent = st.numel + 4;
    break;
  case GradCompressionSpec::Method::None:
    *error = "compression is off";
    break;
  }
  if (!ok)
    return false;
  // A result that is not finite (an overflow, which dynamic loss scaling
  // then skips) leaves the residual and Q as they were: one bad step must
  // not poison every later one.
  if (std::all_of(out.begin(), out.end(),
                  [](float v) { return std::isfinite(v); }))
    st.residual = std::move(residual);
  else
    st.q = std::move(savedQ);
  if (c.op == CollectiveOp::ReduceScatter) {
    uint64_t block = st.numel / uint64_t(c.ranks);
    std::memcpy(dstData, out.data() + uint64_t(comm.rank()) * block, block * 4);
  } else {
    std::memcpy(dstData, out.data(), st.numel * 4);
  }
  bytes_.sent += sent;
  bytes_.exact += src.bytes;
  ++bytes_.reductions;
  return true;
}

bool GradientCompression::powerSgd(State &st, const std::vector<float> &m,
                                   std::vector<float> &out,
                                   std::vector<float> &residual,
                                   Collectives &comm, std::string *error) {
  const int64_t n = st.n, cols = st.m, r = spec_.rank;
  // As PyTorch's hook: the warm-started Q orthonormalized, P = M Q.
  gradcomp::orthonormalizeColumns(st.q.data(), cols, r);
  std::vector<float> p(size_t(n * r));
  gradcomp::matmul(m.data(), st.q.data(), p.data(), n, cols, r, false);
  std::string why;
  if (!waitFor(
          comm.allReduce(p.data(), p.size(), DType::F32, ReduceOp::Avg, &why),
          &why)) {
    *error = "PowerSGD's all-reduce of P: " + why;
    return false;
  }
  gradcomp::orthonormalizeColumns(p.data(), n, r);
  // Q = M^T P.
  gradcomp::matmul(m.data(), p.data(), st.q.data(), cols, n, r, true);
  if (!waitFor(comm.allReduce(st.q.data(), st.q.size(), DType::F32,
                              ReduceOp::Avg, &why),
               &why)) {
    *error = "PowerSGD's all-reduce of Q: " + why;
    return false;
  }
  gradcomp::multiplyTransposed(p.data(), st.q.data(), out.data(), n, cols, r);
  for (uint64_t i = 0; i < st.numel; ++i)
    residual[i] = m[i] - out[i];
  return true;
}

bool GradientCompression::topK(State &st, const std::vector<float> &m,
                               std::vector<float> &out,
                               std::vector<float> &residual, Collectives &comm,
                               std::string *error) {
  const uint64_t k = gradcomp::topKCount(spec_.fraction, st.numel);
  std::vector<uint32_t> picked = gradcomp::topK(m.data(), st.numel, k);
  // (index, value) pairs, 8 bytes each.
  std::vector<uint8_t> mine(k * 8), all(k * 8 * uint64_t(comm.size()));
  residual = m;
  for (uint64_t j = 0; j < k; ++j) {
    std::memcpy(&mine[j * 8], &picked[j], 4);
    std::memcpy(&mine[j * 8 + 4], &m[picked[j]], 4);
    residual[picked[j]] = 0;
  }
  std::string why;
  if (!waitFor(
          comm.allGather(mine.data(), all.data(), mine.size(), DType::U8, &why),
          &why)) {
    *error = "top-k's all-gather: " + why;
    return false;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (int r = 0; r < comm.size(); ++r)
    for (uint64_t j = 0; j < k; ++j) {
      const uint8_t *pair = &all[(uint64_t(r) * k + j) * 8];
      uint32_t index;
      float value;
      std::memcpy(&index, pair, 4);
      std::memcpy(&value, pair + 4, 4);
      if (index >= st.numel) {
        *error = "top-k: rank " + std::to_string(r) + " sent index " +
                 std::to_string(index) + " of a gradient of " +
                 std::to_string(st.numel) + " elements";
        return false;
      }
      out[index] += value;
    }
  for (float &v : out)
    v /= float(comm.size());
  return true;
}

bool GradientCompression::int8(const std::string &param,
                               const std::vector<float> &m,
                               std::vector<float> &out,
                               std::vector<float> &residual, Collectives &comm,
                               std::string *error) {
  // A non-finite entry makes the local maximum infinite (not NaN, whose
  // MPI maximum is not defined): every rank then sees infinity.
  float largest = 0;
  for (float v : m)
    largest = std::isfinite(v) ? std::max(largest, std::fabs(v))
                               : std::numeric_limits<float>::infinity();
  std::string why;
  if (!waitFor(comm.allReduce(&largest, 1, DType::F32, ReduceOp::Max, &why),
               &why)) {
    *error = "int8's all-reduce of the scale: " + why;
    return false;
  }
  // Every rank sees the same maximum: a non-finite one (an overflow) makes
  // every rank skip the gather alike, and the result NaN.
  if (!std::isfinite(largest)) {
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    return true;
  }
  const float scale = largest / 127.0f;
  const uint64_t n = m.size();
  std::vector<int8_t> q(n);
  gradcomp::quantizeInt8(m.data(), n, scale,
                         gradcomp::int8Key(seed_, step_, comm.rank(), param),
                         q.data());
  std::vector<int8_t> all(n * uint64_t(comm.size()));
  if (!waitFor(comm.allGather(q.data(), all.data(), n, DType::U8, &why),
               &why)) {
    *error = "int8's all-gather: " + why;
    return false;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    const int8_t *block = all.data() + uint64_t(r) * n;
    for (uint64_t i = 0; i < n; ++i)
      out[i] += scale * float(block[i]);
  }
  for (uint64_t i = 0; i < n; ++i) {
    out[i] /= float(comm.size());
    residual[i] = m[i] - scale * float(q[i]);
  }
  return true;
}

bool GradientCompression::gatherState(Collectives *dp, int64_t dpRank,
                                      std::map<std::string, NpyArray> *out,
                                      std::string *error) {
  out->clear();
  const int ranks = dp ? dp->size() : 1;
  for (const auto &[param, st] : registered_) {
    if (!st.compressed)
      continue;
    std::vector<float> all(st.numel * uint64_t(ranks));
    std::string why;
    if (dp) {
      if (!waitFor(dp->allGather(st.residual.data(), all.data(), st.numel,
                                 DType::F32, &why),
                   &why)) {
        *error = "gathering the gradient residuals of " + quoteName(param) +
                 ": " + why;
        return false;
      }
    } else {
      all = st.residual;
    }
    for (int r = 0; r < ranks; ++r) {
      NpyArray a;
      a.dtype = DType::F32;
      a.shape = st.shape;
      a.data.resize(st.numel * 4);
      std::memcpy(a.data.data(), all.data() + uint64_t(r) * st.numel,
                  st.numel * 4);
      (*out)[gradResidualName(param, dp ? r : dpRank)] = std::move(a);
    }
    if (!st.q.empty()) {
      NpyArray a;
      a.dtype = DType::F32;
      a.shape = {st.m, spec_.rank};
      a.data.resize(st.q.size() * 4);
      std::memcpy(a.data.data(), st.q.data(), a.data.size());
      (*out)[powerSgdQName(param)] = std::move(a);
    }
  }
  return true;
}

void GradientCompression::restore(
    const std::map<std::string, NpyArray> &tensors, int64_t dpRank,
    std::vector<std::string> *notes) {
  std::vector<std::string> missing;
  auto take = [&](const std::string &name, const std::vector<int64_t> &shape,
                  std::vector<float> &into) {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.dtype != DType::F32 ||
        it->second.shape != shape ||
        it->second.data.size() != into.size() * 4) {
      missing.push_back(name);
      return false;
    }
    std::memcpy(into.data(), it->second.data.data(), into.size() * 4);
    return true;
  };
  for (auto &[param, st] : registered_) {
    if (!st.compressed)
      continue;
    if (!take(gradResidualName(param, dpRank), st.shape, st.residual))
      std::fill(st.residual.begin(), st.residual.end(), 0.0f);
    if (!st.q.empty() && !take(powerSgdQName(param), {st.m, spec_.rank}, st.q))
      st.q = gradcomp::initialQ(param, st.m, spec_.rank);
  }
  if (!missing.empty() && notes) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 4; ++i)
      list += (i ? ", " : "") + quoteName(missing[i]);
    if (missing.size() > 4)
      list += " and " + std::to_string(missing.size() - 4) + " more";
    notes->push_back("the checkpoint lacks gradient compression state " + list +
                     " (or holds it with another shape): that state starts "
                     "afresh (zero residuals, PowerSGD's first Q)");
  }
}

} // namespace loomrt
