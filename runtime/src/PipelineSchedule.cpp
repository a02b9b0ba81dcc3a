//===- PipelineSchedule.cpp - Pipeline schedules: make, read, check -------===//
//
// The named schedules are generated in two passes: first each rank's compute
// order (F, B, I, W), then the sends and receives placed right after the
// action that produces the data and right before the one that needs it. So
// one message channel (activations or gradients, between two neighbouring
// ranks) carries its messages in the order the producer computes them, and
// the generators only have to make the consumer compute them in that order.
//
// The checker runs the rules of docs/pipeline.md ("The checks") in this
// order: the static ones first (1 tokens and ranges, 2 ranks, 5 peers,
// 3 one F and one B or I+W each, 4 program order on each rank), so that
// their messages point at the one action at fault; then a simulation of all
// ranks for what only running them shows (6 wrong message, 7 deadlock,
// 8 unreceived send). Sends never block and receives block until their
// channel has a message, so the ranks form a Kahn network: whatever order
// the simulation advances them in, every receive gets the same message, and
// the times measured with unit costs are the same too.
//
//===----------------------------------------------------------------------===//

#include "loomrt/PipelineSchedule.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <limits>

namespace loomrt {
namespace pp {

namespace {

// Stage-micro-batch pairs beyond which the generators and the checker refuse
// (their tables have one entry per pair); real pipelines have a few hundred.
constexpr int64_t kMaxPairs = int64_t(1) << 20;
// Longest number a token may carry: keeps the parse free of overflow.
constexpr size_t kMaxDigits = 15;

void setError(std::string *error, std::string message) {
  if (error)
    *error = std::move(message);
}

const char *kindPrefix(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "F";
  case ActionKind::Backward:
    return "B";
  case ActionKind::BackwardInput:
    return "I";
  case ActionKind::BackwardWeight:
    return "W";
  case ActionKind::SendActivation:
    return "SF";
  case ActionKind::RecvActivation:
    return "RF";
  case ActionKind::SendGradient:
    return "SB";
  case ActionKind::RecvGradient:
    return "RB";
  }
  return nullptr;
}

bool isValidKind(ActionKind kind) { return kindPrefix(kind) != nullptr; }

std::string str(int64_t v) { return std::to_string(v); }

/// "1 stage", "2 stages".
std::string counted(int64_t n, const char *one, const char *many) {
  return str(n) + " " + (n == 1 ? one : many);
}

std::string token(ActionKind kind, int64_t stage, int64_t microbatch) {
  return formatAction(Action{kind, stage, microbatch});
}

const char *ruleName(int rule) {
  switch (rule) {
  case 1:
    return "tokens, ranges and ranks";
  case 2:
    return "wrong rank";
  case 3:
    return "one F and one B, or one I and one W";
  case 4:
    return "runs before what it needs";
  case 5:
    return "no peer";
  case 6:
    return "wrong message";
  case 7:
    return "deadlock";
  case 8:
    return "unreceived send";
  }
  return "?";
}

std::string ruleSuffix(int rule) {
  return " (rule " + str(rule) + ": " + ruleName(rule) + ")";
}

std::string at(int64_t rank, int64_t step, const Action &action) {
  return "rank " + str(rank) + ", step " + str(step) + " (" +
         formatAction(action) + ")";
}

/// Reads a decimal at `pos` (at least one digit, at most kMaxDigits).
bool readNumber(const std::string &text, size_t *pos, int64_t *out) {
  size_t begin = *pos, end = begin;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9')
    ++end;
  if (end == begin || end - begin > kMaxDigits)
    return false;
  int64_t value = 0;
  for (size_t i = begin; i < end; ++i)
    value = value * 10 + (text[i] - '0');
  *pos = end;
  *out = value;
  return true;
}

/// The counts every schedule needs before its lists mean anything.
bool checkCounts(int64_t ranks, int64_t stages, int64_t microbatches,
                 std::string *error) {
  if (ranks < 1 || stages < 1 || microbatches < 1) {
    setError(error, "a schedule needs at least 1 rank, 1 stage and 1 "
                    "micro-batch (got " +
                        counted(ranks, "rank", "ranks") + ", " +
                        counted(stages, "stage", "stages") + ", " +
                        counted(microbatches, "micro-batch", "micro-batches") +
                        ")" + ruleSuffix(1));
    return false;
  }
  if (stages % ranks != 0) {
    setError(error, "the stages (" + str(stages) +
                        ") must be a multiple of the ranks (" + str(ranks) +
                        "): stage s runs on rank s mod ranks" + ruleSuffix(1));
    return false;
  }
  if (stages > kMaxPairs / microbatches) {
    setError(error, str(stages) + " stages times " + str(microbatches) +
                        " micro-batches is more than the " + str(kMaxPairs) +
                        " pairs schedules are made and checked for" +
                        ruleSuffix(1));
    return false;
  }
  return true;
}

/// Stage and micro-batch of an action in range; `where` prefixes the error.
bool checkRange(const Action &action, int64_t stages, int64_t microbatches,
                const std::string &where, std::string *error) {
  if (action.stage < 0 || action.stage >= stages) {
    setError(error, where + ": names stage " + str(action.stage) +
                        ", but the schedule has " +
                        counted(stages, "stage", "stages") + " (0.." +
                        str(stages - 1) + ")" + ruleSuffix(1));
    return false;
  }
  if (action.microbatch < 0 || action.microbatch >= microbatches) {
    setError(error, where + ": names micro-batch " + str(action.microbatch) +
                        ", but the schedule has " +
                        counted(microbatches, "micro-batch", "micro-batches") +
                        " (0.." + str(microbatches - 1) + ")" + ruleSuffix(1));
    return false;
  }
  return true;
}

/// Appends `order` (compute actions) to `out` with the sends and receives
/// docs/pipeline.md places around them.
std::vector<Action> withCommunication(const std::vector<Action> &order,
                                      int64_t rank, int64_t ranks,
                                      int64_t stages) {
  std::vector<Action> out;
  out.reserve(order.size() * 2);
  auto rankOf = [&](int64_t stage) { return stage % ranks; };
  for (const Action &a : order) {
    int64_t s = a.stage, m = a.microbatch;
    bool backward =
        a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput;
    if (a.kind == ActionKind::Forward && s > 0 && rankOf(s - 1) != rank)
      out.push_back({ActionKind::RecvActivation, s, m});
    if (backward && s < stages - 1 && rankOf(s + 1) != rank)
      out.push_back({ActionKind::RecvGradient, s, m});
    out.push_back(a);
    if (a.kind == ActionKind::Forward && s < stages - 1 &&
        rankOf(s + 1) != rank)
      out.push_back({ActionKind::SendActivation, s, m});
    if (backward && s > 0 && rankOf(s - 1) != rank)
      out.push_back({ActionKind::SendGradient, s, m});
  }
  return out;
}

std::vector<Action> gpipeOrder(int64_t rank, int64_t microbatches) {
  std::vector<Action> order;
  for (int64_t m = 0; m < microbatches; ++m)
    order.push_back({ActionKind::Forward, rank, m});
  for (int64_t m = 0; m < microbatches; ++m)
    order.push_back({ActionKind::Backward, rank, m});
  return order;
}

std::vector<Action> oneFOneBOrder(int64_t rank, int64_t ranks,
                                  int64_t microbatches) {
  int64_t warmup = std::min(ranks - rank - 1, microbatches);
  std::vector<Action> order;
  for (int64_t m = 0; m < warmup; ++m)
    order.push_back({ActionKind::Forward, rank, m});
  for (int64_t i = 0; i < microbatches - warmup; ++i) {
    order.push_back({ActionKind::Forward, rank, warmup + i});
    order.push_back({ActionKind::Backward, rank, i});
  }
  for (int64_t m = microbatches - warmup; m < microbatches; ++m)
    order.push_back({ActionKind::Backward, rank, m});
  return order;
}

/// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_
/// interleaving): the k-th forward of a rank runs chunk (k / P) % V on
/// micro-batch (k / (P V)) P + k % P, the k-th backward the same with the
/// chunks in reverse; warm-up forwards, then one forward and one backward in
/// turn, then the backwards left. Every rank walks the same (chunk,
/// micro-batch) sequence, so each channel delivers in the order it is read.
std::vector<Action> interleavedOrder(int64_t rank, int64_t ranks,
                                     int64_t virtualStages,
                                     int64_t microbatches) {
  int64_t total = microbatches * virtualStages;
  int64_t warmup =
      std::min((ranks - rank - 1) * 2 + (virtualStages - 1) * ranks, total);
  auto microbatchOf = [&](int64_t k) {
    return (k / (ranks * virtualStages)) * ranks + k % ranks;
  };
  auto forward = [&](int64_t k) {
    int64_t chunk = (k / ranks) % virtualStages;
    return Action{ActionKind::Forward, chunk * ranks + rank, microbatchOf(k)};
  };
  auto backward = [&](int64_t k) {
    int64_t chunk = virtualStages - 1 - (k / ranks) % virtualStages;
    return Action{ActionKind::Backward, chunk * ranks + rank, microbatchOf(k)};
  };
  std::vector<Action> order;
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back(forward(k));
  for (int64_t i = 0; i < total - warmup; ++i) {
    order.push_back(forward(warmup + i));
    order.push_back(backward(i));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    order.push_back(backward(k));
  return order;
}

/// ZB-H1 (Qi et al. 2023) as a greedy list schedule over unit-time slots
/// (F = I = W = 1): in each slot every rank runs the first of
///   - I of its oldest micro-batch whose F ran and whose output gradient
///     arrived (the critical path back to rank 0),
///   - F of its next micro-batch, if its input arrived and fewer than
///     P - r micro-batches have run F but not W (1F1B's memory bound),
///   - W of its oldest micro-batch whose I ran,
/// that is ready. The W's so fill the slots where 1F1B's ranks wait. F's and
/// I's run in micro-batch order on every rank, as the channels need.
///
/// With that bound the last rank runs F, I and W of one micro-batch before
/// the F of the next, so no schedule ends before 3 M + 2 (P - 1) slots: the
/// last rank's last I ends at P - 1 + 3 M - 1 at the earliest, P - 1 more
/// I's carry its gradient to rank 0, whose W is last. The paper's 3 M + P - 1
/// frees a micro-batch at its I, holding more micro-batches (those waiting
/// for W) than this bound allows.
bool zeroBubbleH1Orders(int64_t ranks, int64_t microbatches,
                        std::vector<std::vector<Action>> *orders,
                        std::string *error) {
  const int64_t P = ranks, M = microbatches;
  const int64_t never = std::numeric_limits<int64_t>::max();
  // End slot (exclusive) of F and I of (rank, micro-batch), or `never`.
  std::vector<int64_t> fEnd(P * M, never), iEnd(P * M, never);
  std::vector<int64_t> nextF(P, 0), nextI(P, 0), inFlight(P, 0);
  std::vector<std::deque<int64_t>> pendingW(P);
  orders->assign(P, {});
  int64_t left = 3 * P * M;
  // A greedy that works never needs more slots than running everything in
  // sequence; past that it is stuck (it cannot be, but never hang).
  const int64_t limit = 3 * P * M + P + 1;
  for (int64_t t = 0; left > 0; ++t) {
    if (t > limit) {
      setError(error, "zb-h1: the generator is stuck (an internal error)");
      return false;
    }
    for (int64_t r = 0; r < P; ++r) {
      int64_t m = nextI[r];
      if (m < M && fEnd[r * M + m] <= t &&
          (r == P - 1 || iEnd[(r + 1) * M + m] <= t)) {
        iEnd[r * M + m] = t + 1;
        (*orders)[r].push_back({ActionKind::BackwardInput, r, m});
        pendingW[r].push_back(m);
        ++nextI[r];
        --left;
        continue;
      }
      m = nextF[r];
      if (m < M && inFlight[r] < P - r &&
          (r == 0 || fEnd[(r - 1) * M + m] <= t)) {
        fEnd[r * M + m] = t + 1;
        (*orders)[r].push_back({ActionKind::Forward, r, m});
        ++inFlight[r];
        ++nextF[r];
        --left;
        continue;
      }
      if (!pendingW[r].empty() && iEnd[r * M + pendingW[r].front()] <= t) {
        (*orders)[r].push_back(
            {ActionKind::BackwardWeight, r, pendingW[r].front()});
        pendingW[r].pop_front();
        --inFlight[r];
        --left;
      }
    }
  }
  return true;
}

/// Writes a list of boundary tensors as "f32[4,64]", or "{f32[4], i64[4]}".
std::string formatTensors(const std::vector<const BoundaryTensor *> &tensors) {
  std::string out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i)
      out += ", ";
    out += tensors[i]->dtype + "[";
    for (size_t d = 0; d < tensors[i]->shape.size(); ++d)
      out += (d ? "," : "") + str(tensors[i]->shape[d]);
    out += "]";
  }
  if (tensors.empty())
    return "nothing";
  return tensors.size() == 1 ? out : "{" + out + "}";
}

std::vector<const BoundaryTensor *>
messageTensors(const std::vector<BoundaryTensor> &boundary, bool gradient) {
  std::vector<const BoundaryTensor *> out;
  for (const BoundaryTensor &t : boundary)
    if (!gradient || t.grad)
      out.push_back(&t);
  return out;
}

bool sameTensors(const std::vector<const BoundaryTensor *> &a,
                 const std::vector<const BoundaryTensor *> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i]->dtype != b[i]->dtype || a[i]->shape != b[i]->shape)
      return false;
  return true;
}

