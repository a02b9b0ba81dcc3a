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
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

class Backend;
class Collectives;
class GradientCompression;
class MeshComms;

/// What the collective steps of a plan compiled for a mesh communicate
/// over (loom-run --collectives=auto|mpi|nccl). Only steps that move data
/// between ranks care: over an axis of one rank, and for rank_slice, a
/// step is a copy on any backend.
enum class StepCollectives {
  /// Device on a backend whose arenas are device memory (CUDA), Host
  /// otherwise.
  Auto,
  /// setCollectives' own Collectives (MPI in loom-run) on host memory,
  /// which needs host arenas (the CPU backend): a cuda plan with a step
  /// that communicates is refused at load.
  Host,
  /// The backend's device collectives (Backend::startDeviceCollectives:
  /// NCCL on CUDA, on the backend's stream), one communicator per mesh
  /// axis larger than 1, each started over that axis's communicator of
  /// setCollectives' Collectives when the first entry whose steps
  /// communicate runs. Refused at load on the CPU backend, and where NCCL
  /// cannot be loaded. An entry whose steps run over them is not recorded
  /// into a CUDA graph (the watchdog polls an event after each NCCL call,
  /// which a capture cannot hold).
  Device,
};

/// "auto", "mpi" (Host), "nccl" (Device): loom-run's names.
const char *stepCollectivesName(StepCollectives kind) noexcept;

/// How Artifact::load prepares an artifact.
struct LoadOptions {
  /// On a backend that can record (CUDA): run each entry eagerly once, record
  /// its steps into a CUDA graph on the second run and replay the graph from
  /// then on. false: plain launches on every run (loom-run --no-cuda-graph).
  bool graphs = true;
  /// Where the backend's notes go (e.g. falling back to PTX); null: stderr.
  std::FILE *log = nullptr;
  /// Time every step of every run (Artifact::profile): the steps are issued
  /// one by one, never recorded, and the backend is synchronized after each
  /// (a collective step waits for its transfer: no overlap), so that a
  /// step's time is its own (loom-run --profile).
  bool profile = false;
  /// After every step that writes floating-point buffers, read them back
  /// and fail (ErrorCode::NonFinite) at the first inf or NaN, naming the
  /// model node whose value it is (plan steps' `nodes`), the step and the
  /// element. Steps are issued one by one, never recorded; slow, for
  /// finding where numbers go bad (loom-run --check-numerics).
  bool checkNumerics = false;
  /// What collective steps that communicate run over (StepCollectives).
  StepCollectives collectives = StepCollectives::Auto;
  /// Device collectives: seconds a rank waits for one before it aborts the
  /// communicator and fails naming it (another rank died or hangs); 0
  /// waits forever. Host collectives time out as their Collectives do.
  double collectiveTimeoutSeconds = 60;
  /// This process's rank among those of its machine (-1: unknown), for
  /// the backend's choice of device (BackendOptions::localRank).
  int localRank = -1;
};

/// The time of one plan step, with LoadOptions::profile: summed over the
/// runs of its entry after the first (which pays for page faults and lazy
/// set-up), or the first run's where the entry ran once.
struct StepProfile {
  std::string entry;
  size_t step = 0;
  PlanStep::Kind kind = PlanStep::Kind::Kernel;
  /// The kernel's symbol; "gemm MxNxK" (with "batch B", "A^T", "B^T" and
  /// the epilogue where they apply); "conv DIRECTION NxCxHxW * OxIxKHxKW"
  /// (x and w; "groups G" when not 1); "attention DIRECTION BxHqxTxD *
  /// BxHkvxSxD" (q and k; "causal", "window W", "mask", "bias" where they
  /// apply); "linear_cross_entropy DIRECTION NxC * VxC transpose_w mean"
  /// (x and w; "transpose_w" where it is set, the reduction,
  /// "ignore_index I" where there is one); "copy N bytes"; "all_reduce sum N
  /// f32 over dp=2" (a collective: its op, reduction, src's elements and
  /// axis; its time is until it completed). Never a comma (the profile is
  /// CSV).
  std::string what;
  uint64_t calls = 0;
  double seconds = 0;
};

/// Watches a run step by step, on a backend whose arenas are host memory
/// (the CPU's): data parallelism all-reduces each gradient as soon as the
/// plan step that writes it last is done, while the rest of the backward
/// runs. Every callback returns false with a message to stop the run.
struct RunObserver {
  /// Output `index` (of the entry's outputs) holds its final value at
  /// `data` (its bytes in the arena): it may be read, and written in place,
  /// until `finish` returns; what is there then is what the run returns.
  std::function<bool(size_t index, void *data, std::string *error)>
      outputReady;
  /// After every plan step (to let communication progress).
  std::function<bool(std::string *error)> afterStep;
  /// After the last step, before the outputs are read back.
  std::function<bool(std::string *error)> finish;
};

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

