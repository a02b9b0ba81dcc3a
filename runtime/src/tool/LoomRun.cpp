//===- LoomRun.cpp - loom-run: evaluate an entry, train, export -----------===//
//
// The command line over Artifact and Trainer. Every failure is a message on
// stderr and a non-zero exit status (1: the run failed, 2: the command line
// is wrong); nothing here may crash or hang on bad input.
//
//===----------------------------------------------------------------------===//

#include "loomrt/LoomRun.h"

#include "loomrt/Artifact.h"
#include "loomrt/Backend.h"
#include "loomrt/Mesh.h"
#include "loomrt/OnnxExport.h"
#include "loomrt/Safetensors.h"
#include "loomrt/Trainer.h"
#include "loomrt/loomrt.h"

#include "../GradCompression.h"
#include "../Half.h"
#include "../Support.h"
#include "MpiCollectives.h"

#include <algorithm>
#include <array>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace loomrt {

namespace {

namespace fs = std::filesystem;

const char kHelp[] = R"(usage: loom-run ARTIFACT.loom MODE [options]

Runs an artifact written by `loomc ... --target=cpu|cuda -o ARTIFACT.loom` (a
directory holding plan.json, kernels.so or kernels.cubin/kernels.ptx, and
params.safetensors). The plan's target picks the backend: cpu, or cuda (the
NVIDIA driver and cuBLASLt are loaded at run time; without them a cuda
artifact fails with the reason).

Modes (exactly one):
  --entry=NAME            evaluate entry point NAME once; write its outputs
  --train                 train (entry train_step; with --accumulate N > 1,
                          forward_backward N times, then apply_optimizer)
  --info                  list the entry points, their inputs and outputs
  --export-onnx=OUT.onnx  without --train: write the params and buffers (the
                          artifact's, or --params / --resume) into a copy of
                          the ONNX model; with --train: the trained ones

Evaluating an entry (--entry):
  --input NAME=FILE.npy   the value of input NAME (repeatable). Params,
                          buffers and optimizer state default to the artifact's
                          params.safetensors (or --params); `step` defaults to
                          the --params checkpoint's step or 0, `seed` to one
                          derived from --seed and step
  --params FILE           safetensors with params/buffers/state (a checkpoint
                          works)
  --output-dir DIR        write output NAME as DIR/NAME.npy (names sanitized:
                          characters other than A-Z a-z 0-9 . _ - become _)
  --seed S                (default 0)

Training (--train):
  --data FILE.npz         one array per data input of the entry, named like
                          it, shaped [N, <the input's shape without batch>]
  --tokens=uint16|uint32  --data (and --eval-data) is instead a flat file of
                          token ids, read window by window: sample s is the
                          T + 1 tokens from s * T (T: the inputs' [batch,
                          T]); the token input gets the first T, the labels
                          the last T
  --tokens=megatron       --data PREFIX: a Megatron indexed dataset
                          (PREFIX.bin, PREFIX.idx), its documents from the
                          index
  --labels-input NAME     the input that gets the next tokens (default labels)
  --doc-separator ID      the token that ends a document (packed sequences;
                          flat files)
  --documents-input NAME  gets each position's document index in its window
  --positions-input NAME  gets each position's index within its document
  --data-trace FILE       one JSON line per micro-batch: step, micro-batch,
                          data-parallel rank and the sample indices it read
  --steps N               train until N optimizer steps are done (counting
                          the steps of a resumed checkpoint)
  --batch-size B          optional; must equal the compiled batch size
  --accumulate N          average gradients over N micro-batches (default 1)
  --seed S                shuffling and dropout seed (default 0)
  --eval-data FILE.npz    held-out data: accuracy via entry `predict`, loss
                          via entry `forward`, on full batches (the rest of
                          the samples is dropped); evaluated at the end
  --eval-every K          and every K steps
  --resume CKPT|DIR       continue from a checkpoint (a directory: its newest)
                          exactly as the uninterrupted run would have
  --params FILE           start from these params/state instead
  --checkpoint-dir DIR    write DIR/ckpt-<step>.safetensors and DIR/latest
                          at the end (and every --save-every K steps)
  --save-every K
  --keep-checkpoints N    keep the newest N checkpoints (default 3; 0: all)
  --metrics FILE          one JSON object per step and per evaluation
                          (appended to when resuming)
  --save-params FILE      write the final params and buffers (BatchNorm
                          running statistics) as safetensors
  --progress=MODE         auto (default: a bar on a terminal, else a line
                          every 10% of the steps), bar, lines or none
  --quiet                 print only errors
  --no-prefetch           assemble batches on the training thread

Data parallel (--train under an MPI launcher):
  mpirun -np R loom-run ART --train ...   every rank takes --accumulate
                          micro-batches of each step (R x that in all) and
                          the gradients are averaged over the ranks: the
                          same update as one process with --accumulate R x N.
                          Rank 0 alone prints and writes metrics, checkpoints
                          and --save-params; every rank reads the same files.
  --ranks-per-node K      group consecutive ranks by K as machines (default:
                          as the launcher placed them)
  --allreduce MODE        flat (MPI's, over all ranks), hierarchical
                          (reduce-scatter in a machine, all-reduce across,
                          all-gather in a machine) or auto (default:
                          hierarchical with several machines of several ranks)
  --bucket-mb MB          with one micro-batch per rank (CPU): sum the
                          gradients in buckets of at least MB MiB (a
                          decimal), each issued as soon as the backward has
                          written it (default 25; a step's first bucket
                          closes at 1 MiB, as in DDP); 0 sums them all
                          after the backward
  --collective-timeout S  seconds a rank waits for a collective before it
                          ends the job with an error naming itself and the
                          collective (another rank died or hangs); default
                          60, 0 waits forever; also NCCL's (--collectives)

Pipeline parallel (an artifact compiled with loomc --pp; --train):
  mpirun -np N loom-run ART --train ...   N: the product of the plan's mesh
                          sizes; each rank runs its pipeline coordinate's
                          action list every step; the summary gives each
                          pipeline rank's measured bubble next to the
                          schedule's ideal one, and its peak stashed
                          activations per stage
  --pp-trace FILE         rank 0 writes every rank's actions (rank, step,
                          action, start and end in seconds) as JSON lines

Plans compiled for several ranks (loomc --dp, --zero, --tp, --pp; --train, --entry):
  mpirun -np N loom-run ART ...   N: the product of the plan's mesh sizes
  --collectives=MODE      what the plan's collective steps communicate over:
                          auto (default): nccl for a cuda artifact, mpi for
                          a cpu one; mpi: MPI on host memory (cpu artifacts
                          only: a cuda artifact whose steps communicate is
                          refused); nccl: NCCL on the GPU's memory, queued
                          on the stream of the kernels around them (cuda
                          artifacts only; libnccl.so.2, or the library
                          LOOMRT_NCCL_LIBRARY names, 2.10 or newer; one
                          communicator per mesh axis larger than 1, started
                          over MPI; one GPU per rank: local rank modulo the
                          GPUs, unless LOOMRT_CUDA_DEVICE is set). Gathering
                          shards for checkpoints, and the runtime's data
                          parallelism (an artifact without a mesh), use MPI
                          whatever this says
  --grad-compression=SPEC with --train: compress the plan's data-parallel
                          gradient reductions (its collective steps over dp
                          that name a `grad`) with error feedback: none,
                          powersgd:rank=R, topk:FRACTION (0 < FRACTION <= 1:
                          the share of entries sent) or int8. Default: the
                          plan's grad_compression (loomc
                          --grad-compression), else none. cpu artifacts
                          only (a cuda one is refused, and so is a mesh
                          with a tp axis); each compressed reduction runs
                          synchronously at its step. Checkpoints keep every
                          rank's residuals (restored with the same SPEC and
                          dp ranks, else zero); the summary and the last
                          metrics line give the bytes sent per step against
                          the exact reductions'