/// A message on its way: what sent it, where and when.
struct Message {
  Action send;
  int64_t rank = 0;
  int64_t step = 0;
  int64_t time = 0;
};

int64_t cost(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
  case ActionKind::BackwardInput:
  case ActionKind::BackwardWeight:
    return 1;
  case ActionKind::Backward:
    return 2;
  default:
    return 0;
  }
}

} // namespace

std::string formatAction(const Action &action) {
  const char *prefix = kindPrefix(action.kind);
  return std::string(prefix ? prefix : "?") + str(action.stage) + "." +
         str(action.microbatch);
}

bool parseAction(const std::string &text, Action *action, std::string *error) {
  static const struct {
    const char *prefix;
    ActionKind kind;
  } kinds[] = {
      {"SF", ActionKind::SendActivation}, {"RF", ActionKind::RecvActivation},
      {"SB", ActionKind::SendGradient},   {"RB", ActionKind::RecvGradient},
      {"F", ActionKind::Forward},         {"B", ActionKind::Backward},
      {"I", ActionKind::BackwardInput},   {"W", ActionKind::BackwardWeight}};
  for (const auto &k : kinds) {
    std::string prefix = k.prefix;
    if (text.compare(0, prefix.size(), prefix) != 0)
      continue;
    size_t pos = prefix.size();
    Action parsed;
    parsed.kind = k.kind;
    if (readNumber(text, &pos, &parsed.stage) && pos < text.size() &&
        text[pos] == '.' &&
        (++pos, readNumber(text, &pos, &parsed.microbatch)) &&
        pos == text.size()) {
      if (action)
        *action = parsed;
      return true;
    }
    break;
  }
  setError(error, "'" + text +
                      "' is not an action: expected F, B, I, W, SF, RF, SB or "
                      "RB, then <stage>.<micro-batch> (like F0.3)");
  return false;
}