/// What the collective steps that communicate (plans compiled for a mesh)
/// cost, summed over every run of an Artifact: how many were issued, how
/// long they were in flight (from the issue to the moment a run found them
/// done: an upper bound, since runs look between steps), and how long the
/// runs waited for them (the part the compute around them did not hide).
struct CollectiveTimes {
  int64_t calls = 0;
  double inFlightSeconds = 0;
  double waitedSeconds = 0;
};

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
  static std::unique_ptr<Artifact> load(const std::string &dir,
                                        const LoadOptions &options,
                                        std::string *error,
                                        ErrorCode *code = nullptr) noexcept;

  /// The backend executing the plan: "cpu" or "cuda".
  std::string_view backendName() const noexcept;

  const std::string &directory() const noexcept;
  const Plan &plan() const noexcept;
  const std::string &target() const noexcept; ///< "cpu" or "cuda"
  const std::string &
  sourceModel() const noexcept; ///< "" when the plan has none

  std::vector<std::string> entryNames() const;
  bool hasEntry(std::string_view entry) const noexcept;
  /// The entry called `name`, or nullptr.
  const PlanEntry *entry(std::string_view name) const noexcept;

  /// Every tensor of params.safetensors (parameters and optimizer state),
  /// by name. Empty when the plan has no params file. A tensor that the
  /// plan shards is whole here (shardTensors, loomrt/Mesh.h, takes a
  /// rank's part).
  const std::map<std::string, NpyArray> &initialState() const noexcept;

  /// The ranks a plan with a mesh runs over (docs/plan-format.md): the
  /// world, whose rank gives this process's coordinates on the mesh; its
  /// collective steps go through each axis's communicator (meshComms), or,
  /// with device collectives (LoadOptions::collectives; NCCL on CUDA),
  /// through communicators started over those.
  /// Borrowed: it must outlive the runs (set null before it goes, which
  /// also frees the communicators split from it). Null (the default):
  /// this process alone, which runs collectives over axes of one rank as
  /// copies and refuses an entry that communicates over more
  /// (checkMeshWorld's message). The trainer sets it from
  /// TrainOptions::collectives.
  void setCollectives(Collectives *comm) noexcept;
  /// The communicators of the plan's mesh axes over setCollectives' comm
  /// (loomrt/Mesh.h), built by the first call, or the first run of an
  /// entry that communicates, after setCollectives: with several axes
  /// larger than 1 that splits the comm, a collective, so every rank gets
  /// there at the same point. Null with the error when the comm does not
  /// fit the mesh (checkMeshWorld) or cannot split (Unsupported).
  const MeshComms *meshComms(std::string *error,
                             ErrorCode *code = nullptr) noexcept;
  /// What the plan's collective steps that communicate run over:
  /// LoadOptions::collectives resolved for the backend (Host or Device,
  /// never Auto).
  StepCollectives stepCollectives() const noexcept;
  /// The collective steps' cost so far (see CollectiveTimes).
  CollectiveTimes collectiveTimes() const noexcept;
  Collectives *collectives() const noexcept;
  /// Gradient compression (docs/plan-format.md, `grad_compression`): the
  /// plan's collective steps with a `grad` run through `compression`
  /// (runtime/src/GradCompression.h, internal to libloomrt), synchronously,
  /// instead of their exact reduction. Borrowed; null (the default) runs
  /// every step exactly. train() sets it for its length when compression
  /// is on.
  void setGradientCompression(GradientCompression *compression) noexcept;
  GradientCompression *gradientCompression() const noexcept;

  /// Runs `entry`. `inputs` must hold every input of the entry exactly once
  /// by name, with the plan's dtype and shape (an error names the input and
  /// both types; a sharded input is this rank's [k] shard); unknown names
  /// are an error too. On success `*outputs` holds one array per output, in
  /// plan order. Thread-compatible: one call at a time per Artifact. The
  /// entry's arena is allocated by its first run and kept. An entry that
  /// communicates over the mesh runs on every rank of setCollectives' comm,
  /// in the same order.
  bool run(std::string_view entry, const std::vector<TensorRef> &inputs,
           std::vector<NpyArray> *outputs, std::string *error,
           ErrorCode *code = nullptr) noexcept;

  /// As above, with the inputs as named NpyArrays.
  bool run(std::string_view entry,
           const std::map<std::string, const NpyArray *> &inputs,
           std::vector<NpyArray> *outputs, std::string *error,
           ErrorCode *code = nullptr) noexcept;

  /// Resident training state: every `param` and `state` tensor of the plan
  /// kept in device memory between runs (one allocation, laid out by name),
  /// so training does not move them through the host every step.
  /// setResidentState uploads `tensors` (each param/state input of the plan
  /// must be there with its dtype and shape; other names are ignored).
  bool setResidentState(const std::map<std::string, NpyArray> &tensors,
                        std::string *error, ErrorCode *code = nullptr) noexcept;
  bool hasResidentState() const noexcept;
  /// Downloads the resident state (checkpoints, evaluation, the end of
  /// training): one array per param/state tensor, by name.
  bool readResidentState(std::map<std::string, NpyArray> *tensors,
                         std::string *error,
                         ErrorCode *code = nullptr) noexcept;
  /// Like run(), but every `param` and `state` input comes from the resident
  /// state (device to device; the caller may not pass them), and every output
  /// of kind `output` named like a param/state tensor is written back to it.
  /// Those outputs are returned with their dtype and shape but no data (they
  /// are not downloaded); the others are returned as run() returns them.
  bool runResident(std::string_view entry, const std::vector<TensorRef> &inputs,
                   std::vector<NpyArray> *outputs, std::string *error,
                   ErrorCode *code = nullptr) noexcept;
  /// runResident, watched by `observer` (see RunObserver), which only
  /// backends with host arenas support (canObserveRuns()).
  bool runResident(std::string_view entry, const std::vector<TensorRef> &inputs,
                   std::vector<NpyArray> *outputs, const RunObserver &observer,
                   std::string *error, ErrorCode *code = nullptr) noexcept;
  bool canObserveRuns() const noexcept;

  /// With LoadOptions::profile: every step that ran at least once, in
  /// plan order (entry, then step). Empty otherwise.
  std::vector<StepProfile> profile() const;

private:
  bool runImpl(std::string_view entry, const std::vector<TensorRef> &inputs,
               std::vector<NpyArray> *outputs, bool resident,
               const RunObserver *observer, std::string *error,
               ErrorCode *code) noexcept;
  Artifact();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// "f32 [2, 3]".
std::string describeTensorType(DType dtype, const std::vector<int64_t> &shape);

} // namespace loomrt

#endif // LOOMRT_ARTIFACT_H
