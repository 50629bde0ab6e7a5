// What the ranks of a job send each other outside the device programs:
// tensor parts by device and trace events survive the trip, and malformed
// bytes are refused.
#include "runtime/session/HostExchange.h"

#include <doctest/doctest.h>

#include <cstring>

namespace mgc::session {
namespace {

runtime::Tensor counting(ir::DType dtype, std::vector<int64_t> shape) {
  runtime::Tensor t(ir::TensorType(dtype, std::move(shape)));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, static_cast<double>(i % 7) - 3);
  return t;
}

TEST_CASE("host exchange: tensor parts by device, only the needed ones") {
  std::map<int64_t, backend::cpu::NamedTensors> parts;
  parts[0].emplace("w", counting(ir::DType::F32, {2, 3}));
  parts[0].emplace("skip", counting(ir::DType::F32, {4}));
  parts[3].emplace("b", counting(ir::DType::BF16, {5}));
  parts[3].emplace("step", counting(ir::DType::I64, {}));
  std::string bytes = packParts(
      parts, [](int64_t, const std::string &name) { return name != "skip"; });
  std::map<int64_t, backend::cpu::NamedTensors> back;
  REQUIRE(unpackParts(bytes, back));
  CHECK(back.size() == 2);
  CHECK_FALSE(back[0].count("skip"));
  for (auto [device, name] :
       {std::pair<int64_t, const char *>{0, "w"}, {3, "b"}, {3, "step"}}) {
    INFO(device << " " << name);
    const runtime::Tensor &a = parts[device].at(name),
                          &b = back[device].at(name);
    REQUIRE(a.type() == b.type());
    CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
  }
  // Truncated anywhere, or with a dtype no tensor has: refused.
  for (size_t cut :
       {size_t(1), size_t(9), bytes.size() / 2, bytes.size() - 1}) {
    std::map<int64_t, backend::cpu::NamedTensors> into;
    CHECK_FALSE(unpackParts(bytes.substr(0, cut), into));
  }
  std::string bad = bytes;
  // The first part's dtype follows its device (8 bytes), its name's length
  // (8) and the name (1, "w" comes before "skip" and is first).
  bad[8 + 8 + 1] = static_cast<char>(200);
  std::map<int64_t, backend::cpu::NamedTensors> into;
  CHECK_FALSE(unpackParts(bad, into));
}

TEST_CASE("host exchange: trace events") {
  std::vector<backend::cpu::TraceEvent> events(2);
  events[0] = {2,
               backend::cpu::TraceEvent::Queue::Communication,
               "all_reduce",
               "axis dp, 4.0 MiB",
               1.5,
               9.25};
  events[1] = {0, backend::cpu::TraceEvent::Queue::Compute, "matmul", "", 0, 3};
  std::string bytes = packEvents(events);
  std::vector<backend::cpu::TraceEvent> back;
  REQUIRE(unpackEvents(bytes, back));
  REQUIRE(back.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(back[i].device == events[i].device);
    CHECK(back[i].queue == events[i].queue);
    CHECK(back[i].name == events[i].name);
    CHECK(back[i].detail == events[i].detail);
    CHECK(back[i].startUs == events[i].startUs);
    CHECK(back[i].endUs == events[i].endUs);
  }
  std::vector<backend::cpu::TraceEvent> into;
  CHECK_FALSE(unpackEvents(bytes.substr(0, bytes.size() - 3), into));
}

} // namespace
} // namespace mgc::session
