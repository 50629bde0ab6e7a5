// deadlineAfter: a timeout the steady clock cannot count never expires.
#include "support/Deadline.h"

#include <doctest/doctest.h>

#include <limits>

namespace mgc {
namespace {

TEST_CASE("deadline: a timeout past the clock's range never expires") {
  using Clock = std::chrono::steady_clock;
  auto now = Clock::now();
  // Within range: about now + the timeout.
  double ahead =
      std::chrono::duration<double>(deadlineAfter(2.5) - now).count();
  CHECK(ahead >= 2.5);
  CHECK(ahead < 60);
  // 1e10 s (317 years) overflowed the nanosecond count into the past.
  for (double seconds :
       {1e10, 9.3e9, 1e300, std::numeric_limits<double>::infinity()}) {
    CAPTURE(seconds);
    CHECK(deadlineAfter(seconds) == Clock::time_point::max());
  }
  // Just under the limit stays a finite moment after now.
  CHECK(deadlineAfter(1e9) > now);
  CHECK(deadlineAfter(1e9) < Clock::time_point::max());
}

} // namespace
} // namespace mgc