CPU (--entry, --train):
  --threads N             threads for the kernels (OpenMP) and the GEMMs
                          (OpenBLAS); default: all cores

CUDA (--entry, --train):
  --profile FILE          time every kernel, GEMM and copy of the plan (steps
                          issued one by one and waited for; no CUDA graph)
                          and write FILE (CSV: entry, step, kind, what,
                          calls, total_ms, ms_per_call, share of the entry's
                          run), slowest first; the first run of each entry
                          is left out where it ran more than once
  --no-cuda-graph         launch every step's kernels one by one instead of
                          replaying a recorded CUDA graph

Finding where numbers go bad (--entry, --train):
  --check-numerics        after every kernel, GEMM and convolution, read back
                          what it wrote and stop at the first inf or NaN,
                          naming the model node (ONNX node or JSON node id)
                          whose value it is and, in training, the step
                          (slow: steps are issued one by one and read back)

ONNX export (--export-onnx):
  --onnx SRC.onnx         the model to copy (default: the plan's source_model)

  --help                  this text
  --version               the runtime version

Exit status: 0 on success, 1 if the run failed, 2 for a bad command line.
See docs/loom-run.md.
)";

/// A command-line error (exit 2) or a run failure (exit 1).
struct Exit {
  int status;
  std::string message;
};

[[noreturn]] void usage(const std::string &message) {
  throw Exit{kExitUsage, message};
}
[[noreturn]] void failure(const std::string &message) {
  throw Exit{kExitFailure, message};
}

enum class Mode { None, Entry, Train, Info, Export };

struct Args {
  std::string artifact;
  Mode mode = Mode::None;
  std::string entry;
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir;
  std::string exportOnnx, onnxSource;
  TrainOptions train;
  bool quiet = false;
  bool cudaGraphs = true;
  int threads = 0; // 0: all cores
  std::string profilePath; // --profile
  bool checkNumerics = false;
  MpiOptions mpi; // --ranks-per-node, --allreduce
  StepCollectives collectives = StepCollectives::Auto; // --collectives
  std::set<std::string> given; // flags seen, for mode checks
  bool modeSet = false;        // a mode flag was given
  bool help = false, version = false;
};

const char *modeFlag(Mode mode) {
  switch (mode) {
  case Mode::Entry:
    return "--entry";
  case Mode::Train:
    return "--train";
  case Mode::Info:
    return "--info";
  case Mode::Export:
    return "--export-onnx";
  case Mode::None:
    break;
  }
  return "";
}

/// A non-negative integer, strictly: digits only, no sign, no overflow.
int64_t parseCount(const std::string &flag, const std::string &text) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    usage("--" + flag + " expects a non-negative integer, got '" + text + "'");
  return std::stoll(text);
}

/// A non-negative decimal number of `unit`s ("60", "2.5"), at most 1e9.
double parseAmount(const std::string &flag, const std::string &text,
                   const char *unit) {
  char *end = nullptr;
  double v = text.empty() ? -1 : std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || v > 1e9 ||
      text.find_first_not_of("0123456789.") != std::string::npos)
    usage("--" + flag + " expects a number of " + unit + ", got '" + text +
          "'");
  return v;
}

uint64_t parseSeed(const std::string &text) {
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    usage("--seed expects a non-negative integer, got '" + text + "'");
  uint64_t value = 0;
  for (char c : text) {
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10)
      usage("--seed " + text + " does not fit 64 bits");
    value = value * 10 + digit;
  }
  return value;
}

/// Sets the run's mode (--entry, --train, --info, --export-onnx): one only.
void setMode(Args &args, Mode mode) {
  if (args.modeSet && args.mode != mode)
    usage(std::string("give one mode: ") + modeFlag(args.mode) + " and " +
          modeFlag(mode) + " conflict");
  args.mode = mode;
  args.modeSet = true;
}

