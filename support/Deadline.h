// The moment `seconds` from now on the steady clock, for waits that give
// up after a user's timeout: a timeout longer than the clock can count
// (about 292 years of nanoseconds) never expires, instead of overflowing
// into the past.
#pragma once

#include <chrono>

namespace mgc {

inline std::chrono::steady_clock::time_point deadlineAfter(double seconds) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point now = Clock::now();
  // What is left of the clock's range after now, in seconds.
  double room =
      std::chrono::duration<double>(Clock::time_point::max() - now).count();
  if (!(seconds < room))
    return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>(seconds));
}

} // namespace mgc
