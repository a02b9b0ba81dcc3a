//===- Backend.cpp - Backend defaults and selection by the plan's target --===//

#include "loomrt/Backend.h"

#include "loomrt/Collectives.h"

#include "Backends.h"
#include "Support.h"

namespace loomrt {

Arena::~Arena() = default;
Recording::~Recording() = default;
Backend::~Backend() = default;

namespace {
void notRecording(std::string *error, std::string_view backend) {
  if (!error)
    return;
  try {
    *error = "the " + std::string(backend) + " backend cannot record";
  } catch (...) {
  }
}
} // namespace

bool arenaRangeOk(const Arena &arena, uint64_t offset, uint64_t bytes,
                  std::string *error) noexcept {
  if (offset <= arena.size() && bytes <= arena.size() - offset)
    return true;
  if (error) {
    try {
      *error = "bytes [" + std::to_string(offset) + ", +" +
               std::to_string(bytes) + ") outside arena of " +
               std::to_string(arena.size());
    } catch (...) {
    }
  }
  return false;
}

bool Backend::conv(Arena &, const ConvCall &, std::string *error) noexcept {
  if (error) {
    try {
      *error = "the " + std::string(name()) + " backend has no conv steps";
    } catch (...) {
    }
  }
  return false;
}

bool Backend::attention(Arena &, const AttentionCall &,
                        std::string *error) noexcept {
  if (error) {
    try {
      *error = "the " + std::string(name()) + " backend has no attention steps";
    } catch (...) {
    }
  }
  return false;
}

bool Backend::linearCrossEntropy(Arena &, const LinearCrossEntropyCall &,
                                 std::string *error) noexcept {
  if (error) {
    try {
      *error = "the " + std::string(name()) +
               " backend has no linear_cross_entropy steps";
    } catch (...) {
    }
  }
  return false;
}

std::unique_ptr<Collectives>
Backend::startDeviceCollectives(Collectives &, double,
                                std::string *error) noexcept {
  std::string why;
  deviceCollectivesAvailable(&why);
  if (error) {
    try {
      *error = why;
    } catch (...) {
    }
  }
  return nullptr;
}

bool Backend::deviceCollectivesAvailable(std::string *error) const noexcept {
  if (error) {
    try {
      *error = "the " + std::string(name()) +
               " backend has no device collectives" +
               (hostArenas() ? " (its arenas are host memory: collective "
                               "steps run over host collectives, e.g. MPI)"
                             : "");
    } catch (...) {
    }
  }
  return false;
}

bool Backend::beginRecording(std::string *error) noexcept {
  notRecording(error, name());
  return false;
}

std::unique_ptr<Recording> Backend::endRecording(std::string *error) noexcept {
  notRecording(error, name());
  return nullptr;
}

bool Backend::replay(Recording &, std::string *error) noexcept {
  notRecording(error, name());
  return false;
}

std::unique_ptr<Backend> createBackend(std::string_view target,
                                       std::string *error, ErrorCode *code,
                                       const BackendOptions &options) noexcept {
  detail::ErrorSink sink{error, code};
  try {
    if (target == "cpu") {
      sink.ok();
      return createCpuBackend();
    }
    if (target == "cuda")
      return createCudaBackend(options, error, code);
    sink.set(ErrorCode::Unsupported,
             "target " + detail::quoteName(target) +
                 " has no backend in this runtime build (supported: cpu, "
                 "cuda)");
  } catch (...) {
    sink.outOfMemory("backend");
  }
  return nullptr;
}

} // namespace loomrt