/// One of `choices` (value -> result), or a usage error listing them.
template <typename T>
T parseChoice(const std::string &flag, const std::string &value,
              std::initializer_list<std::pair<const char *, T>> choices) {
  std::string names;
  for (const auto &[name, result] : choices) {
    if (value == name)
      return result;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  size_t comma = names.rfind(", ");
  if (comma != std::string::npos)
    names.replace(comma, 2, " or ");
  usage("--" + flag + " expects " + names + ", got '" + value + "'");
}

/// The modes a flag applies to (bits of 1 << Mode); kAnyMode: every mode.
using Modes = unsigned;
constexpr Modes bit(Mode m) { return 1u << unsigned(m); }
constexpr Modes kAnyMode = 0;
constexpr Modes kEntry = bit(Mode::Entry), kTrain = bit(Mode::Train),
                kExport = bit(Mode::Export);

/// Every flag of loom-run, once: its name, whether it takes a value, the
/// modes it applies to, and what it sets. --help (kHelp) describes each;
/// LoomRunTest.FlagTableMatchesHelpAndDocs checks that the help and
/// docs/loom-run.md name exactly these.
struct Flag {
  const char *name;
  bool value;
  Modes modes;
  void (*apply)(Args &args, const std::string &value);
};

const Flag kFlags[] = {
    // Modes.
    {"entry", true, kAnyMode,
     [](Args &a, const std::string &v) {
       if (v.empty())
         usage("--entry needs an entry name");
       setMode(a, Mode::Entry);
       a.entry = v;
     }},
    {"train", false, kAnyMode,
     [](Args &a, const std::string &) { setMode(a, Mode::Train); }},
    {"info", false, kAnyMode,
     [](Args &a, const std::string &) { setMode(a, Mode::Info); }},
    {"export-onnx", true, kAnyMode,
     [](Args &a, const std::string &v) { a.exportOnnx = v; }},
    {"help", false, kAnyMode,
     [](Args &a, const std::string &) { a.help = true; }},
    {"version", false, kAnyMode,
     [](Args &a, const std::string &) { a.version = true; }},
    // Evaluating an entry.
    {"input", true, kEntry,
     [](Args &a, const std::string &v) {
       size_t eq = v.find('=');
       if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
         usage("--input expects NAME=FILE.npy, got '" + v + "'");
       a.inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
     }},
    {"output-dir", true, kEntry,
     [](Args &a, const std::string &v) { a.outputDir = v; }},
    {"params", true, kTrain | kEntry | kExport,
     [](Args &a, const std::string &v) { a.train.paramsPath = v; }},
    {"seed", true, kTrain | kEntry,
     [](Args &a, const std::string &v) { a.train.seed = parseSeed(v); }},
    // Training: data.
    {"data", true, kTrain,
     [](Args &a, const std::string &v) { a.train.dataPath = v; }},
    {"tokens", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.tokens.format = parseChoice<TokenFormat>(
           "tokens", v,
           {{"uint16", TokenFormat::U16},
            {"uint32", TokenFormat::U32},
            {"megatron", TokenFormat::Megatron}});
     }},
    {"labels-input", true, kTrain,
     [](Args &a, const std::string &v) { a.train.tokens.labels = v; }},
    {"doc-separator", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.tokens.docSeparator = parseCount("doc-separator", v);
     }},
    {"documents-input", true, kTrain,
     [](Args &a, const std::string &v) { a.train.tokens.documentsInput = v; }},
    {"positions-input", true, kTrain,
     [](Args &a, const std::string &v) { a.train.tokens.positionsInput = v; }},
    {"data-trace", true, kTrain,
     [](Args &a, const std::string &v) { a.train.dataTracePath = v; }},
    {"no-prefetch", false, kTrain,
     [](Args &a, const std::string &) { a.train.prefetch = false; }},
    // Training: the schedule.
    {"steps", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.steps = parseCount("steps", v);
     }},
    {"batch-size", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.batchSize = parseCount("batch-size", v);
       if (a.train.batchSize == 0)
         usage("--batch-size must be positive");
     }},
    {"accumulate", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.accumulate = parseCount("accumulate", v);
       if (a.train.accumulate == 0)
         usage("--accumulate must be at least 1");
     }},
    {"eval-data", true, kTrain,
     [](Args &a, const std::string &v) { a.train.evalDataPath = v; }},
    {"eval-every", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.evalEvery = parseCount("eval-every", v);
     }},
    // Training: state and files.
    {"resume", true, kTrain | kExport,
     [](Args &a, const std::string &v) { a.train.resumePath = v; }},
    {"checkpoint-dir", true, kTrain,
     [](Args &a, const std::string &v) { a.train.checkpointDir = v; }},
    {"save-every", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.saveEvery = parseCount("save-every", v);
     }},
    {"keep-checkpoints", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.keepCheckpoints = parseCount("keep-checkpoints", v);
     }},
    {"metrics", true, kTrain,
     [](Args &a, const std::string &v) { a.train.metricsPath = v; }},
    {"save-params", true, kTrain,
     [](Args &a, const std::string &v) { a.train.saveParamsPath = v; }},
    {"progress", true, kTrain,
     [](Args &a, const std::string &v) {
       a.train.progress = parseChoice<ProgressMode>(
           "progress", v,
           {{"auto", ProgressMode::Auto},
            {"bar", ProgressMode::Bar},
            {"lines", ProgressMode::Lines},
            {"none", ProgressMode::None}});
     }},
    {"quiet", false, kAnyMode,
     [](Args &a, const std::string &) { a.quiet = true; }},
    // Several ranks.
    {"ranks-per-node", true, kTrain,
     [](Args &a, const std::string &v) {
       int64_t n = parseCount("ranks-per-node", v);
       if (n < 1 || n > 65536)
         usage("--ranks-per-node expects 1 to 65536, got '" + v + "'");
       a.mpi.ranksPerNode = int(n);
     }},
    {"allreduce", true, kTrain,
     [](Args &a, const std::string &v) {
       a.mpi.allReduce = parseChoice<std::string>(
           "allreduce", v,
           {{"auto", "auto"}, {"flat", "flat"}, {"hierarchical", "hierarchical"}});
     }},
    {"bucket-mb", true, kTrain,
     [](Args &a, const std::string &v) {
       double mb = parseAmount("bucket-mb", v, "MiB");
       if (mb > 1048576)
         usage("--bucket-mb expects 0 to 1048576, got '" + v + "'");
       a.train.bucketBytes = uint64_t(mb * 1048576.0);
     }},
    {"collective-timeout", true, kTrain,
     [](Args &a, const std::string &v) {
       a.mpi.timeoutSeconds = parseAmount("collective-timeout", v, "seconds");
     }},
    {"collectives", true, kTrain | kEntry,
     [](Args &a, const std::string &v) {
       a.collectives = parseChoice<StepCollectives>(
           "collectives", v,
           {{"auto", StepCollectives::Auto},
            {"mpi", StepCollectives::Host},
            {"nccl", StepCollectives::Device}});
     }},
    {"pp-trace", true, kTrain,
     [](Args &a, const std::string &v) { a.train.pipelineTracePath = v; }},
    {"grad-compression", true, kTrain,
     [](Args &a, const std::string &v) {
       std::string why;
       if (!parseGradCompression(v, nullptr, &why))
         usage("--grad-compression: " + why);
       a.train.gradCompression = v;
     }},
    // Backends and diagnostics.
    {"threads", true, kTrain | kEntry,
     [](Args &a, const std::string &v) {
       int64_t n = parseCount("threads", v);
       if (n < 1 || n > 4096)
         usage("--threads expects 1 to 4096, got '" + v + "'");
       a.threads = int(n);
     }},
    {"no-cuda-graph", false, kTrain | kEntry,
     [](Args &a, const std::string &) { a.cudaGraphs = false; }},
    {"profile", true, kTrain | kEntry,
     [](Args &a, const std::string &v) { a.profilePath = v; }},
    {"check-numerics", false, kTrain | kEntry,
     [](Args &a, const std::string &) { a.checkNumerics = true; }},
    // ONNX export.
    {"onnx", true, kTrain | kExport,
     [](Args &a, const std::string &v) { a.onnxSource = v; }},
};

} // namespace

