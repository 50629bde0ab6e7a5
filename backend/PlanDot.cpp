// The partitioned step as a Graphviz graph: one cluster per device (devices
// that share a program still get their own), the arguments and ops of its
// program as small nodes labelled with the name and local type,
// communication ops highlighted, and dashed edges joining the same
// collective on neighbouring devices of its group.
#include "backend/PlanReport.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace mgc::backend {

namespace {

// A DOT double-quoted string.
std::string quote(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    out += c;
  }
  return out + "\"";
}

bool isCommOp(const ir::Op &op) {
  return op.info().has(ir::kCollective) || op.kind() == ir::OpKind::LocalSplit;
}

std::string axisOf(const ir::Op &op) {
  if (const ir::AttrValue *v = op.attrs().find("axis"))
    if (const std::string *s = std::get_if<std::string>(v))
      return *s;
  return {};
}

// The collectives of a program by axis, in program order, as (op index,
// op): the k-th on an axis is the same collective on every device (SPMD
// programs).
using CollectivesByAxis =
    llvm::StringMap<std::vector<std::pair<size_t, const ir::Op *>>>;

CollectivesByAxis collectivesOf(const ir::Graph &g) {
  CollectivesByAxis out;
  size_t i = 0;
  for (const auto &op : g.ops()) {
    if (op->info().has(ir::kCollective))
      out[axisOf(*op)].push_back({i, op.get()});
    ++i;
  }
  return out;
}

// The logical shape and placement change of each collective of the
// sharded module, for the tooltips, matched the same way.
llvm::StringMap<std::vector<std::string>> logicalTips(const ir::Module &m) {
  llvm::StringMap<std::vector<std::string>> out;
  for (const auto &op : m.graph().ops()) {
    if (!op->info().has(ir::kCollective) || op->numOperands() != 1 ||
        !op->operand(0))
      continue;
    out[axisOf(*op)].push_back("logical " + op->type().str() + " " +
                               op->operand(0)->sharding().str() + " -> " +
                               op->result()->sharding().str());
  }
  return out;
}

class DotWriter {
public:
  DotWriter(const ir::Module &sharded, const passes::DevicePrograms &programs,
            const PlanDotOptions &options, llvm::raw_ostream &os)
      : sharded_(sharded), programs_(programs), options_(options), os_(os),
        tips_(logicalTips(sharded)) {
    int64_t n = static_cast<int64_t>(programs_.programOf.size());
    for (int64_t d = 0; d < n; ++d)
      if (options.devices.empty() || llvm::is_contained(options.devices, d))
        drawn_.push_back(d);
  }

  void write() {
    const ir::Mesh &mesh = programs_.mesh;
    os_ << "digraph plan {\n"
        << "  graph [label="
        << quote("@" + sharded_.name() + " on mesh " + mesh.str())
        << ", labelloc=t, fontsize=12, rankdir=TB, newrank=true"
        // Cheap layout: straight edges and short crossing minimisation, so
        // that dot lays out thousands of nodes in seconds, not minutes.
        << ", splines=false, mclimit=0.05, nslimit=1, nslimit1=1, "
           "remincross=false, searchsize=10];\n"
        << "  node [shape=box, fontsize=8, height=0.2, width=0.3, "
           "margin=\"0.03,0.01\", style=filled, fillcolor=white];\n"
        << "  edge [arrowsize=0.4, penwidth=0.6];\n";
    for (int64_t d : drawn_)
      writeCluster(d);
    for (int64_t d : drawn_)
      writeJoins(d);
    os_ << "}\n";
  }

private:
  const ir::Module *program(int64_t d) const {
    size_t p = programs_.programOf[d];
    return p < programs_.programs.size() ? programs_.programs[p].get()
                                         : nullptr;
  }

  static std::string nodeId(int64_t d, const char *kind, size_t i) {
    return "d" + std::to_string(d) + "_" + kind + std::to_string(i);
  }

  void writeCluster(int64_t d) {
    const ir::Mesh &mesh = programs_.mesh;
    std::string label = "device " + std::to_string(d);
    if (mesh.numDevices() == static_cast<int64_t>(programs_.programOf.size())) {
      llvm::SmallVector<int64_t, 4> c = mesh.coords(d);
      for (size_t i = 0; i < mesh.axes().size(); ++i)
        label += (i ? "," : " (") + mesh.axes()[i].name + "=" +
                 std::to_string(c[i]) + (i + 1 == c.size() ? ")" : "");
    }
    const ir::Module *prog = program(d);
    label += prog ? ", program " + std::to_string(programs_.programOf[d])
                  : ", no program";
    os_ << "  subgraph cluster_dev" << d << " {\n"
        << "    label=" << quote(label) << ";\n"
        << "    style=rounded; color=gray60; fontsize=10;\n";
    if (prog)
      writeProgram(d, prog->graph());
    os_ << "  }\n";
  }

