//===- LoomSchedule.cpp - loom-schedule: print and check pipeline schedules
//===//
//
// Generates a named pipeline schedule or reads one written by hand, checks
// it with the rules of docs/pipeline.md (the same check loomc and the
// runtime run) and prints it in the text form, with --stats what the
// simulation measured. Exit status: 0 fine, 1 the schedule is broken (or
// the file cannot be read), 2 the command line is wrong.
//
//===----------------------------------------------------------------------===//

#include "loomrt/DType.h"
#include "loomrt/PipelineSchedule.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace loomrt;
using namespace loomrt::pp;

constexpr const char *kUsage =
    "usage: loom-schedule --pp=P --microbatches=M [--virtual-stages=V]\n"
    "                     (--schedule=NAME | --file=PATH)\n"
    "                     [--boundaries=SPEC] [--stats]\n"
    "\n"
    "Prints a pipeline schedule in the text form of docs/pipeline.md (one\n"
    "'rank R:' line per rank) after checking it: every rank's list is run\n"
    "together in a simulation, and a schedule that would deadlock, leave a\n"
    "send unreceived, receive another message than it expects or run an\n"
    "action before what it needs is refused.\n"
    "\n"
    "  --pp=P               pipeline ranks (P >= 1)\n"
    "  --microbatches=M     micro-batches per step (M >= 1)\n"
    "  --virtual-stages=V   stages per rank (default 1); the schedule has\n"
    "                       S = P * V stages, stage s on rank s mod P\n"
    "  --schedule=NAME      generate one of: gpipe, 1f1b, interleaved, zb-h1\n"
    "  --file=PATH          read a schedule written by hand instead\n"
    "  --boundaries=SPEC    the tensors of the S - 1 boundaries, ';' between\n"
    "                       boundaries, ',' between the tensors of one, e.g.\n"
    "                       'f32[4,64];f32[4,32],i64[4];f32[4,64]'; float\n"
    "                       tensors carry a gradient back. Default: f32[1]\n"
    "                       for every boundary\n"
    "  --stats              also print, as '#' comments, what the simulation\n"
    "                       measured with unit costs (F = 1, B = 2, I = 1,\n"
    "                       W = 1, communication free): the makespan, the\n"
    "                       busy time and the peak number of (stage,\n"
    "                       micro-batch) pairs in flight per rank, and the\n"
    "                       bubble (idle share) next to the schedule's ideal\n"
    "  --help               print this help\n"
    "\n"
    "Exit status: 0 the schedule is fine, 1 it is broken (the message on\n"
    "stderr names the rank, step, action and rule), 2 the command line is\n"
    "wrong.\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "loom-schedule: error: %s\n", message.c_str());
  std::fprintf(stderr, "(loom-schedule --help for the options)\n");
  return 2;
}

bool parsePositive(const std::string &text, int64_t *out) {
  if (text.empty() || text.size() > 9)
    return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + (c - '0');
  }
  if (value < 1)
    return false;
  *out = value;
  return true;
}