std::vector<std::string> loomRunFlags() {
  std::vector<std::string> names;
  for (const Flag &f : kFlags)
    names.emplace_back(f.name);
  return names;
}

namespace {

/// The flag named `name`, or a usage error.
const Flag &findFlag(const std::string &name) {
  for (const Flag &f : kFlags)
    if (name == f.name)
      return f;
  usage("unknown option '--" + name + "' (see --help)");
}

/// What the flags say taken together: one mode, each flag in a mode it
/// applies to, what each mode needs.
void checkCombination(Args &args) {
  if (!args.exportOnnx.empty() && !args.modeSet)
    setMode(args, Mode::Export);
  if (args.mode == Mode::None)
    usage("no mode: give --entry=NAME, --train, --info or --export-onnx "
          "(see --help)");
  if (!args.exportOnnx.empty() && args.mode != Mode::Train &&
      args.mode != Mode::Export)
    usage("--export-onnx goes with --train or alone, not with " +
          std::string(modeFlag(args.mode)));
  for (const std::string &name : args.given) {
    const Flag &flag = findFlag(name);
    if (flag.modes != kAnyMode && !(flag.modes & bit(args.mode)))
      usage("--" + name + " does not apply to " + modeFlag(args.mode));
  }
  if (args.mode == Mode::Entry && args.outputDir.empty())
    usage("--entry needs --output-dir DIR");
  if (args.mode == Mode::Train) {
    if (args.train.dataPath.empty())
      usage("--train needs --data FILE.npz");
    if (!args.given.count("steps"))
      usage("--train needs --steps N");
  }
  if (args.quiet) {
    args.train.progress = ProgressMode::None;
    args.train.warnings = false;
  }
}

Args parseArgs(int argc, const char *const *argv, bool &help, bool &version) {
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    if (arg == "--") {
      for (++i; i < argc; ++i)
        positional.push_back(argv[i] ? argv[i] : "");
      break;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      if (!arg.empty() && arg[0] == '-' && arg != "-")
        usage("unknown option '" + arg +
              "' (options start with --; see "
              "--help)");
      positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool hasValue = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    const Flag &flag = findFlag(name);
    if (flag.value && !hasValue) {
      if (i + 1 >= argc || !argv[i + 1])
        usage("--" + name + " needs a value");
      value = argv[++i];
    } else if (!flag.value && hasValue) {
      usage("--" + name + " takes no value");
    }
    if (name != "input" && !args.given.insert(name).second)
      usage("--" + name + " given twice");
    args.given.insert(name);
    flag.apply(args, value);
  }
  help = args.help;
  version = args.version;
  if (help || version)
    return args;
  if (positional.empty())
    usage("missing the artifact directory (loom-run ARTIFACT.loom ...; see "
          "--help)");
  if (positional.size() > 1)
    usage("unexpected argument '" + positional[1] +
          "' (one artifact directory is expected)");
  args.artifact = positional[0];
  checkCombination(args);
  return args;
}

/// A file name for output `name` inside the output directory: only
/// [A-Za-z0-9._-], never hidden, never "." or "..", at most 200 bytes.
std::string sanitize(const std::string &name) {
  std::string out;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  if (out.empty() || out[0] == '.')
    out = "_" + out;
  if (out.size() > 200)
    out.resize(200);
  return out;
}

/// bf16 has no NumPy type: widen to f32 (exact) for the .npy file.
NpyArray widenBf16(const NpyArray &a) {
  NpyArray out;
  out.dtype = DType::F32;
  out.shape = a.shape;
  out.data.resize(a.data.size() * 2);
  for (size_t i = 0; i < a.data.size() / 2; ++i) {
    uint16_t bits;
    std::memcpy(&bits, a.data.data() + 2 * i, 2);
    float f = bf16ToFloat(bits);
    std::memcpy(out.data.data() + 4 * i, &f, 4);
  }
  return out;
}

/// An f32 array given for a bf16 input: narrowed when every value is a
/// bf16 value (as f32 files written from bf16 data are), refused otherwise
/// rather than rounded behind the user's back.
NpyArray narrowToBf16(const NpyArray &a, const std::string &what) {
  NpyArray out;
  out.dtype = DType::BF16;
  out.shape = a.shape;
  out.data.resize(a.data.size() / 2);
  for (size_t i = 0; i < a.data.size() / 4; ++i) {
    uint32_t bits;
    std::memcpy(&bits, a.data.data() + 4 * i, 4);
    if (bits & 0xffffu)
      failure(what + ": element " + std::to_string(i) +
              " is not a bf16 value, and the input is bf16; give a bf16 "
              ".npy ('<V2', as ml_dtypes saves bfloat16) or f32 values that "
              "bf16 holds exactly");
    uint16_t high = uint16_t(bits >> 16);
    std::memcpy(out.data.data() + 2 * i, &high, 2);
  }
  return out;
}

std::unique_ptr<Artifact> loadArtifact(const std::string &dir,
                                       const LoadOptions &options = {},
                                       int threads = 0) {
  std::string error;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    failure(dir + ": not an artifact directory (expected a directory with "
                  "plan.json, as loomc -o writes)");
  setCpuThreads(threads);
  std::unique_ptr<Artifact> artifact = Artifact::load(dir, options, &error);
  if (!artifact)
    failure(error);
  return artifact;
}

/// How --entry and --train load the artifact. `localRank`: this process's
/// rank on its machine (-1: not under a launcher), which picks its GPU.
std::unique_ptr<Artifact> loadArtifact(const Args &args, int localRank) {
  LoadOptions options;
  options.graphs = args.cudaGraphs;
  options.profile = !args.profilePath.empty();
  options.checkNumerics = args.checkNumerics;
  options.collectives = args.collectives;
  options.collectiveTimeoutSeconds = args.mpi.timeoutSeconds;
  options.localRank = localRank;
  return loadArtifact(args.artifact, options, args.threads);
}

/// The artifact's params/state, overridden by the tensors of `paramsPath`
/// that are params or state of the artifact (type-checked).
std::map<std::string, NpyArray> startingTensors(const Artifact &artifact,
                                                const std::string &paramsPath,
                                                std::optional<int64_t> *step) {
  std::map<std::string, NpyArray> tensors = artifact.initialState();
  if (paramsPath.empty())
    return tensors;
  std::string error;
  std::unique_ptr<SafetensorsFile> file =
      SafetensorsFile::open(paramsPath, &error);
  if (!file)
    failure(error);
  std::map<std::string, const Binding *> bindings =
      stateBindings(artifact.plan());
  for (const TensorView &t : file->tensors()) {
    if (t.name == "step" && t.dtype == DType::I64 && t.shape.empty()) {
      int64_t value;
      std::memcpy(&value, t.data, 8);
      if (step)
        *step = value;
      continue;
    }
    auto it = bindings.find(t.name);
    if (it == bindings.end())
      continue;
    // Whole tensors, also those the plan shards.
    const Binding &b = *it->second;
    if (t.dtype != b.dtype || t.shape != b.wholeShape())
      failure(paramsPath + ": tensor '" + t.name + "' is " +
              describeTensorType(t.dtype, t.shape) + ", the artifact's " +
              bindingKindName(b.kind) + " is " +
              describeTensorType(b.dtype, b.wholeShape()));
    NpyArray a;
    a.dtype = t.dtype;
    a.shape = t.shape;
    a.data.assign(t.data, t.data + t.nbytes);
    tensors[t.name] = std::move(a);
  }
  return tensors;
}

/// The params and buffers among `tensors` (what a model file holds).
std::map<std::string, NpyArray>
modelTensors(const Artifact &artifact,
           const std::map<std::string, NpyArray> &tensors) {
  std::map<std::string, NpyArray> result;
  for (const PlanEntry &e : artifact.plan().entries)
    for (const Binding &in : e.inputs)
      if (isModelKind(in.kind)) {
        auto it = tensors.find(in.name);
        if (it != tensors.end())
          result.emplace(in.name, it->second);
      }
  return result;
}

void exportWeights(const Args &args, const Artifact &artifact,
                   const std::map<std::string, NpyArray> &tensors,
                   std::FILE *err) {
  if (!onnxExportSupported()) {
    std::string error;
    exportOnnx("", "", {}, nullptr, &error);
    failure("--export-onnx: " + error);
  }
  std::string source =
      args.onnxSource.empty() ? artifact.sourceModel() : args.onnxSource;
  if (source.empty())
    failure("--export-onnx: the plan names no source_model; pass --onnx "
            "SRC.onnx");
  std::vector<std::string> replaced;
  std::string error;
  if (!exportOnnx(source, args.exportOnnx, modelTensors(artifact, tensors),
                  &replaced, &error))
    failure("--export-onnx: " + error);
  if (!args.quiet)
    std::fprintf(err, "wrote %s (%zu initializers replaced, from %s)\n",
                 args.exportOnnx.c_str(), replaced.size(), source.c_str());
}

void runInfo(const Args &args, std::FILE *out) {
  // The plan alone (validated): --info needs no GPU for a cuda artifact.
  std::error_code ec;
  if (!fs::is_directory(args.artifact, ec))
    failure(args.artifact + ": not an artifact directory (expected a "
                            "directory with plan.json, as loomc -o writes)");
  std::string error;
  std::optional<Plan> loaded =
      readPlan((fs::path(args.artifact) / "plan.json").string(), &error);
  if (!loaded)
    failure(error);
  const Plan &plan = *loaded;
  std::fprintf(out, "artifact %s: plan version %lld, target %s\n",
               args.artifact.c_str(), static_cast<long long>(plan.version),
               plan.target.c_str());
  if (plan.target == "cuda")
    std::fprintf(out, "cuda: kernels %s (sm_%lld), ptx %s\n",
                 plan.kernels.empty() ? "none" : plan.kernels.c_str(),
                 static_cast<long long>(plan.sm),
                 plan.ptx.empty() ? "none" : plan.ptx.c_str());
  if (!plan.sourceModel.empty())
    std::fprintf(out, "source model: %s\n", plan.sourceModel.c_str());
  if (plan.mesh)
    std::fprintf(out, "mesh: %s (%lld rank%s: mpirun -np %lld)\n",
                 plan.mesh->describe().c_str(),
                 static_cast<long long>(plan.mesh->size()),
                 plan.mesh->size() == 1 ? "" : "s",
                 static_cast<long long>(plan.mesh->size()));
  if (const auto &pp = plan.pipeline)
    std::fprintf(out,
                 "pipeline: axis %s, %lld stages (%lld per rank), %lld "
                 "micro-batches per step, schedule %s\n",
                 pp->axis.c_str(), static_cast<long long>(pp->stages),
                 static_cast<long long>(pp->virtualStages),
                 static_cast<long long>(pp->microbatches),
                 pp->schedule.name.c_str());
  if (!plan.gradCompression.empty())
    std::fprintf(out,
                 "gradient compression: %s (the plan's grad_compression: "
                 "--train compresses the gradient reductions by it unless "
                 "--grad-compression says otherwise)\n",
                 plan.gradCompression.c_str());
  for (const PlanEntry &e : plan.entries) {
    std::fprintf(out, "entry %s: %zu steps, arena %llu bytes\n", e.name.c_str(),
                 e.steps.size(), static_cast<unsigned long long>(e.arenaBytes));
    for (const Binding &b : e.inputs)
      std::fprintf(out, "  input  %-6s %s %s\n", bindingKindName(b.kind),
                   b.name.c_str(), describeBinding(b).c_str());
    for (const Binding &b : e.outputs)
      std::fprintf(out, "  output %-6s %s %s\n", bindingKindName(b.kind),
                   b.name.c_str(), describeBinding(b).c_str());
    // The collectives by op and reduction: what the entry communicates.
    std::map<std::string, size_t> collectives;
    for (const PlanStep &step : e.steps)
      if (step.kind == PlanStep::Kind::Collective) {
        const CollectiveStep &c = step.collective;
        std::string what = collectiveOpName(c.op);
        if (c.reduce != CollectiveReduce::None)
          what += std::string(" ") + collectiveReduceName(c.reduce);
        ++collectives[what + " over " + plan.mesh->axes[c.axis]];
      }
    for (const auto &[what, n] : collectives)
      std::fprintf(out, "  collective %s: %zu step(s)\n", what.c_str(), n);
    size_t grads = 0;
    for (const PlanStep &step : e.steps)
      grads += step.kind == PlanStep::Kind::Collective &&
               !step.collective.grad.empty();
    if (grads)
      std::fprintf(out,
                   "  gradient reductions (collective steps with a grad): "
                   "%zu\n",
                   grads);
  }
}

/// --profile: the steps' times as CSV, slowest first, and a summary per
/// entry on `err`.
void writeProfile(const Args &args, const Artifact &artifact,
                  std::FILE *err) {
  if (args.profilePath.empty())
    return;
  std::vector<StepProfile> steps = artifact.profile();
  std::map<std::string, double> perRun; // entry -> seconds per run
  std::map<std::string, std::array<double, kStepKinds>> byKind;
  for (const StepProfile &p : steps) {
    double each = p.seconds / double(p.calls);
    perRun[p.entry] += each;
    byKind[p.entry][size_t(p.kind)] += each;
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const StepProfile &a, const StepProfile &b) {
                     return a.seconds / double(a.calls) >
                            b.seconds / double(b.calls);
                   });
  std::string text = "entry,step,kind,what,calls,total_ms,ms_per_call,share\n";
  for (const StepProfile &p : steps) {
    double each = p.seconds / double(p.calls);
    char numbers[128];
    std::snprintf(numbers, sizeof numbers, "%llu,%.4f,%.4f,%.4f",
                  static_cast<unsigned long long>(p.calls), p.seconds * 1e3,
                  each * 1e3, perRun[p.entry] > 0 ? each / perRun[p.entry] : 0);
    text += p.entry + "," + std::to_string(p.step) + "," +
            stepKindName(p.kind) + "," + p.what + "," + numbers + "\n";
  }
  std::string error;
  if (!detail::writeFileAtomically(
          args.profilePath,
          {{reinterpret_cast<const uint8_t *>(text.data()), text.size()}},
          detail::ErrorSink{&error, nullptr}))
    failure(error);
  if (args.quiet)
    return;
  // Collectives only where the plan has a mesh, attention and
  // linear_cross_entropy only where it has such steps: the line of other
  // plans stays as it was.
  const bool mesh = artifact.plan().mesh.has_value();
  bool attention = false, lce = false;
  for (const PlanEntry &e : artifact.plan().entries)
    for (const PlanStep &step : e.steps) {
      attention |= step.kind == PlanStep::Kind::Attention;
      lce |= step.kind == PlanStep::Kind::LinearCrossEntropy;
    }
  for (const auto &[entry, seconds] : perRun) {
    const std::array<double, kStepKinds> &k = byKind[entry];
    using Kind = PlanStep::Kind;
    char collectives[48] = "", attentions[48] = "", lces[48] = "";
    if (mesh)
      std::snprintf(collectives, sizeof collectives, ", collectives %.3f",
                    k[size_t(Kind::Collective)] * 1e3);
    if (attention)
      std::snprintf(attentions, sizeof attentions, ", attention %.3f",
                    k[size_t(Kind::Attention)] * 1e3);
    if (lce)
      std::snprintf(lces, sizeof lces, ", linear_cross_entropy %.3f",
                    k[size_t(Kind::LinearCrossEntropy)] * 1e3);
    std::fprintf(err,
                 "profile %s: %.3f ms per run (kernels %.3f, GEMMs %.3f, "
                 "convolutions %.3f%s%s, copies %.3f%s) -> %s\n",
                 entry.c_str(), seconds * 1e3, k[size_t(Kind::Kernel)] * 1e3,
                 k[size_t(Kind::Gemm)] * 1e3, k[size_t(Kind::Conv)] * 1e3,
                 attentions, lces, k[size_t(Kind::Copy)] * 1e3, collectives,
                 args.profilePath.c_str());
  }
}

