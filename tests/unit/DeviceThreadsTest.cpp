// DeviceThreads: every device's body runs at once (each waits for all the
// others here, as a collective's rendezvous does), on the same thread from
// one run to the next, and the pool stops cleanly.
#include "backend/DeviceThreads.h"

#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace mgc::backend {
namespace {

TEST_CASE("device threads: every device at once, on its own thread, run "
          "after run") {
  for (size_t n : {size_t(1), size_t(3), size_t(5)}) {
    INFO(n << " devices");
    DeviceThreads threads(n);
    REQUIRE(threads.ok());
    CHECK(threads.size() == n);
    std::vector<std::thread::id> first(n), seen(n);
    std::vector<int> ran(n, 0);
    for (int run = 0; run < 200; ++run) {
      // A barrier of all the devices: passes only if every body is running
      // at the same time.
      std::mutex m;
      std::condition_variable cv;
      size_t arrived = 0;
      threads.run([&](size_t k) {
        std::unique_lock<std::mutex> lock(m);
        if (++arrived == n)
          cv.notify_all();
        cv.wait(lock, [&] { return arrived == n; });
        seen[k] = std::this_thread::get_id();
        ++ran[k];
      });
      if (run == 0)
        first = seen;
      // The same threads every time: none is made per run.
      CHECK(seen == first);
    }
    for (size_t k = 0; k < n; ++k)
      CHECK(ran[k] == 200);
    for (size_t k = 0; k < n; ++k)
      CHECK(first[k] != std::this_thread::get_id());
  }
}

TEST_CASE("device threads: a pool that never ran stops") {
  DeviceThreads threads(4);
  CHECK(threads.ok());
}

} // namespace
} // namespace mgc::backend
