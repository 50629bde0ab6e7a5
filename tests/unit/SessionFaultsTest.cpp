// Sessions meeting faults: steps that are not finite (undone when asked),
// checkpoints whose step counter is not a whole step, exceptions inside a
// call.
#include "SessionTestSupport.h"

#include "runtime/Checkpoint.h"
#include "runtime/session/Guarded.h"

#include <doctest/doctest.h>

#include <cmath>
#include <system_error>

namespace mgc {
namespace {

using namespace session_test;

// --on-nonfinite skip: a step whose loss is not finite (a NaN in its batch)
// leaves the parameters and the optimizer state as they were, bit for bit,
// and the run goes on as if that batch had not been there; on one device
// and on a mesh, whose devices then reload the host's state.
TEST_CASE("session: a step that is not finite is undone when asked") {
  for (const char *mesh : {"", "dp=2"}) {
    CAPTURE(mesh);
    SessionOptions options;
    options.defines = mlpDefines();
    options.train = {{"optimizer", "sgd"}, {"lr", "0.1"}};
    options.mesh = mesh;
    options.skipNonFiniteSteps = true;
    auto skipping = makeSession(sample("mlp.mg"), options);
    options.skipNonFiniteSteps = false;
    auto reference = makeSession(sample("mlp.mg"), options);

    feedBatch(*skipping, 0, 4);
    feedBatch(*reference, 0, 4);
    REQUIRE(skipping->step());
    REQUIRE(reference->step());

    std::vector<float> x(8 * 12, 0.5f);
    x[5] = std::nanf("");
    REQUIRE(skipping->feed("x", Tensor::fromFloats({8, 12}, x)));
    auto bad = skipping->step();
    REQUIRE(bad);
    CHECK(bad->skipped);
    CHECK_FALSE(bad->finite());
    CHECK(bad->step == 2);
    CHECK(skipping->stepCount() == 2);
    for (const TensorInfo &p : skipping->parameters()) {
      CAPTURE(p.name);
      CHECK((*skipping->parameter(p.name)).toFloats() ==
            (*reference->parameter(p.name)).toFloats());
    }

    feedBatch(*skipping, 1, 4);
    feedBatch(*reference, 1, 4);
    auto after = skipping->step();
    auto expected = reference->step();
    REQUIRE(after);
    REQUIRE(expected);
    CHECK_FALSE(after->skipped);
    CHECK(after->loss == expected->loss);
    for (const TensorInfo &p : skipping->parameters())
      CHECK((*skipping->parameter(p.name)).toFloats() ==
            (*reference->parameter(p.name)).toFloats());
  }
}

// SessionOptions::findNonFinite: a NaN in the batch is named as the input
// it came in, with the first op that read it and the model's line; on one
// device, on a mesh (naming the device), with accumulation; a finite step
// names nothing, and neither does a session that was not asked to look.
TEST_CASE("session: a step that is not finite says where it began") {
  for (auto [mesh, accumulate] : std::vector<std::pair<const char *, int>>{
           {"", 1}, {"dp=2", 1}, {"dp=2,tp=2", 1}, {"", 2}}) {
    CAPTURE(mesh);
    CAPTURE(accumulate);
    SessionOptions options;
    options.defines = mlpDefines();
    options.mesh = mesh;
    options.accumulate = accumulate;
    options.findNonFinite = true;
    auto s = makeSession(sample("mlp.mg"), options);
    feedBatch(*s, 0, 4);
    auto fine = s->step();
    REQUIRE(fine);
    CHECK(fine->finite());
    CHECK(fine->nonFiniteOrigin == "");

    std::vector<float> x(8 * 12, 0.5f);
    x[7 * 12 + 5] = std::nanf(""); // the last row: dp's second device
    REQUIRE(s->feed("x", Tensor::fromFloats({8, 12}, x)));
    auto bad = s->step();
    REQUIRE(bad);
    CHECK_FALSE(bad->finite());
    std::string origin = bad->nonFiniteOrigin;
    CAPTURE(origin);
    CHECK(origin.find("mlp.mg:17:") != std::string::npos);
    CHECK(origin.find("(`h1 = relu(x @ w1 + b1)") != std::string::npos);
    CHECK(origin.find("its operand 'x' (input) was not finite already") !=
          std::string::npos);
    bool onMesh = *mesh != '\0';
    CHECK((origin.find(" on device ") != std::string::npos) == onMesh);
    if (std::string(mesh) == "dp=2")
      CHECK(origin.find(" on device 1;") != std::string::npos);
  }
  SessionOptions plain;
  plain.defines = mlpDefines();
  auto s = makeSession(sample("mlp.mg"), plain);
  feedBatch(*s, 0, 4);
  std::vector<float> x(8 * 12, std::nanf(""));
  REQUIRE(s->feed("x", Tensor::fromFloats({8, 12}, x)));
  auto bad = s->step();
  REQUIRE(bad);
  CHECK_FALSE(bad->finite());
  CHECK(bad->nonFiniteOrigin == "");
}

// The step counter in a checkpoint is a whole number of steps >= 0 and the
// step its metadata names; anything else is refused naming the value.
TEST_CASE("session: a checkpoint's step counter must be a whole step") {
  TempDir dir("step-counter");
  SessionOptions options;
  options.defines = mlpDefines();
  auto s = makeSession(sample("mlp.mg"), options);
  feedBatch(*s, 0, 4);
  REQUIRE(s->step());
  std::string path = dir.file("c.ckpt");
  REQUIRE(s->saveCheckpoint(path));
  auto saved = runtime::loadCheckpoint(path);
  REQUIRE(saved);
  for (auto [value, why] : std::vector<std::pair<double, std::string>>{
           {std::nan(""), "holds nan, not a whole number of steps >= 0"},
           {-1, "holds -1, not a whole number"},
           {1.5, "holds 1.5, not a whole number"},
           {5, "holds 5 but its metadata says step 1"}}) {
    CAPTURE(value);
    runtime::Checkpoint c = *saved;
    c.tensors.at("opt.step").set(0, value);
    REQUIRE_FALSE(llvm::errorToBool(runtime::saveCheckpoint(path, c)));
    Status st = s->loadCheckpoint(path);
    CHECK_FALSE(st);
    CHECK(st.message().find("its step counter 'opt.step' " + why) !=
          std::string::npos);
  }
}

} // namespace
} // namespace mgc

TEST_CASE("session: exceptions inside a call become its error") {
  using mgc::session::guarded;
  mgc::Status refused = guarded("the training step", []() -> mgc::Status {
    throw std::system_error(EAGAIN, std::generic_category(), "thread");
  });
  CHECK(refused.message().rfind("error: the training step: the system "
                                "refused a resource (thread: ",
                                0) == 0);
  mgc::Result<int> memory = guarded(
      "the forward pass", []() -> mgc::Result<int> { throw std::bad_alloc(); });
  CHECK(memory.status().message() == "error: the forward pass: out of memory");
  mgc::Result<int> fine = guarded("x", []() -> mgc::Result<int> { return 3; });
  REQUIRE(fine);
  CHECK(*fine == 3);
}
