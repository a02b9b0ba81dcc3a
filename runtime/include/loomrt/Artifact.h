//===- Artifact.h - A compiled Loom artifact, loaded and runnable -*- C++
//-*-===//
//
// An artifact is the directory `loomc --target=cpu -o OUT.loom` writes:
// plan.json, kernels.so, params.safetensors, final.mlir. The plan format is
// docs/plan-format.md. Loading validates the whole plan (every offset, size,
// dtype, buffer id and kernel symbol) and the parameter file against it before
// anything can run.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_ARTIFACT_H
#define LOOMRT_ARTIFACT_H

#include "loomrt/DType.h"
#include "loomrt/ErrorCode.h"
#include "loomrt/Npy.h"
#include "loomrt/Plan.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

class Backend;

/// A borrowed tensor given to Artifact::run: `nbytes` bytes at `data`, dense,
/// row-major, little-endian.
struct TensorRef {
  std::string_view name;
  DType dtype = DType::F32;
  const int64_t *shape = nullptr;
  size_t rank = 0;
  const void *data = nullptr;
  uint64_t nbytes = 0;
};

/// A TensorRef viewing `array` under `name`.
TensorRef tensorRef(std::string_view name, const NpyArray &array) noexcept;

class Artifact {
public:
  ~Artifact();
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  /// Loads and validates the artifact in `dir`: plan.json (readPlan), the
  /// kernels file (dlopen, every symbol resolved) and the params file (every
  /// param/state input of every entry has a tensor of that name, dtype and
  /// shape). On failure returns null and sets `*error` to a message naming the
  /// file, entry, step and field, and `*code`.
  static std::unique_ptr<Artifact> load(const std::string &dir,
                                        std::string *error,
                                        ErrorCode *code = nullptr) noexcept;

  const std::string &directory() const noexcept;
  const Plan &plan() const noexcept;
  const std::string &target() const noexcept; ///< "cpu"
  const std::string &
  sourceModel() const noexcept; ///< "" when the plan has none

  std::vector<std::string> entryNames() const;
  bool hasEntry(std::string_view entry) const noexcept;
  /// The entry called `name`, or nullptr.
  const PlanEntry *entry(std::string_view name) const noexcept;

  /// Every tensor of params.safetensors (parameters and optimizer state),
  /// by name. Empty when the plan has no params file.
  const std::map<std::string, NpyArray> &initialState() const noexcept;

  /// Runs `entry`. `inputs` must hold every input of the entry exactly once
  /// by name, with the plan's dtype and shape (an error names the input and
  /// both types); unknown names are an error too. On success `*outputs` holds
  /// one array per output, in plan order. Thread-compatible: one call at a
  /// time per Artifact. The entry's arena is allocated by its first run and
  /// kept.
  bool run(std::string_view entry, const std::vector<TensorRef> &inputs,
           std::vector<NpyArray> *outputs, std::string *error,
           ErrorCode *code = nullptr) noexcept;

  /// As above, with the inputs as named NpyArrays.
  bool run(std::string_view entry,
           const std::map<std::string, const NpyArray *> &inputs,
           std::vector<NpyArray> *outputs, std::string *error,
           ErrorCode *code = nullptr) noexcept;

private:
  Artifact();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// "f32 [2, 3]".
std::string describeTensorType(DType dtype, const std::vector<int64_t> &shape);

} // namespace loomrt

#endif // LOOMRT_ARTIFACT_H
