// The plan as JSON: the content of the table with stable keys (objects print
// with sorted keys), raw byte counts instead of units. docs/plan.md lists
// every field.
#include "backend/PlanReport.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

namespace mgc::backend {

namespace {

using llvm::json::Array;
using llvm::json::Object;
using llvm::json::Value;

Value bytes(uint64_t n) { return static_cast<int64_t>(n); }

// Names come from user text and may hold any bytes; JSON needs UTF-8.
Value text(llvm::StringRef s) {
  return llvm::json::isUTF8(s) ? Value(s.str()) : Value(llvm::json::fixUTF8(s));
}

Value optString(const std::string &s) {
  return s.empty() ? Value(nullptr) : text(s);
}

Array shapeOf(const ir::TensorType &t) {
  Array a;
  for (int64_t d : t.shape)
    a.push_back(d);
  return a;
}

Object shardingOf(const ir::Sharding &s) {
  Object o;
  for (const ir::Sharding::Entry &e : s.entries())
    o[e.axis] = e.placement.str();
  return o;
}

Object meshOf(const ir::Mesh &mesh) {
  Array axes;
  for (const ir::MeshAxis &a : mesh.axes()) {
    Array weights;
    for (int64_t w : a.weights)
      weights.push_back(w);
    axes.push_back(Object{
        {"name", a.name}, {"size", a.size}, {"weights", std::move(weights)}});
  }
  return Object{{"text", mesh.str()},
                {"devices", mesh.numDevices()},
                {"axes", std::move(axes)}};
}

Object paramOf(const PlanParam &p) {
  Array shards;
  for (size_t k = 0; k < p.shards.size(); ++k) {
    Array devices;
    for (size_t d = 0; d < p.shardOfDevice.size(); ++d)
      if (p.shardOfDevice[d] == k)
        devices.push_back(static_cast<int64_t>(d));
    shards.push_back(Object{{"type", p.shards[k].str()},
                            {"shape", shapeOf(p.shards[k])},
                            {"bytes", bytes(typeBytes(p.shards[k]))},
                            {"devices", std::move(devices)}});
  }
  return Object{{"name", text(p.name)},
                {"type", p.logical.str()},
                {"dtype", ir::dtypeName(p.logical.dtype)},
                {"shape", shapeOf(p.logical)},
                {"bytes", bytes(typeBytes(p.logical))},
                {"sharding", shardingOf(p.sharding)},
                {"shards", std::move(shards)}};
}

Object commOf(const PlanComm &c, size_t index) {
  Array perDevice;
  for (uint64_t b : c.bytesByDevice)
    perDevice.push_back(bytes(b));
  Array gradients;
  for (const std::string &g : c.gradientsOf)
    gradients.push_back(text(g));
  return Object{{"index", static_cast<int64_t>(index)},
                {"op", static_cast<int64_t>(c.opIndex)},
                {"kind", ir::opName(c.kind)},
                {"axis", c.axis},
                {"group_size", c.groupSize},
                {"from", c.from.str()},
                {"to", c.to.str()},
                {"phase", planPhaseName(c.phase)},
                {"stream", c.stream()},
                {"scope", text(c.scope)},
                {"producer", text(c.producer)},
                {"producer_scope", text(c.producerScope)},
                {"gradients_of", std::move(gradients)},
                {"update_of", optString(c.updateOf)},
                {"type", c.logical.str()},
                {"shape", shapeOf(c.logical)},
                {"bytes_per_device", bytes(c.maxBytes())},
                {"bytes_by_device", std::move(perDevice)}};
}

Object deviceOf(const PlanDeviceMemory &m, const ir::Mesh &mesh) {
  Object coords;
  llvm::SmallVector<int64_t, 4> c = mesh.coords(m.device);
  for (size_t i = 0; i < mesh.axes().size(); ++i)
    coords[mesh.axes()[i].name] = c[i];
  return Object{
      {"device", m.device},
      {"coords", std::move(coords)},
      {"program", static_cast<int64_t>(m.program)},
      {"parameter_bytes", bytes(m.paramBytes)},
      {"optimizer_state_bytes", bytes(m.stateBytes)},
      {"input_bytes", bytes(m.inputBytes)},
      {"arena_peak_bytes", m.arenaPeak ? bytes(*m.arenaPeak) : Value(nullptr)},
      {"total_bytes", bytes(m.total())},
      {"comm_bytes_per_step", bytes(m.commBytes)}};
}

} // namespace

void printPlanJson(const PlanReport &r, llvm::raw_ostream &os) {
  Array params, comms, devices, notes;
  for (const PlanParam &p : r.params)
    params.push_back(paramOf(p));
  for (size_t i = 0; i < r.comms.size(); ++i)
    comms.push_back(commOf(r.comms[i], i));
  for (const PlanDeviceMemory &m : r.devices)
    devices.push_back(deviceOf(m, r.mesh));
  for (const std::string &n : r.notes)
    notes.push_back(text(n));
  size_t collectives = r.numCollectives();
  Object summary{
      {"collectives", static_cast<int64_t>(collectives)},
      {"one_device_collectives", static_cast<int64_t>(r.oneDeviceCollectives)},
      {"local_splits", static_cast<int64_t>(r.comms.size() - collectives)},
      {"comm_bytes_per_device_per_step", bytes(r.maxCommBytesPerDevice())},
      {"max_total_bytes", bytes(r.maxTotalBytes())}};
  Value root = Object{{"format", "mgc-plan"},
                      {"version", 1},
                      {"module", text(r.moduleName)},
                      {"mesh", meshOf(r.mesh)},
                      {"programs", static_cast<int64_t>(r.numPrograms)},
                      {"parameters", std::move(params)},
                      {"communication", std::move(comms)},
                      {"devices", std::move(devices)},
                      {"summary", std::move(summary)},
                      {"notes", std::move(notes)}};
  os << llvm::formatv("{0:2}", root) << '\n';
}

} // namespace mgc::backend