/// "1 stage", "2 stages".
std::string counted(int64_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

/// One tensor "f32[4,64]" of boundary `b`, tensor `i`.
bool parseTensor(const std::string &text, int64_t b, int64_t i,
                 BoundaryTensor *out, std::string *error) {
  size_t open = text.find('[');
  if (open == std::string::npos || text.back() != ']') {
    *error = "'" + text + "' is not a tensor type like f32[4,64]";
    return false;
  }
  std::string dtypeName = trim(text.substr(0, open));
  std::optional<DType> dtype = dtypeFromShortName(dtypeName);
  if (!dtype) {
    *error = "'" + text + "': unknown element type '" + dtypeName +
             "' (f64, f32, f16, bf16, i64, i32, i16, i8, ui8, i1)";
    return false;
  }
  out->name = "pp.b" + std::to_string(b) + "." + std::to_string(i);
  out->dtype = std::string(dtypeToShortName(*dtype));
  out->grad = *dtype == DType::F64 || *dtype == DType::F32 ||
              *dtype == DType::F16 || *dtype == DType::BF16;
  out->shape.clear();
  std::string dims = text.substr(open + 1, text.size() - open - 2);
  if (trim(dims).empty())
    return true;
  std::stringstream stream(dims);
  std::string dim;
  while (std::getline(stream, dim, ',')) {
    int64_t value = 0;
    dim = trim(dim);
    if (dim == "0") {
      out->shape.push_back(0);
      continue;
    }
    if (!parsePositive(dim, &value)) {
      *error = "'" + text + "': '" + dim + "' is not a dimension";
      return false;
    }
    out->shape.push_back(value);
  }
  if (!dims.empty() && dims.back() == ',') {
    *error = "'" + text + "': a dimension is missing after the last ','";
    return false;
  }
  return true;
}

bool parseBoundaries(const std::string &spec, int64_t count,
                     std::vector<std::vector<BoundaryTensor>> *out,
                     std::string *error) {
  std::vector<std::string> parts;
  std::string part;
  for (size_t i = 0; i <= spec.size(); ++i) {
    if (i == spec.size() || spec[i] == ';') {
      parts.push_back(trim(part));
      part.clear();
    } else {
      part += spec[i];
    }
  }
  if (int64_t(parts.size()) != count) {
    *error = "--boundaries gives " +
             counted(int64_t(parts.size()), "boundary", "boundaries") +
             "; the schedule's stages have " + std::to_string(count) +
             " (S - 1)";
    return false;
  }
  out->assign(count, {});
  for (int64_t b = 0; b < count; ++b) {
    // Tensors are separated by the commas outside brackets.
    std::vector<std::string> tensors(1);
    int depth = 0;
    for (char c : parts[b]) {
      depth += c == '[' ? 1 : c == ']' ? -1 : 0;
      if (c == ',' && depth == 0)
        tensors.emplace_back();
      else
        tensors.back() += c;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      BoundaryTensor tensor;
      std::string message;
      if (!parseTensor(trim(tensors[i]), b, int64_t(i), &tensor, &message)) {
        *error = "--boundaries, boundary " + std::to_string(b) + ": " + message;
        return false;
      }
      (*out)[b].push_back(std::move(tensor));
    }
  }
  return true;
}

std::string fixed(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4f", value);
  return buffer;
}

int run(int argc, char **argv) {
  int64_t ranks = 0, microbatches = 0, virtualStages = 1;
  std::string name, file, boundarySpec;
  bool haveSchedule = false, haveFile = false, haveBoundaries = false;
  bool stats = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--stats") {
      stats = true;
      continue;
    }
    size_t eq = arg.find('=');
    std::string key = arg.substr(0, eq);
    bool known = key == "--pp" || key == "--microbatches" ||
                 key == "--virtual-stages" || key == "--schedule" ||
                 key == "--file" || key == "--boundaries";
    if (!known)
      return usageError("unknown option '" + arg + "'");
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return usageError(key + " needs a value");
    }
    if (key == "--pp" || key == "--microbatches" || key == "--virtual-stages") {
      int64_t *target = key == "--pp"             ? &ranks
                        : key == "--microbatches" ? &microbatches
                                                  : &virtualStages;
      if (!parsePositive(value, target))
        return usageError(key +
                          " wants a positive integer (at most 9 "
                          "digits), got '" +
                          value + "'");
    } else if (key == "--schedule") {
      name = value;
      haveSchedule = true;
    } else if (key == "--file") {
      file = value;
      haveFile = true;
    } else {
      boundarySpec = value;
      haveBoundaries = true;
    }
  }
  if (!ranks)
    return usageError("--pp=P is required");
  if (!microbatches)
    return usageError("--microbatches=M is required");
  if (haveSchedule == haveFile)
    return usageError("give exactly one of --schedule=NAME and --file=PATH");

  Schedule schedule;
  std::string error;
  if (haveSchedule) {
    if (!generateSchedule(name, ranks, virtualStages, microbatches, &schedule,
                          &error))
      return usageError(error);
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) {
      std::fprintf(stderr,
                   "loom-schedule: error: cannot read '%s': it is a "
                   "directory\n",
                   file.c_str());
      return 1;
    }
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    if (in.is_open())
      text << in.rdbuf();
    if (!in.is_open() || in.bad()) {
      std::fprintf(stderr, "loom-schedule: error: cannot read '%s'\n",
                   file.c_str());
      return 1;
    }
    if (ranks > (int64_t(1) << 20) / virtualStages)
      return usageError("--pp times --virtual-stages is too large");
    if (!parseSchedule(text.str(), ranks, ranks * virtualStages, microbatches,
                       &schedule, &error)) {
      std::fprintf(stderr, "loom-schedule: error: %s: %s\n", file.c_str(),
                   error.c_str());
      return 1;
    }
  }

  int64_t boundaryCount = schedule.stages - 1;
  std::vector<std::vector<BoundaryTensor>> boundaries;
  if (haveBoundaries) {
    if (!parseBoundaries(boundarySpec, boundaryCount, &boundaries, &error))
      return usageError(error);
  } else {
    BoundaryTensor one;
    one.dtype = "f32";
    one.shape = {1};
    one.grad = true;
    boundaries.assign(boundaryCount, {one});
    for (int64_t b = 0; b < boundaryCount; ++b)
      boundaries[b][0].name = "pp.b" + std::to_string(b) + ".0";
  }

  ScheduleStats measured;
  if (!checkSchedule(schedule, boundaries, &measured, &error)) {
    std::string where = haveFile ? file + ": " : "";
    std::fprintf(stderr, "loom-schedule: error: %s%s\n", where.c_str(),
                 error.c_str());
    return 1;
  }

  std::string out = "# " + (haveFile ? file : name) + ": " +
                    counted(ranks, "rank", "ranks") + ", " +
                    counted(schedule.stages, "stage", "stages") + ", " +
                    counted(microbatches, "micro-batch", "micro-batches") +
                    "\n" + printSchedule(schedule);
  if (stats) {
    out += "# makespan: " + std::to_string(measured.makespan) +
           " (F = 1, B = 2, I = 1, W = 1, communication free)\n";
    out += "# busy per rank:";
    for (int64_t b : measured.busy)
      out += " " + std::to_string(b);
    out += "\n# peak in flight per rank:";
    for (int64_t p : measured.peakInFlight)
      out += " " + std::to_string(p);
    double ideal = idealBubble(haveFile ? "file" : name, ranks, virtualStages,
                               microbatches);
    out += "\n# bubble: " + fixed(measured.bubble()) + " measured, " +
           (ideal < 0 ? std::string("no ideal for a schedule from a file")
                      : fixed(ideal) + " ideal") +
           "\n";
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

} // namespace

int main(int argc, char **argv) { return run(argc, argv); }
