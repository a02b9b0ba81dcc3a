//===- LeadHeartbeat.cpp - Ranks waiting out work one rank does alone -----===//
//
// Messages are one i32 each from rank 0 to every other rank, on a tag of
// their own (point-to-point messages between two ranks with one tag arrive
// in order, so "done" is the last): 1 is a sign of life, 2 "done".
//
//===----------------------------------------------------------------------===//

#include "LeadHeartbeat.h"

#include <cstdio>
#include <thread>

namespace loomrt {

namespace {
constexpr int kTag = 30001;
constexpr int kAlive = 1, kDone = 2;
using Clock = std::chrono::steady_clock;
} // namespace

LeadHeartbeat::LeadHeartbeat(Collectives &comm, double timeoutSeconds,
                             std::string what)
    : comm(comm), timeoutSeconds(timeoutSeconds), what(std::move(what)),
      lastBeat(Clock::now()) {}

bool LeadHeartbeat::sendAll(int message, std::string *error) noexcept {
  for (int peer = 1; peer < comm.size(); ++peer) {
    messages.push_back(std::make_unique<int>(message));
    std::unique_ptr<Request> r =
        comm.send(messages.back().get(), 1, DType::I32, peer, kTag, error);
    if (!r)
      return false;
    sends.push_back(std::move(r));
  }
  // Let the sends progress; the finished ones go.
  for (size_t i = 0; i < sends.size();) {
    bool done = false;
    if (!sends[i]->test(&done, error))
      return false;
    if (done) {
      sends.erase(sends.begin() + i);
      messages.erase(messages.begin() + i);
    } else {
      ++i;
    }
  }
  return true;
}

bool LeadHeartbeat::beat(std::string *error) noexcept {
  if (comm.size() < 2 || timeoutSeconds <= 0)
    return true;
  auto now = Clock::now();
  if (now - lastBeat < std::chrono::duration<double>(timeoutSeconds / 4))
    return true;
  lastBeat = now;
  return sendAll(kAlive, error);
}

bool LeadHeartbeat::finish(std::string *error) noexcept {
  if (comm.size() < 2)
    return true;
  if (!sendAll(kDone, error))
    return false;
  for (std::unique_ptr<Request> &r : sends)
    if (!r->wait(error))
      return false;
  sends.clear();
  messages.clear();
  return true;
}

bool LeadHeartbeat::waitForLead(std::string *error) noexcept {
  auto limit = std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    int message = 0;
    std::unique_ptr<Request> r =
        comm.recv(&message, 1, DType::I32, 0, kTag, error);
    if (!r)
      return false;
    auto since = Clock::now();
    for (;;) {
      bool done = false;
      if (!r->test(&done, error))
        return false;
      if (done)
        break;
      if (timeoutSeconds > 0 && Clock::now() - since > limit) {
        if (error) {
          char seconds[32];
          std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
          *error = "rank 0 sent no sign of life for " + std::string(seconds) +
                   " s during " + what +
                   " (it died or hangs; --collective-timeout)";
        }
        // The receive is left posted: the job ends on this error.
        r.release();
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (message == kDone)
      return true;
  }
}

} // namespace loomrt