  void writeProgram(int64_t d, const ir::Graph &g) {
    llvm::DenseMap<const ir::Value *, std::string> ids;
    size_t i = 0;
    for (const auto &arg : g.arguments()) {
      if (!options_.arguments)
        break;
      std::string id = nodeId(d, "a", i++);
      ids[arg.get()] = id;
      const char *color = arg->kind() == ir::ValueKind::Param   ? "#d1e5f0"
                          : arg->kind() == ir::ValueKind::State ? "#e0e0e0"
                                                                : "#d9f0d3";
      os_ << "    " << id
          << " [label=" << quote(arg->name() + "\n" + arg->type().str())
          << ", shape=ellipse, fillcolor=\"" << color << "\"];\n";
    }
    i = 0;
    llvm::StringMap<size_t> seenOnAxis;
    for (const auto &op : g.ops()) {
      std::string id = nodeId(d, "n", i++);
      ids[op->result()] = id;
      os_ << "    " << id;
      if (isCommOp(*op)) {
        bool collective = op->info().has(ir::kCollective);
        os_ << " [label="
            << quote(op->name().str() + " " + axisOf(*op) + "\n" +
                     op->type().str())
            << ", shape=" << (collective ? "hexagon" : "box")
            << ", style=\"filled,bold\", color=\""
            << (collective ? "#b2182b" : "#e08214") << "\", fillcolor=\""
            << (collective ? "#f4a582" : "#fee0b6") << "\"";
        if (collective) {
          std::string axis = axisOf(*op);
          size_t k = seenOnAxis[axis]++;
          auto tip = tips_.find(axis);
          if (tip != tips_.end() && k < tip->second.size())
            os_ << ", tooltip=" << quote(tip->second[k]);
        }
        os_ << "];\n";
      } else {
        os_ << " [label=" << quote(op->name().str() + "\n" + op->type().str())
            << "];\n";
      }
    }
    for (const auto &op : g.ops())
      for (const ir::Value *v : op->operands()) {
        auto it = ids.find(v);
        if (it != ids.end())
          os_ << "    " << it->second << " -> " << ids[op->result()] << ";\n";
      }
  }

  // Dashed edges from each collective of device d to the same collective
  // on the next device of its group.
  void writeJoins(int64_t d) {
    const ir::Module *prog = program(d);
    if (!prog)
      return;
    const ir::Mesh &mesh = programs_.mesh;
    if (mesh.numDevices() != static_cast<int64_t>(programs_.programOf.size()))
      return;
    CollectivesByAxis mine = collectivesOf(prog->graph());
    for (const auto &entry : mine) {
      std::vector<int64_t> group = mesh.group(d, entry.getKey());
      auto at = llvm::find(group, d);
      if (at == group.end() || at + 1 == group.end())
        continue;
      int64_t next = *(at + 1);
      const ir::Module *other = program(next);
      if (!llvm::is_contained(drawn_, next))
        continue;
      if (!other)
        continue;
      CollectivesByAxis theirs = collectivesOf(other->graph());
      const auto &a = entry.getValue();
      const auto &b = theirs[entry.getKey()];
      for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
        if (a[k].second->kind() != b[k].second->kind())
          continue;
        os_ << "  " << nodeId(d, "n", a[k].first) << " -> "
            << nodeId(next, "n", b[k].first)
            << " [style=dashed, dir=none, constraint=false, color=\"#b2182b\", "
               "penwidth=1.2];\n";
      }
    }
  }

  const ir::Module &sharded_;
  const passes::DevicePrograms &programs_;
  const PlanDotOptions &options_;
  llvm::raw_ostream &os_;
  std::vector<int64_t> drawn_; // the devices drawn, in order
  llvm::StringMap<std::vector<std::string>> tips_;
};

} // namespace

void printPlanDot(const ir::Module &sharded,
                  const passes::DevicePrograms &programs, llvm::raw_ostream &os,
                  const PlanDotOptions &options) {
  DotWriter(sharded, programs, options, os).write();
}

} // namespace mgc::backend
