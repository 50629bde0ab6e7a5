#include "DataTestSupport.h"

#include "runtime/DataPrefetch.h"
#include "runtime/DataSynthetic.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

namespace {

// Batch k holds the value k; fails at `failAt`; counts what it produced and
// whether it is still alive.
struct Probe {
  std::atomic<int> produced{0};
  std::atomic<bool> destroyed{false};
  std::atomic<bool> onLoaderThread{false};
};

class CountingSource : public BatchSource {
public:
  CountingSource(Probe &probe, int64_t failAt = -1,
                 std::chrono::milliseconds delay = {})
      : probe_(probe), failAt_(failAt), delay_(delay),
        mainThread_(std::this_thread::get_id()) {
    inputs_.push_back({"k", ir::TensorType(ir::DType::I64, {})});
  }
  ~CountingSource() override { probe_.destroyed = true; }
  const std::vector<InputSpec> &inputs() const override { return inputs_; }
  int64_t position() const override { return step_; }
  llvm::Error seek(int64_t step) override {
    if (step < 0)
      return dataError("negative step");
    step_ = step;
    return llvm::Error::success();
  }
  llvm::Error next(Batch &out) override {
    if (std::this_thread::get_id() != mainThread_)
      probe_.onLoaderThread = true;
    std::this_thread::sleep_for(delay_);
    if (step_ == failAt_)
      return dataError("disk on fire at batch " + llvm::Twine(step_));
    out.clear();
    Tensor t(inputs_[0].type);
    t.set(0, static_cast<double>(step_));
    out.emplace("k", std::move(t));
    ++step_;
    ++probe_.produced;
    return llvm::Error::success();
  }

private:
  Probe &probe_;
  int64_t failAt_;
  std::chrono::milliseconds delay_;
  std::thread::id mainThread_;
  std::vector<InputSpec> inputs_;
  int64_t step_ = 0;
};

int64_t nextValue(BatchSource &s) {
  Batch b;
  llvm::Error err = s.next(b);
  REQUIRE(errorText(std::move(err)) == "");
  return static_cast<int64_t>(b.at("k").get(0));
}

} // namespace

TEST_CASE("prefetch: the same batches, produced on the loading thread") {
  Probe probe;
  auto s = makePrefetchingSource(std::make_unique<CountingSource>(probe), 3);
  for (int64_t k = 0; k < 20; ++k) {
    CHECK(s->position() == k);
    CHECK(nextValue(*s) == k);
  }
  CHECK(probe.onLoaderThread);
  // The queue is bounded: at most depth batches ahead of the consumer
  // (plus the one being made).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (probe.produced < 23 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(probe.produced == 20 + 3);
  CHECK(s->inputs().size() == 1);
}

TEST_CASE("prefetch: seek repositions, resume equals skipping") {
  Probe probe;
  auto s = makePrefetchingSource(std::make_unique<CountingSource>(probe), 2);
  CHECK(nextValue(*s) == 0);
  REQUIRE(errorText(s->seek(10)) == "");
  CHECK(s->position() == 10);
  CHECK(nextValue(*s) == 10);
  CHECK(nextValue(*s) == 11);
  // A failed seek changes nothing.
  CHECK(errorText(s->seek(-1)) == "negative step");
  CHECK(s->position() == 12);
  CHECK(nextValue(*s) == 12);

  // With a real source: prefetched and direct batches are identical.
  std::vector<InputSpec> inputs = {
      {"x", ir::TensorType(ir::DType::F32, {4, 3})}};
  SyntheticOptions options;
  options.seed = 9;
  auto direct = std::move(*makeSyntheticSource(inputs, options));
  auto prefetched =
      makePrefetchingSource(std::move(*makeSyntheticSource(inputs, options)));
  REQUIRE(errorText(direct->seek(5)) == "");
  REQUIRE(errorText(prefetched->seek(5)) == "");
  for (int i = 0; i < 4; ++i) {
    Batch a, b;
    REQUIRE(errorText(direct->next(a)) == "");
    REQUIRE(errorText(prefetched->next(b)) == "");
    CHECK(sameBytes(a.at("x"), b.at("x")));
  }
}

TEST_CASE("prefetch: an error of the loader reaches the consumer in order") {
  Probe probe;
  auto s = makePrefetchingSource(
      std::make_unique<CountingSource>(probe, /*failAt=*/3), 2);
  for (int64_t k = 0; k < 3; ++k)
    CHECK(nextValue(*s) == k);
  Batch b;
  CHECK(errorText(s->next(b)) == "disk on fire at batch 3");
  CHECK(s->position() == 3);
  CHECK(errorText(s->next(b)) == "disk on fire at batch 3"); // stays failed
  // Seeking past the bad batch recovers.
  REQUIRE(errorText(s->seek(4)) == "");
  CHECK(nextValue(*s) == 4);
}

TEST_CASE("prefetch: the thread stops when the consumer stops early") {
  Probe probe;
  auto start = std::chrono::steady_clock::now();
  {
    auto s =
        makePrefetchingSource(std::make_unique<CountingSource>(
                                  probe, -1, std::chrono::milliseconds(100)),
                              4);
    CHECK(nextValue(*s) == 0);
  } // destroyed while the loader is busy and the queue is not full
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(probe.destroyed);
  CHECK(probe.produced <= 2); // batch 0, and the one it was making
  CHECK(elapsed < std::chrono::seconds(2));

  // Destroyed without ever being read, and destroyed with a full queue.
  Probe idle, full;
  { auto s = makePrefetchingSource(std::make_unique<CountingSource>(idle)); }
  CHECK(idle.destroyed);
  {
    auto s = makePrefetchingSource(std::make_unique<CountingSource>(full), 2);
    while (full.produced < 2)
      std::this_thread::yield();
  }
  CHECK(full.destroyed);
  CHECK(full.produced == 2);
}