/// An entry that communicates over the plan's mesh runs on every rank of
/// an MPI launch (`mpirun -np N loom-run ART --entry=...`): MPI is started
/// and handed to the artifact (`comm`). Any other entry runs on each
/// process alone as always.
void startEntryRanks(Artifact &artifact, const PlanEntry &entry,
                     const MpiOptions &options,
                     std::unique_ptr<Collectives> &comm) {
  const Plan &plan = artifact.plan();
  if (!entryUsesMesh(plan, entry) || !launchedByMpi())
    return;
  std::string error;
  comm = startMpi(options, &error);
  if (!comm)
    failure("started by an MPI launcher, but " + error);
  artifact.setCollectives(comm.get());
}

/// `comm`: the job's MPI world once started, owned by loomRunMain so that
/// a failure does not finalize MPI (which would wait for the other ranks)
/// before the job is ended (endWithError).
void runEntry(const Args &args, std::FILE *err,
              std::unique_ptr<Collectives> &comm) {
  std::unique_ptr<Artifact> artifact =
      loadArtifact(args, launchedByMpi() ? launcherLocalRank() : -1);
  const PlanEntry *entry = artifact->entry(args.entry);
  if (!entry) {
    std::string names;
    for (const std::string &n : artifact->entryNames())
      names += (names.empty() ? "" : ", ") + n;
    failure("no entry '" + args.entry + "' in " + args.artifact + " (it has " +
            names + ")");
  }
  // Before the artifact goes: it borrows them.
  startEntryRanks(*artifact, *entry, args.mpi, comm);
  struct Release {
    Artifact &artifact;
    ~Release() { artifact.setCollectives(nullptr); }
  } release{*artifact};
  bool lead = !comm || comm->rank() == 0;
  std::string meshError;
  if (entryUsesMesh(artifact->plan(), *entry) &&
      !checkMeshWorld(artifact->plan(), comm.get(),
                      "entry '" + entry->name + "'", &meshError))
    failure(meshError);
  std::map<std::string, NpyArray> given;
  for (const auto &[name, path] : args.inputs) {
    if (!entry->findInput(name)) {
      std::string names;
      for (const Binding &b : entry->inputs)
        names += (names.empty() ? "" : ", ") + b.name;
      failure("--input " + name + ": entry '" + entry->name +
              "' has no input of that name (its inputs: " + names + ")");
    }
    if (given.count(name))
      failure("--input " + name + " given twice");
    std::string error;
    std::optional<NpyArray> array = readNpy(path, &error);
    if (!array)
      failure("--input " + name + ": " + error);
    if (entry->findInput(name)->dtype == DType::BF16 &&
        array->dtype == DType::F32)
      *array = narrowToBf16(*array, "--input " + name + ": " + path);
    given.emplace(name, std::move(*array));
  }
  std::optional<int64_t> checkpointStep;
  std::map<std::string, NpyArray> tensors =
      startingTensors(*artifact, args.train.paramsPath, &checkpointStep);
  // Whole tensors from the files; the entry takes this rank's shards.
  std::string shardError;
  if (!shardTensors(artifact->plan(), comm.get(), tensors, &shardError))
    failure(shardError);
  std::vector<TensorRef> refs;
  NpyArray stepArray, seedArray;
  int64_t stepValue = checkpointStep.value_or(0);
  if (auto it = given.find("step"); it != given.end() &&
                                    it->second.dtype == DType::I64 &&
                                    it->second.data.size() == 8)
    std::memcpy(&stepValue, it->second.data.data(), 8);
  for (const Binding &in : entry->inputs) {
    if (auto it = given.find(in.name); it != given.end()) {
      refs.push_back(tensorRef(in.name, it->second));
      continue;
    }
    if (isStateKind(in.kind)) {
      auto it = tensors.find(in.name);
      if (it == tensors.end())
        failure("no value for " + std::string(bindingKindName(in.kind)) + " '" +
                in.name +
                "': the artifact has no params file; pass --params FILE or "
                "--input " +
                in.name + "=FILE.npy");
      refs.push_back(tensorRef(in.name, it->second));
    } else if (in.name == "step") {
      stepArray.dtype = DType::I64;
      stepArray.data.resize(8);
      std::memcpy(stepArray.data.data(), &stepValue, 8);
      refs.push_back(tensorRef(in.name, stepArray));
    } else if (in.name == "seed") {
      int64_t seed = dropoutSeed(args.train.seed, stepValue, 0);
      seedArray.dtype = DType::I64;
      seedArray.data.resize(8);
      std::memcpy(seedArray.data.data(), &seed, 8);
      refs.push_back(tensorRef(in.name, seedArray));
    } else {
      failure("missing input '" + in.name + "' (" +
              describeTensorType(in.dtype, in.shape) + "): pass --input " +
              in.name + "=FILE.npy");
    }
  }
  std::vector<NpyArray> outputs;
  std::string error;
  if (!artifact->run(entry->name, refs, &outputs, &error))
    failure(error);
  // A sharded output is written whole (the ranks of its axis gather it;
  // rank 0 writes). An entry that does not communicate has shards of one
  // rank alone, joined without communicators.
  MeshComms alone;
  const MeshComms *comms = &alone;
  if (entryUsesMesh(artifact->plan(), *entry) &&
      !(comms = artifact->meshComms(&error)))
    failure(error);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!gatherShard(artifact->plan(), entry->outputs[i], *comms, outputs[i],
                     &error))
      failure(error);
  if (!lead)
    return;

  std::error_code ec;
  fs::create_directories(args.outputDir, ec);
  if (!fs::is_directory(args.outputDir, ec))
    failure(args.outputDir + ": cannot create the output directory" +
            (ec ? ": " + ec.message() : std::string()));
  std::set<std::string> used;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Binding &out = entry->outputs[i];
    std::string base = sanitize(out.name), file = base;
    for (int n = 2; used.count(file); ++n)
      file = base + "-" + std::to_string(n);
    used.insert(file);
    std::string path = args.outputDir + "/" + file + ".npy";
    const NpyArray *array = &outputs[i];
    NpyArray widened;
    if (array->dtype == DType::BF16) {
      widened = widenBf16(*array);
      array = &widened;
    }
    if (!writeNpy(path, *array, &error))
      failure(error);
    if (!args.quiet)
      std::fprintf(err, "wrote %s (%s%s%s)\n", path.c_str(),
                   describeTensorType(out.dtype, out.wholeShape()).c_str(),
                   out.shard ? ", gathered from its shards" : "",
                   out.dtype == DType::BF16 ? ", widened to f32" : "");
  }
  writeProfile(args, *artifact, err);
}

