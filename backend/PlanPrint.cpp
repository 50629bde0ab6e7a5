// The plan as an aligned table: a heading with the mesh, then Parameters,
// Communication and Memory per device, a summary line and any notes.
// docs/plan.md explains every column.
#include "backend/PlanReport.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

namespace mgc::backend {

namespace {

// Columns padded to their widest cell; numbers right-aligned.
class Table {
public:
  Table(std::vector<std::string> header, std::vector<bool> right)
      : header_(std::move(header)), right_(std::move(right)) {
    right_.resize(header_.size(), false);
  }
  void add(std::vector<std::string> row) {
    row.resize(header_.size());
    rows_.push_back(std::move(row));
  }
  void print(llvm::raw_ostream &os) const {
    std::vector<size_t> width(header_.size(), 0);
    for (size_t i = 0; i < header_.size(); ++i) {
      width[i] = header_[i].size();
      for (const auto &row : rows_)
        width[i] = std::max(width[i], row[i].size());
    }
    printRow(os, header_, width);
    for (const auto &row : rows_)
      printRow(os, row, width);
  }

private:
  void printRow(llvm::raw_ostream &os, const std::vector<std::string> &row,
                const std::vector<size_t> &width) const {
    std::string line = "  ";
    for (size_t i = 0; i < row.size(); ++i) {
      std::string pad(width[i] - row[i].size(), ' ');
      line += right_[i] ? pad + row[i] : row[i] + pad;
      if (i + 1 < row.size())
        line += "  ";
    }
    // No trailing blanks from a left-aligned last column.
    os << llvm::StringRef(line).rtrim() << '\n';
  }

  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string shardText(const PlanParam &p) {
  if (p.shards.size() == 1)
    return p.shards.front().str();
  std::string s;
  for (size_t k = 0; k < p.shards.size(); ++k) {
    std::vector<int64_t> on;
    for (size_t d = 0; d < p.shardOfDevice.size(); ++d)
      if (p.shardOfDevice[d] == k)
        on.push_back(static_cast<int64_t>(d));
    s += (k ? "; " : "") + p.shards[k].str() + " on " + formatDeviceList(on);
  }
  return s;
}

std::string movesText(const PlanComm &c) {
  const std::vector<std::string> &g = c.gradientsOf;
  if (g.size() == 1)
    return "gradient of " + g.front() + " (" + c.producer + ")";
  if (!g.empty()) {
    // A bucket: the first few names, so the column stays readable.
    std::string s = "gradients of " + std::to_string(g.size()) + " params: ";
    for (size_t i = 0; i < g.size() && i < 3; ++i)
      s += (i ? ", " : "") + g[i];
    if (g.size() > 3)
      s += ", ...";
    return s + " (" + c.producer + ")";
  }
  if (!c.updateOf.empty())
    return "new value of " + c.updateOf + " (" + c.producer + ")";
  return c.producer;
}

std::string bytesText(const PlanComm &c) {
  if (c.bytesByDevice.empty())
    return "-";
  auto [lo, hi] =
      std::minmax_element(c.bytesByDevice.begin(), c.bytesByDevice.end());
  if (*lo == *hi)
    return formatBytes(*hi);
  return formatBytes(*lo) + " - " + formatBytes(*hi);
}

std::string plural(size_t n, llvm::StringRef one, llvm::StringRef many) {
  return std::to_string(n) + " " + (n == 1 ? one : many).str();
}

void printParams(const PlanReport &r, llvm::raw_ostream &os) {
  uint64_t logical = 0;
  for (const PlanParam &p : r.params)
    logical += typeBytes(p.logical);
  os << "Parameters: " << r.params.size() << ", " << formatBytes(logical)
     << " logical\n";
  if (r.params.empty())
    return;
  Table t({"name", "logical type", "sharding", "shard per device"}, {});
  for (const PlanParam &p : r.params)
    t.add({p.name, p.logical.str(),
           p.sharding.empty() ? "{}" : p.sharding.str(), shardText(p)});
  t.print(os);
}

void printComms(const PlanReport &r, llvm::raw_ostream &os) {
  size_t collectives = r.numCollectives();
  os << "Communication: " << plural(collectives, "collective", "collectives");
  if (collectives != r.comms.size())
    os << ", "
       << plural(r.comms.size() - collectives, "local split", "local splits");
  os << " (bytes: sent per device per step, ring estimates)";
  if (r.oneDeviceCollectives)
    os << "; " << plural(r.oneDeviceCollectives, "collective", "collectives")
       << " over an axis of one device, which move nothing, not listed";
  os << "\n";
  if (r.comms.empty())
    return;
  Table t({"#", "op", "kind", "axis", "change", "phase", "stream",
           "logical type", "bytes/device", "moves", "scope"},
          {true, true, false, false, false, false, false, false, true});
  size_t i = 0;
  for (const PlanComm &c : r.comms) {
    std::string scope = !c.producerScope.empty() ? c.producerScope : c.scope;
    t.add({std::to_string(++i), "%" + std::to_string(c.opIndex),
           ir::opName(c.kind).str(), c.axis, c.from.str() + " -> " + c.to.str(),
           planPhaseName(c.phase).str(), c.stream().str(), c.logical.str(),
           bytesText(c), movesText(c), scope.empty() ? "-" : scope});
  }
  t.print(os);
}

void printMemory(const PlanReport &r, llvm::raw_ostream &os) {
  os << "Memory per device (arena: activations, gradients, temporaries)\n";
  Table t({"device", "coords", "program", "params", "opt state", "inputs",
           "arena peak", "total", "comm/step"},
          {true, false, true, true, true, true, true, true, true});
  for (const PlanDeviceMemory &m : r.devices)
    t.add({std::to_string(m.device), coordsText(r.mesh, m.device),
           std::to_string(m.program), formatBytes(m.paramBytes),
           formatBytes(m.stateBytes), formatBytes(m.inputBytes),
           m.arenaPeak ? formatBytes(*m.arenaPeak) : "?",
           formatBytes(m.total()) + (m.arenaPeak ? "" : " + ?"),
           formatBytes(m.commBytes)});
  t.print(os);
}

} // namespace

std::string coordsText(const ir::Mesh &mesh, int64_t device) {
  llvm::SmallVector<int64_t, 4> c = mesh.coords(device);
  std::string s;
  for (size_t i = 0; i < mesh.axes().size(); ++i)
    s += (i ? "," : "") + mesh.axes()[i].name + "=" + std::to_string(c[i]);
  return s.empty() ? "-" : s;
}

void printPlan(const PlanReport &r, llvm::raw_ostream &os) {
  std::string mesh = r.mesh.str();
  os << "Plan of @" << r.moduleName
     << (r.mesh.isTrivial() ? " on one device (mesh " : " on mesh ")
     << (mesh.empty() ? "(none)" : mesh) << (r.mesh.isTrivial() ? ")" : "")
     << ": " << plural(r.mesh.numDevices(), "device", "devices")
     << (r.devicesAre.empty() ? "" : " (" + r.devicesAre + ")") << ", "
     << plural(r.numPrograms, "program", "programs") << "\n\n";
  printParams(r, os);
  os << '\n';
  printComms(r, os);
  os << '\n';
  printMemory(r, os);
  os << '\n';
  os << "Summary: " << plural(r.numCollectives(), "collective", "collectives")
     << ", " << formatBytes(r.maxCommBytesPerDevice())
     << " moved per device per step, " << formatBytes(r.maxTotalBytes())
     << " of memory per device (largest device)\n";
  if (!r.notes.empty()) {
    os << "Notes:\n";
    for (const std::string &n : r.notes)
      os << "  - " << n << '\n';
  }
}

} // namespace mgc::backend
