//===- Collectives.cpp - The parts of the interface every backend shares --===//

#include "loomrt/Collectives.h"

namespace loomrt {

Request::~Request() = default;
Collectives::~Collectives() = default;

bool waitFor(std::unique_ptr<Request> request, std::string *error) noexcept {
  return request && request->wait(error);
}

} // namespace loomrt