/// `comm`: as for runEntry.
void runTrain(const Args &args, std::FILE *err,
              std::unique_ptr<Collectives> &comm) {
  // Under mpirun: data parallelism over the launched ranks (rank 0 writes).
  std::string error;
  if (launchedByMpi()) {
    comm = startMpi(args.mpi, &error);
    if (!comm)
      failure("started by an MPI launcher, but " + error);
  }
  bool lead = !comm || comm->rank() == 0;
  int localRank = comm ? launcherLocalRank() : -1;
  if (comm && localRank < 0)
    localRank = comm->localRank();
  std::unique_ptr<Artifact> artifact = loadArtifact(args, localRank);
  TrainOptions options = args.train;
  options.log = err;
  options.collectiveTimeoutSeconds = args.mpi.timeoutSeconds;
  if (comm && comm->size() > 1)
    options.collectives = comm.get();
  const std::optional<PlanMesh> &mesh = artifact->plan().mesh;
  if (comm && comm->size() > 1 && lead && !args.quiet) {
    // Another axis than dp larger than 1: not data parallelism alone.
    bool otherAxes = false;
    for (size_t a = 0; mesh && a < mesh->axes.size(); ++a)
      otherAxes |= mesh->shape[a] > 1 && mesh->axes[a] != "dp";
    const char *over = stepCollectivesName(artifact->stepCollectives());
    if (const auto &pp = artifact->plan().pipeline)
      std::fprintf(err,
                   "loom-run: pipeline parallel (mesh %s; schedule %s, %lld "
                   "stages, %lld micro-batches per step) over %s; "
                   "activations move point to point over %s\n",
                   mesh->describe().c_str(), pp->schedule.name.c_str(),
                   static_cast<long long>(pp->stages),
                   static_cast<long long>(pp->microbatches),
                   describeWorld(*comm).c_str(), comm->name());
    else if (mesh && !otherAxes)
      std::fprintf(err,
                   "loom-run: compiled data parallel (mesh %s) over %s; the "
                   "plan reduces the gradients (collective steps over %s)\n",
                   mesh->describe().c_str(), describeWorld(*comm).c_str(),
                   over);
    else if (mesh)
      std::fprintf(err,
                   "loom-run: compiled for the mesh %s over %s (rank = "
                   "row-major index of the coordinates); the plan "
                   "communicates over each axis (collective steps over "
                   "%s)\n",
                   mesh->describe().c_str(), describeWorld(*comm).c_str(),
                   over);
    else
      std::fprintf(err,
                   "loom-run: data parallel over %s; %lld micro-batch(es) "
                   "per rank and step%s\n",
                   describeWorld(*comm).c_str(),
                   static_cast<long long>(options.accumulate),
                   args.collectives == StepCollectives::Device
                       ? " (the artifact has no mesh: the runtime sums the "
                         "gradients over MPI; --collectives=nccl applies to "
                         "a plan's collective steps)"
                       : "");
  }
  TrainResult result;
  if (!train(*artifact, options, &result, &error))
    failure(error);
  if (!lead)
    return;
  writeProfile(args, *artifact, err);
  if (!args.exportOnnx.empty())
    exportWeights(args, *artifact, result.tensors, err);
}

