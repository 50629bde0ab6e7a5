#include "ir/Printer.h"

#include "ir/TextLexer.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

namespace mgc::ir {

namespace {

// A name as the text form writes it: bare when it is an identifier, quoted
// otherwise, so that any name reads back unchanged.
std::string nameText(llvm::StringRef name) {
  return isIdentifier(name) ? name.str() : quoteString(name);
}

std::string attrValueText(const AttrValue &value) {
  // Strings go through quoteString so that control characters stay on one
  // line; every other kind prints as everywhere else.
  if (attrTypeOf(value) == AttrType::String)
    return quoteString(std::get<std::string>(value));
  return formatAttrValue(value);
}

void printAttrDict(const Attrs &attrs, llvm::raw_ostream &os) {
  os << '{';
  bool first = true;
  for (const auto &[name, value] : attrs.entries()) {
    if (!first)
      os << ", ";
    first = false;
    os << nameText(name) << " = " << attrValueText(value);
  }
  os << '}';
}

void printLoc(Loc loc, llvm::raw_ostream &os) {
  if (!loc.valid()) {
    os << " loc(unknown)";
    return;
  }
  os << " loc(" << quoteString(loc.fileName()) << ':' << loc.line << ':'
     << loc.col << ')';
}

class Printer {
public:
  Printer(const Module &module, llvm::raw_ostream &os,
          const PrintOptions &options)
      : module_(module), os_(os), options_(options) {}

  void print() {
    const Graph &g = module_.graph();
    nameValues(g);
    os_ << "module @" << nameText(module_.name());
    if (!module_.attrs().empty()) {
      os_ << " attributes ";
      printAttrDict(module_.attrs(), os_);
    }
    os_ << " {\n";
    for (const auto &arg : g.arguments())
      printArgument(*arg);
    for (const auto &op : g.ops())
      printOp(*op);
    for (const Output &o : g.outputs())
      printOutput(o);
    for (const Update &u : g.updates())
      printUpdate(u);
    os_ << "}\n";
  }

private:
  // Arguments keep their names; results are numbered in op order, skipping
  // any number that an argument already uses as its name.
  void nameValues(const Graph &g) {
    llvm::StringSet<> argNames;
    for (const auto &arg : g.arguments()) {
      argNames.insert(arg->name());
      names_[arg.get()] = "%" + nameText(arg->name());
    }
    unsigned next = 0;
    for (const auto &op : g.ops()) {
      std::string number = std::to_string(next++);
      while (argNames.count(number))
        number = std::to_string(next++);
      names_[op->result()] = "%" + number;
    }
  }

  // An invalid module (being debugged) may refer to values that are not in
  // its graph; print a marker rather than crash.
  std::string valueText(const Value *v) const {
    if (!v)
      return "<<null>>";
    auto it = names_.find(v);
    return it == names_.end() ? "<<unknown>>" : it->second;
  }

  void printArgument(const Value &arg) {
    bool persistent = arg.isPersistent();
    const char *keyword = arg.kind() == ValueKind::Param   ? "param "
                          : arg.kind() == ValueKind::State ? "state "
                                                           : "input ";
    os_ << "  " << keyword << valueText(&arg) << " : " << arg.type().str();
    if (!arg.sharding().empty())
      os_ << ' ' << arg.sharding().str();
    if (persistent)
      os_ << " = " << formatInit(arg.init());
    if (arg.isFrozen())
      os_ << " frozen";
    if (options_.locations)
      printLoc(arg.loc(), os_);
    os_ << '\n';
  }

  void printOp(const Op &op) {
    os_ << "  " << valueText(op.result()) << " = " << op.name() << '(';
    for (unsigned i = 0; i < op.numOperands(); ++i)
      os_ << (i ? ", " : "") << valueText(op.operand(i));
    os_ << ')';
    if (!op.attrs().empty()) {
      os_ << ' ';
      printAttrDict(op.attrs(), os_);
    }
    os_ << " : " << op.type().str();
    if (!op.result()->sharding().empty())
      os_ << ' ' << op.result()->sharding().str();
    if (!op.scope().empty())
      os_ << " scope " << quoteString(op.scope());
    if (options_.locations)
      printLoc(op.loc(), os_);
    os_ << '\n';
  }

  void printOutput(const Output &o) {
    os_ << "  output " << nameText(o.name) << " = " << valueText(o.value);
    if (o.isLoss)
      os_ << " [loss]";
    if (options_.locations)
      printLoc(o.loc, os_);
    os_ << '\n';
  }

  void printUpdate(const Update &u) {
    os_ << "  update " << valueText(u.target) << " = " << valueText(u.value);
    if (options_.locations)
      printLoc(u.loc, os_);
    os_ << '\n';
  }

  const Module &module_;
  llvm::raw_ostream &os_;
  const PrintOptions &options_;
  llvm::DenseMap<const Value *, std::string> names_;
};

} // namespace

void printModule(const Module &module, llvm::raw_ostream &os,
                 const PrintOptions &options) {
  Printer(module, os, options).print();
}

std::string printModuleToString(const Module &module,
                                const PrintOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printModule(module, os, options);
  os.flush();
  return text;
}

} // namespace mgc::ir
