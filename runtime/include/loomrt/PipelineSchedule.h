//===- PipelineSchedule.h - Pipeline schedules: make, read, check -*- C++ -*-===//
//
// A pipeline schedule is, for each pipeline rank, the list of actions it
// runs in one training step (docs/pipeline.md): forwards and backwards of
// a stage on a micro-batch, and the sends and receives of activations and
// their gradients between the ranks of neighbouring stages. This header
// generates the named schedules (gpipe, 1f1b, interleaved, zb-h1), reads
// and writes the text form users write by hand, and checks a schedule by
// running every rank's list together in a simulation: a schedule that
// would deadlock, leave a send unreceived, receive another message or
// shape than it expects, or run an action before what it needs, is refused
// with a message naming the rank, the step and the action.
//
// Shared by loomc (which generates and checks the schedule it writes into
// each plan) and the runtime (which checks the plan's lists again at load
// and runs them). Plain C++, no MLIR; nothing here throws.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_PIPELINESCHEDULE_H
#define LOOMRT_PIPELINESCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace loomrt {
namespace pp {

enum class ActionKind {
  Forward,        // F<s>.<m>
  Backward,       // B<s>.<m>
  BackwardInput,  // I<s>.<m>
  BackwardWeight, // W<s>.<m>
  SendActivation, // SF<s>.<m>
  RecvActivation, // RF<s>.<m>
  SendGradient,   // SB<s>.<m>
  RecvGradient,   // RB<s>.<m>
};

struct Action {
  ActionKind kind = ActionKind::Forward;
  int64_t stage = 0;
  int64_t microbatch = 0;
  bool operator==(const Action &o) const noexcept {
    return kind == o.kind && stage == o.stage && microbatch == o.microbatch;
  }
};

/// "F0.3", "SB2.1", ...
std::string formatAction(const Action &action);
/// Parses one token; false plus a message (naming the token) when it is not
/// one of the forms of docs/pipeline.md.
bool parseAction(const std::string &token, Action *action, std::string *error);

/// Whether an action computes (F, B, I, W) rather than communicates.
bool isCompute(ActionKind kind) noexcept;

/// A whole schedule: `ranks` pipeline ranks, `stages` = ranks * virtual
/// stages, stage s on rank s % ranks, `microbatches` per step.
struct Schedule {
  std::string name; // gpipe, 1f1b, interleaved, zb-h1, or "file"
  int64_t ranks = 1;
  int64_t stages = 1;
  int64_t microbatches = 1;
  std::vector<std::vector<Action>> actions; // one list per rank
};

/// The rank that runs stage `stage`: stage % ranks.
int64_t stageRank(const Schedule &schedule, int64_t stage) noexcept;

/// Generates a named schedule for `ranks` ranks, `virtualStages` stages per
/// rank and `microbatches` micro-batches (sends and receives included).
/// Errors (false plus a message): an unknown name (listing the known ones),
/// counts out of range, virtual stages other than 1 for schedules other
/// than interleaved, interleaved with `microbatches` not a multiple of
/// `ranks`. zb-h1 keeps 1F1B's bound (rank r holds at most P - r
/// micro-batches between F and W); docs/pipeline.md says what that costs.
bool generateSchedule(const std::string &name, int64_t ranks,
                      int64_t virtualStages, int64_t microbatches,
                      Schedule *out, std::string *error);

/// The schedule names generateSchedule knows, for --help: "gpipe, 1f1b,
/// interleaved, zb-h1".
const char *scheduleNames() noexcept;

/// Reads the text form (docs/pipeline.md). `ranks`, `stages` and
/// `microbatches` come from the compile (the file does not repeat them);
/// errors name the line.
bool parseSchedule(const std::string &text, int64_t ranks, int64_t stages,
                   int64_t microbatches, Schedule *out, std::string *error);
/// The text form, one "rank R:" line per rank.
std::string printSchedule(const Schedule &schedule);

/// One tensor of a boundary between stages.
struct BoundaryTensor {
  std::string name;  // pp.b<b>.<i>
  std::string dtype; // f32, i64, ... (loomrt dtype names)
  std::vector<int64_t> shape;
  bool grad = false; // carries a gradient back
};

/// What the simulation measured, with unit costs F = 1, B = 2, I = 1,
/// W = 1 and free communication.
struct ScheduleStats {
  int64_t makespan = 0;              // time units of the whole step
  std::vector<int64_t> busy;         // per rank: time spent computing
  std::vector<int64_t> peakInFlight; // per rank: most (stage, micro-batch)
                                     // pairs whose F ran and whose B (or W)
                                     // has not; micro-batches when V = 1
  /// The idle share over ranks: 1 - sum busy / (ranks * makespan); 0 when
  /// nothing ran.
  double bubble() const;
};

/// Checks `schedule` against the rules of docs/pipeline.md ("The checks"),
/// `boundaries[b]` the tensors of boundary b (stages - 1 of them; empty
/// lists are allowed when only the order is checked). On success fills
/// `stats` (when not null). On failure: false and one message naming the
/// rank, the step (0-based position in its list), the action and the rule,
/// e.g. "rank 1, step 4 (RF1.2): receives the activations SF0.3 sent by rank
/// 0 at step 7, expected those of F0.2 (rule 6: wrong message)". The static
/// rules are checked first (1, 2, 5, 3, then 4 in each rank's order), then
/// the simulation's (6, 7, 8). Rule 2 holds sends and receives to their
/// stage's rank too. Schedules of more than 2^20 stage-micro-batch pairs
/// are refused (rule 1).
bool checkSchedule(const Schedule &schedule,
                   const std::vector<std::vector<BoundaryTensor>> &boundaries,
                   ScheduleStats *stats, std::string *error);

/// The ideal idle share of the named schedule (docs/pipeline.md's table):
/// (P - 1) / (M + P - 1) for gpipe and 1f1b, (P - 1) / (V M + P - 1) for
/// interleaved, (P - 1) / (3 M + P - 1) for zb-h1; -1 for other names and
/// for counts below 1.
double idealBubble(const std::string &name, int64_t ranks,
                   int64_t virtualStages, int64_t microbatches) noexcept;

} // namespace pp
} // namespace loomrt

#endif // LOOMRT_PIPELINESCHEDULE_H