void runExport(const Args &args, std::FILE *err) {
  std::unique_ptr<Artifact> artifact = loadArtifact(args.artifact);
  if (!args.train.resumePath.empty() && !args.train.paramsPath.empty())
    usage("--resume and --params both name the weights; give one");
  std::map<std::string, NpyArray> tensors;
  if (!args.train.resumePath.empty()) {
    std::string path = args.train.resumePath, error;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      path = findLatestCheckpoint(path, &error);
      if (path.empty())
        failure(error);
    }
    if (!loadCheckpoint(path, *artifact, &tensors, nullptr, &error))
      failure(error);
  } else {
    tensors = startingTensors(*artifact, args.train.paramsPath, nullptr);
  }
  exportWeights(args, *artifact, tensors, err);
}

/// Reports a failure and returns its exit status. Under an MPI launcher
/// with several ranks the message names this rank and the whole job ends
/// at once (abortMpi): the other ranks may be waiting for this one in a
/// collective, or about to start one, and would otherwise wait for their
/// watchdog, their message hiding this rank's.
int endWithError(const std::unique_ptr<Collectives> &comm, int status,
                 const std::string &message, std::FILE *err) noexcept {
  const int size = comm           ? comm->size()
                   : launchedByMpi() ? launcherWorldSize()
                                     : 1;
  if (size > 1) {
    const int rank = comm ? comm->rank() : launcherWorldRank();
    std::fprintf(err, "loom-run: error: rank %d: %s\n", rank,
                 message.c_str());
  } else {
    std::fprintf(err, "loom-run: error: %s\n", message.c_str());
  }
  if (status == kExitUsage)
    std::fprintf(err, "usage: loom-run ARTIFACT.loom --entry=NAME | --train "
                      "| --info | --export-onnx=OUT.onnx [options]; see "
                      "--help\n");
  std::fflush(err);
  if (size > 1)
    abortMpi(status);
  return status;
}

} // namespace