bool isCompute(ActionKind kind) noexcept {
  return kind == ActionKind::Forward || kind == ActionKind::Backward ||
         kind == ActionKind::BackwardInput ||
         kind == ActionKind::BackwardWeight;
}

int64_t stageRank(const Schedule &schedule, int64_t stage) noexcept {
  if (schedule.ranks <= 0 || stage < 0)
    return 0;
  return stage % schedule.ranks;
}

const char *scheduleNames() noexcept {
  return "gpipe, 1f1b, interleaved, zb-h1";
}

bool generateSchedule(const std::string &name, int64_t ranks,
                      int64_t virtualStages, int64_t microbatches,
                      Schedule *out, std::string *error) {
  if (name != "gpipe" && name != "1f1b" && name != "interleaved" &&
      name != "zb-h1") {
    setError(error, "unknown pipeline schedule '" + name +
                        "' (known: " + scheduleNames() + ")");
    return false;
  }
  if (ranks < 1 || virtualStages < 1 || microbatches < 1) {
    setError(error, name +
                        " needs at least 1 rank, 1 virtual stage and 1 "
                        "micro-batch (got " +
                        str(ranks) + ", " + str(virtualStages) + " and " +
                        str(microbatches) + ")");
    return false;
  }
  if (virtualStages != 1 && name != "interleaved") {
    setError(error, name +
                        " runs one stage per rank, so virtual stages must "
                        "be 1 (got " +
                        str(virtualStages) +
                        "); only interleaved runs several");
    return false;
  }
  if (ranks > kMaxPairs / virtualStages ||
      ranks * virtualStages > kMaxPairs / microbatches) {
    setError(error,
             name + ": " + counted(ranks, "rank", "ranks") + " times " +
                 counted(virtualStages, "virtual stage", "virtual stages") +
                 " times " +
                 counted(microbatches, "micro-batch", "micro-batches") +
                 " is more than the " + str(kMaxPairs) +
                 " stage-micro-batch pairs supported");
    return false;
  }
  if (name == "interleaved" && microbatches % ranks != 0) {
    setError(error, "interleaved needs the micro-batches to be a multiple of "
                    "the ranks (got " +
                        str(microbatches) + " micro-batches for " + str(ranks) +
                        " ranks)");
    return false;
  }
  int64_t stages = ranks * virtualStages;
  std::vector<std::vector<Action>> orders(ranks);
  if (name == "zb-h1") {
    if (!zeroBubbleH1Orders(ranks, microbatches, &orders, error))
      return false;
  } else {
    for (int64_t r = 0; r < ranks; ++r) {
      if (name == "gpipe")
        orders[r] = gpipeOrder(r, microbatches);
      else if (name == "1f1b")
        orders[r] = oneFOneBOrder(r, ranks, microbatches);
      else
        orders[r] = interleavedOrder(r, ranks, virtualStages, microbatches);
    }
  }
  Schedule schedule;
  schedule.name = name;
  schedule.ranks = ranks;
  schedule.stages = stages;
  schedule.microbatches = microbatches;
  schedule.actions.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r)
    schedule.actions[r] = withCommunication(orders[r], r, ranks, stages);
  if (out)
    *out = std::move(schedule);
  return true;
}

