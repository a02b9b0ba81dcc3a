//===- Collectives.cpp - The parts of the interface every backend shares --===//

#include "loomrt/Collectives.h"

namespace loomrt {

Request::~Request() = default;
Collectives::~Collectives() = default;

std::unique_ptr<Collectives> Collectives::split(int, int,
                                                std::string *error) noexcept {
  try {
    if (error)
      *error = std::string("the ") + name() +
               " collectives cannot split into a communicator per group of "
               "ranks";
  } catch (...) {
  }
  return nullptr;
}

bool waitFor(std::unique_ptr<Request> request, std::string *error) noexcept {
  return request && request->wait(error);
}

} // namespace loomrt