int loomRunMain(int argc, const char *const *argv, std::FILE *out,
                std::FILE *err) noexcept {
  if (!out)
    out = stdout;
  if (!err)
    err = stderr;
  // The MPI world, when a run starts one: it outlives the run's own objects
  // so that a failure ends the job before MPI is finalized.
  std::unique_ptr<Collectives> comm;
  try {
    bool help = false, version = false;
    Args args = parseArgs(argc, argv, help, version);
    if (help) {
      std::fputs(kHelp, out);
      return kExitOk;
    }
    if (version) {
      std::fprintf(out, "loom-run (libloomrt %s)%s\n", loomrt_version(),
                   onnxExportSupported() ? "" : ", without ONNX support");
      return kExitOk;
    }
    switch (args.mode) {
    case Mode::Info:
      runInfo(args, out);
      break;
    case Mode::Entry:
      runEntry(args, err, comm);
      break;
    case Mode::Train:
      runTrain(args, err, comm);
      break;
    case Mode::Export:
      runExport(args, err);
      break;
    case Mode::None:
      break;
    }
    std::fflush(out);
    return kExitOk;
  } catch (const Exit &e) {
    return endWithError(comm, e.status, e.message, err);
  } catch (const std::bad_alloc &) {
    return endWithError(comm, kExitFailure, "out of memory", err);
  } catch (const std::exception &e) {
    return endWithError(comm, kExitFailure, e.what(), err);
  } catch (...) {
    return endWithError(comm, kExitFailure, "unexpected failure", err);
  }
}

} // namespace loomrt