bool parseSchedule(const std::string &text, int64_t ranks, int64_t stages,
                   int64_t microbatches, Schedule *out, std::string *error) {
  if (!checkCounts(ranks, stages, microbatches, error))
    return false;
  Schedule schedule;
  schedule.name = "file";
  schedule.ranks = ranks;
  schedule.stages = stages;
  schedule.microbatches = microbatches;
  schedule.actions.resize(ranks);
  std::vector<int64_t> rankLine(ranks, 0); // line of "rank R:", 0: none yet
  int64_t current = -1;
  auto isBlank = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  };
  size_t lineBegin = 0;
  for (int64_t lineNo = 1; lineBegin <= text.size(); ++lineNo) {
    size_t lineEnd = text.find('\n', lineBegin);
    if (lineEnd == std::string::npos)
      lineEnd = text.size();
    std::string line = text.substr(lineBegin, lineEnd - lineBegin);
    lineBegin = lineEnd + 1;
    size_t hash = line.find('#');
    if (hash != std::string::npos)
      line.resize(hash);
    std::string where = "line " + str(lineNo);
    size_t pos = 0;
    while (pos < line.size() && isBlank(line[pos]))
      ++pos;
    if (line.compare(pos, 4, "rank") == 0) {
      pos += 4;
      while (pos < line.size() && isBlank(line[pos]))
        ++pos;
      int64_t rank = 0;
      bool ok = readNumber(line, &pos, &rank);
      while (ok && pos < line.size() && isBlank(line[pos]))
        ++pos;
      if (!ok || pos >= line.size() || line[pos] != ':') {
        setError(error, where +
                            ": expected 'rank R:' with R a rank number, "
                            "like 'rank 0:'" +
                            ruleSuffix(1));
        return false;
      }
      ++pos;
      if (rank >= ranks) {
        setError(error, where + ": rank " + str(rank) +
                            " is out of range: the schedule has " +
                            counted(ranks, "rank", "ranks") + " (0.." +
                            str(ranks - 1) + ")" + ruleSuffix(1));
        return false;
      }
      if (rankLine[rank]) {
        setError(error, where + ": rank " + str(rank) +
                            " is given twice (first on line " +
                            str(rankLine[rank]) + ")" + ruleSuffix(1));
        return false;
      }
      rankLine[rank] = lineNo;
      current = rank;
    }
    while (pos < line.size()) {
      while (pos < line.size() && isBlank(line[pos]))
        ++pos;
      size_t end = pos;
      while (end < line.size() && !isBlank(line[end]))
        ++end;
      if (end == pos)
        break;
      std::string word = line.substr(pos, end - pos);
      pos = end;
      if (current < 0) {
        setError(error, where + ": '" + word +
                            "' comes before the first 'rank R:' line" +
                            ruleSuffix(1));
        return false;
      }
      Action action;
      std::string message;
      if (!parseAction(word, &action, &message)) {
        setError(error, where + ": " + message + ruleSuffix(1));
        return false;
      }
      if (!checkRange(action, stages, microbatches, where + ": " + word, error))
        return false;
      schedule.actions[current].push_back(action);
    }
    if (lineEnd == text.size())
      break;
  }
  for (int64_t r = 0; r < ranks; ++r) {
    if (!rankLine[r]) {
      setError(error, "rank " + str(r) + " is missing: there is no 'rank " +
                          str(r) + ":' line" + ruleSuffix(1));
      return false;
    }
  }
  if (out)
    *out = std::move(schedule);
  return true;
}

