//===- LeadHeartbeat.h - Ranks waiting out work one rank does alone -------===//
//
// Some work of a multi-rank run is done by rank 0 alone while the others
// wait: the evaluation of a runtime data-parallel run. The others cannot
// wait for it in their next collective, whose watchdog would take a long
// evaluation for a hung rank; nor without a limit, which would hang the job
// with the lead. So the lead sends every other rank a sign of life, at most
// a quarter of the collective timeout apart, while it works, and a last
// message when it is done; a waiting rank gives up only when no message has
// come for the whole timeout (the lead died or hangs), and names the work.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_LEADHEARTBEAT_H
#define LOOMRT_SRC_LEADHEARTBEAT_H

#include "loomrt/Collectives.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

class LeadHeartbeat {
public:
  /// `what` names the work in messages ("the evaluation at step 10");
  /// `timeoutSeconds` <= 0 waits without a limit.
  LeadHeartbeat(Collectives &comm, double timeoutSeconds, std::string what);

  /// On rank 0, between pieces of the work: a sign of life when one is due.
  bool beat(std::string *error) noexcept;
  /// On rank 0 after the work: tells the others that it is done.
  bool finish(std::string *error) noexcept;
  /// On every other rank: waits for rank 0's finish().
  bool waitForLead(std::string *error) noexcept;

private:
  bool sendAll(int message, std::string *error) noexcept;

  Collectives &comm;
  double timeoutSeconds;
  std::string what;
  std::chrono::steady_clock::time_point lastBeat;
  /// Sends in flight and the message each carries (kept until done).
  std::vector<std::unique_ptr<Request>> sends;
  std::vector<std::unique_ptr<int>> messages;
};

} // namespace loomrt

#endif // LOOMRT_SRC_LEADHEARTBEAT_H