std::string printSchedule(const Schedule &schedule) {
  std::string out;
  for (size_t r = 0; r < schedule.actions.size(); ++r) {
    out += "rank " + str(int64_t(r)) + ":";
    for (const Action &a : schedule.actions[r])
      out += " " + formatAction(a);
    out += "\n";
  }
  return out;
}

double ScheduleStats::bubble() const {
  if (makespan <= 0 || busy.empty())
    return 0.0;
  int64_t total = 0;
  for (int64_t b : busy)
    total += b;
  return 1.0 - double(total) / (double(busy.size()) * double(makespan));
}

bool checkSchedule(const Schedule &schedule,
                   const std::vector<std::vector<BoundaryTensor>> &boundaries,
                   ScheduleStats *stats, std::string *error) {
  const int64_t P = schedule.ranks, S = schedule.stages,
                M = schedule.microbatches;
  // Rule 1: the counts, one list per rank, every action in range.
  if (!checkCounts(P, S, M, error))
    return false;
  if (int64_t(schedule.actions.size()) != P) {
    setError(error, "the schedule has " + counted(P, "rank", "ranks") +
                        " but " +
                        counted(int64_t(schedule.actions.size()), "action list",
                                "action lists") +
                        ": each rank needs exactly one" + ruleSuffix(1));
    return false;
  }
  if (!boundaries.empty() && int64_t(boundaries.size()) != S - 1) {
    setError(error, "the schedule's " + str(S) + " stages need stages - 1 = " +
                        str(S - 1) + " boundary lists, but " +
                        str(int64_t(boundaries.size())) + " were given");
    return false;
  }
  auto rankOf = [&](int64_t stage) { return stage % P; };
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<Action> &list = schedule.actions[r];
    for (int64_t i = 0; i < int64_t(list.size()); ++i) {
      if (!isValidKind(list[i].kind)) {
        setError(error, "rank " + str(r) + ", step " + str(i) +
                            ": not an action (kind " +
                            str(int64_t(list[i].kind)) + ")" + ruleSuffix(1));
        return false;
      }
      if (!checkRange(list[i], S, M, at(r, i, list[i]), error))
        return false;
    }
  }
  // Rule 2: each action on its stage's rank. The rule names the compute
  // actions; a send or receive of stage s moves what stage s computes or
  // needs, so it belongs to the same rank.
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<Action> &list = schedule.actions[r];
    for (int64_t i = 0; i < int64_t(list.size()); ++i) {
      if (rankOf(list[i].stage) != r) {
        setError(error, at(r, i, list[i]) + ": stage " + str(list[i].stage) +
                            " runs on rank " + str(rankOf(list[i].stage)) +
                            ", not on rank " + str(r) + ruleSuffix(2));
        return false;
      }
    }
  }
  // Rule 5: every send and receive has a peer on another rank.
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<Action> &list = schedule.actions[r];
    for (int64_t i = 0; i < int64_t(list.size()); ++i) {
      const Action &a = list[i];
      int64_t peer;
      bool toNext = a.kind == ActionKind::SendActivation ||
                    a.kind == ActionKind::RecvGradient;
      bool toPrevious = a.kind == ActionKind::RecvActivation ||
                        a.kind == ActionKind::SendGradient;
      if (toNext)
        peer = a.stage + 1;
      else if (toPrevious)
        peer = a.stage - 1;
      else
        continue;
      if (peer < 0 || peer >= S) {
        bool send = a.kind == ActionKind::SendActivation ||
                    a.kind == ActionKind::SendGradient;
        setError(error, at(r, i, a) + ": stage " + str(a.stage) +
                            (peer < 0 ? " is the first stage: there is no "
                                        "stage before it to "
                                      : " is the last stage: there is no "
                                        "stage after it to ") +
                            (send ? "send to" : "receive from") +
                            ruleSuffix(5));
        return false;
      }
      if (rankOf(peer) == r) {
        setError(error, at(r, i, a) + ": stages " +
                            str(std::min(a.stage, peer)) + " and " +
                            str(std::max(a.stage, peer)) +
                            " both run on rank " + str(r) +
                            ", which passes the data on without a send or "
                            "receive" +
                            ruleSuffix(5));
        return false;
      }
    }
  }
  // Rule 3: per stage and micro-batch one F, and one B or one I and one W.
  // Rule 2 put every action on its stage's rank, so the step where an action
  // first runs identifies it; -1: not (yet).
  const int kKinds = 8;
  std::vector<int64_t> first(size_t(kKinds) * S * M, -1);
  auto firstStep = [&](ActionKind kind, int64_t s, int64_t m) -> int64_t & {
    return first[(size_t(kind) * S + s) * M + m];
  };
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<Action> &list = schedule.actions[r];
    for (int64_t i = 0; i < int64_t(list.size()); ++i) {
      const Action &a = list[i];
      int64_t &seen = firstStep(a.kind, a.stage, a.microbatch);
      if (isCompute(a.kind) && seen >= 0) {
        setError(error, at(r, i, a) + ": " + formatAction(a) +
                            " runs a second time (first at step " + str(seen) +
                            ")" + ruleSuffix(3));
        return false;
      }
      if (a.kind == ActionKind::Backward ||
          a.kind == ActionKind::BackwardInput ||
          a.kind == ActionKind::BackwardWeight) {
        ActionKind other = a.kind == ActionKind::Backward
                               ? ActionKind::BackwardInput
                               : ActionKind::Backward;
        int64_t otherStep = firstStep(other, a.stage, a.microbatch);
        if (a.kind == ActionKind::Backward && otherStep < 0)
          otherStep = firstStep(other = ActionKind::BackwardWeight, a.stage,
                                a.microbatch);
        if (otherStep >= 0) {
          setError(error, at(r, i, a) + ": " + formatAction(a) + " and " +
                              token(other, a.stage, a.microbatch) + " (step " +
                              str(otherStep) +
                              ") both run; a stage and micro-batch gets either "
                              "B or I and W" +
                              ruleSuffix(3));
          return false;
        }
      }
      if (seen < 0)
        seen = i;
    }
  }
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t m = 0; m < M; ++m) {
      std::string missing, because;
      int64_t iStep = firstStep(ActionKind::BackwardInput, s, m);
      int64_t wStep = firstStep(ActionKind::BackwardWeight, s, m);
      if (firstStep(ActionKind::Forward, s, m) < 0) {
        missing = token(ActionKind::Forward, s, m);
      } else if (firstStep(ActionKind::Backward, s, m) < 0 && iStep < 0 &&
                 wStep < 0) {
        missing = token(ActionKind::Backward, s, m) + " (or " +
                  token(ActionKind::BackwardInput, s, m) + " and " +
                  token(ActionKind::BackwardWeight, s, m) + ")";
      } else if (iStep >= 0 && wStep < 0) {
        missing = token(ActionKind::BackwardWeight, s, m);
        because = ", which " + token(ActionKind::BackwardInput, s, m) +
                  " (step " + str(iStep) + ") needs after it";
      } else if (wStep >= 0 && iStep < 0) {
        missing = token(ActionKind::BackwardInput, s, m);
        because = ", which " + token(ActionKind::BackwardWeight, s, m) +
                  " (step " + str(wStep) + ") needs before it";
      }
      if (!missing.empty()) {
        setError(error, "rank " + str(rankOf(s)) + " has no " + missing +
                            because + ruleSuffix(3));
        return false;
      }
    }
  }
  // Rule 4: in each rank's list, every action after what it needs.
  // Rule 3 made the compute actions unique; for a receive given twice the
  // first one counts.
  auto backwardOf = [&](int64_t s, int64_t m) {
    return firstStep(ActionKind::Backward, s, m) >= 0
               ? ActionKind::Backward
               : ActionKind::BackwardInput;
  };
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<Action> &list = schedule.actions[r];
    for (int64_t i = 0; i < int64_t(list.size()); ++i) {
      const Action &a = list[i];
      int64_t s = a.stage, m = a.microbatch;
      // What a needs, and why, at most two of them.
      struct Need {
        ActionKind kind;
        int64_t stage;
        const char *what;
      };
      Need needs[2];
      int count = 0;
      switch (a.kind) {
      case ActionKind::Forward:
        if (s > 0)
          needs[count++] =
              rankOf(s - 1) == r
                  ? Need{ActionKind::Forward, s - 1, "its input"}
                  : Need{ActionKind::RecvActivation, s, "its input"};
        break;
      case ActionKind::Backward:
      case ActionKind::BackwardInput:
        needs[count++] = {ActionKind::Forward, s, nullptr};
        if (s < S - 1)
          needs[count++] =
              rankOf(s + 1) == r
                  ? Need{backwardOf(s + 1, m), s + 1, "its output gradient"}
                  : Need{ActionKind::RecvGradient, s, "its output gradient"};
        break;
      case ActionKind::BackwardWeight:
        needs[count++] = {ActionKind::BackwardInput, s, nullptr};
        break;
      case ActionKind::SendActivation:
        needs[count++] = {ActionKind::Forward, s, "what it sends"};
        break;
      case ActionKind::SendGradient:
        needs[count++] = {backwardOf(s, m), s, "what it sends"};
        break;
      default:
        break;
      }
      for (int n = 0; n < count; ++n) {
        int64_t step = firstStep(needs[n].kind, needs[n].stage, m);
        if (step >= 0 && step < i)
          continue;
        std::string need = token(needs[n].kind, needs[n].stage, m);
        if (needs[n].what)
          need += " (" + std::string(needs[n].what) + ")";
        setError(error, at(r, i, a) + ": runs before " + need +
                            ", which has not run on rank " + str(r) + " yet" +
                            ruleSuffix(4));
        return false;
      }
    }
  }

  // Rules 6, 7, 8: run every rank's list. Activations go from rank r to
  // r + 1 (mod P), gradients from r to r - 1: one FIFO per sending rank and
  // kind is one per channel.
  std::vector<std::deque<Message>> activations(P), gradients(P);
  std::vector<int64_t> pc(P, 0), clock(P, 0), busy(P, 0), inFlight(P, 0),
      peak(P, 0);
  auto boundaryTensors = [&](int64_t boundary, bool gradient) {
    static const std::vector<BoundaryTensor> none;
    return messageTensors(boundaries.empty() ? none : boundaries[boundary],
                          gradient);
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < P; ++r) {
      const std::vector<Action> &list = schedule.actions[r];
      while (pc[r] < int64_t(list.size())) {
        const Action &a = list[pc[r]];
        int64_t s = a.stage, m = a.microbatch;
        if (a.kind == ActionKind::RecvActivation ||
            a.kind == ActionKind::RecvGradient) {
          bool gradient = a.kind == ActionKind::RecvGradient;
          std::deque<Message> &channel =
              gradient ? gradients[(r + 1) % P] : activations[(r + P - 1) % P];
          if (channel.empty())
            break;
          const Message &got = channel.front();
          int64_t wantStage = gradient ? s + 1 : s - 1;
          if (got.send.stage != wantStage || got.send.microbatch != m) {
            // The producer whose data a expects, and the consumer that
            // takes it on this rank.
            Action producer{gradient ? backwardOf(s + 1, m)
                                     : ActionKind::Forward,
                            wantStage, m};
            Action consumer{gradient ? backwardOf(s, m) : ActionKind::Forward,
                            s, m};
            std::string message = at(r, pc[r], a) + ": receives the " +
                                  (gradient ? "gradients " : "activations ") +
                                  formatAction(got.send) + " sent by rank " +
                                  str(got.rank) + " at step " + str(got.step) +
                                  ", expected those of " +
                                  formatAction(producer);
            // Boundary b runs between stages b and b + 1.
            int64_t gotBoundary =
                gradient ? got.send.stage - 1 : got.send.stage;
            int64_t wantBoundary = gradient ? s : s - 1;
            if (!boundaries.empty() && !boundaries[gotBoundary].empty() &&
                !boundaries[wantBoundary].empty()) {
              auto gotTensors = boundaryTensors(gotBoundary, gradient);
              auto wantTensors = boundaryTensors(wantBoundary, gradient);
              if (!sameTensors(gotTensors, wantTensors)) {
                std::string suffix = gradient ? "'s gradient)" : ")";
                message += "; it receives " + formatTensors(gotTensors) +
                           " (boundary " + str(gotBoundary) + suffix +
                           " where " + formatAction(consumer) + " takes " +
                           formatTensors(wantTensors) + " (boundary " +
                           str(wantBoundary) + suffix;
              }
            }
            setError(error, message + ruleSuffix(6));
            return false;
          }
          clock[r] = std::max(clock[r], got.time);
          channel.pop_front();
        } else if (a.kind == ActionKind::SendActivation ||
                   a.kind == ActionKind::SendGradient) {
          (a.kind == ActionKind::SendGradient ? gradients : activations)[r]
              .push_back(Message{a, r, pc[r], clock[r]});
        } else {
          clock[r] += cost(a.kind);
          busy[r] += cost(a.kind);
          if (a.kind == ActionKind::Forward)
            peak[r] = std::max(peak[r], ++inFlight[r]);
          else if (a.kind != ActionKind::BackwardInput)
            --inFlight[r];
        }
        ++pc[r];
        progress = true;
      }
    }
  }
  // Rule 7: every rank that has not finished waits in a receive.
  std::string waiting;
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<Action> &list = schedule.actions[r];
    if (pc[r] >= int64_t(list.size()))
      continue;
    const Action &a = list[pc[r]];
    bool gradient = a.kind == ActionKind::RecvGradient;
    int64_t peer = gradient ? (r + 1) % P : (r + P - 1) % P;
    Action send{gradient ? ActionKind::SendGradient
                         : ActionKind::SendActivation,
                gradient ? a.stage + 1 : a.stage - 1, a.microbatch};
    waiting += (waiting.empty() ? "" : "; ") + at(r, pc[r], a) + " waits for " +
               formatAction(send) + " from rank " + str(peer);
    if (pc[peer] >= int64_t(schedule.actions[peer].size()))
      waiting += ", which has finished";
  }
  if (!waiting.empty()) {
    setError(error, "the ranks deadlock: " + waiting + ruleSuffix(7));
    return false;
  }
  // Rule 8: a message left in a channel was never received.
  const Message *lost = nullptr;
  int64_t lostCount = 0, lostTo = 0;
  for (int64_t r = 0; r < P; ++r) {
    for (bool gradient : {false, true}) {
      const std::deque<Message> &channel =
          gradient ? gradients[r] : activations[r];
      lostCount += int64_t(channel.size());
      // Channels of lower ranks come first, and in one channel the
      // earliest send: the first unreceived send by (rank, step).
      if (!channel.empty() &&
          (!lost || (lost->rank == r && channel.front().step < lost->step))) {
        lost = &channel.front();
        lostTo = gradient ? (r + P - 1) % P : (r + 1) % P;
      }
    }
  }
  if (lost) {
    std::string more;
    if (lostCount == 2)
      more = "; 1 more send is not received either";
    else if (lostCount > 2)
      more = "; " + str(lostCount - 1) + " more sends are not received either";
    setError(error, at(lost->rank, lost->step, lost->send) +
                        ": sends to rank " + str(lostTo) +
                        ", which never "
                        "receives it" +
                        more + ruleSuffix(8));
    return false;
  }
  if (stats) {
    stats->makespan = *std::max_element(clock.begin(), clock.end());
    stats->busy = busy;
    stats->peakInFlight = peak;
  }
  return true;
}

double idealBubble(const std::string &name, int64_t ranks,
                   int64_t virtualStages, int64_t microbatches) noexcept {
  if (ranks < 1 || virtualStages < 1 || microbatches < 1)
    return -1;
  double P = double(ranks), V = double(virtualStages), M = double(microbatches);
  if (name == "gpipe" || name == "1f1b")
    return (P - 1) / (M + P - 1);
  if (name == "interleaved")
    return (P - 1) / (V * M + P - 1);
  if (name == "zb-h1")
    return (P - 1) / (3 * M + P - 1);
  return -1;
}

} // namespace pp
} // namespace loomrt
