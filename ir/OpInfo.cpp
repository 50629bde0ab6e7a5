#include "ir/OpInfo.h"

#include "ir/ShapeRules.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <cstdlib>

namespace mgc::ir {

namespace {

// Parses one default value written in OpKinds.def.
AttrValue parseDefault(AttrType type, llvm::StringRef text) {
  switch (type) {
  case AttrType::Bool:
    return text == "true";
  case AttrType::Int:
    return static_cast<int64_t>(std::strtoll(text.str().c_str(), nullptr, 10));
  case AttrType::Float:
    return std::strtod(text.str().c_str(), nullptr);
  case AttrType::String:
    return text.trim('"').str();
  case AttrType::Ints: { // "[1, 1]"
    std::vector<int64_t> list;
    llvm::SmallVector<llvm::StringRef, 4> items;
    text.trim().trim("[]").split(items, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef item : items)
      list.push_back(std::strtoll(item.trim().str().c_str(), nullptr, 10));
    return list;
  }
  }
  return false;
}

AttrType parseAttrType(llvm::StringRef text) {
  if (text == "bool") return AttrType::Bool;
  if (text == "int") return AttrType::Int;
  if (text == "float") return AttrType::Float;
  if (text == "string") return AttrType::String;
  if (text == "ints") return AttrType::Ints;
  // OpKinds.def is ours: a typo there is a build-time bug, caught by the
  // unit test that walks every op.
  std::abort();
}

llvm::SmallVector<AttrSpec, 3> parseAttrSpecs(llvm::StringRef spec) {
  llvm::SmallVector<AttrSpec, 3> out;
  // The attributes are separated by the commas outside a list default.
  llvm::SmallVector<llvm::StringRef, 4> parts;
  size_t begin = 0;
  int depth = 0;
  for (size_t i = 0; i <= spec.size(); ++i) {
    if (i == spec.size() || (spec[i] == ',' && depth == 0)) {
      if (!spec.slice(begin, i).trim().empty())
        parts.push_back(spec.slice(begin, i));
      begin = i + 1;
    } else if (spec[i] == '[') {
      ++depth;
    } else if (spec[i] == ']') {
      --depth;
    }
  }
  for (llvm::StringRef part : parts) {
    part = part.trim();
    auto [name, rest] = part.split(':');
    auto [typeText, defaultText] = rest.split('=');
    AttrSpec a{name.trim().str(), parseAttrType(typeText.trim()), std::nullopt};
    if (rest.contains('='))
      a.defaultValue = parseDefault(a.type, defaultText.trim());
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> table;
#define MGC_OP(Id, Name, Arity, AttrSpecText, Rule, Traits, Summary)           \
  table.push_back(OpInfo{OpKind::Id, Name, Arity,                              \
                         parseAttrSpecs(AttrSpecText), &rules::Rule, Traits,   \
                         Summary});
#include "ir/OpKinds.def"
  return table;
}

const std::vector<OpInfo> &table() {
  static const std::vector<OpInfo> t = buildTable();
  return t;
}

} // namespace

const AttrSpec *OpInfo::findAttr(llvm::StringRef attrName) const {
  for (const AttrSpec &a : attrs)
    if (a.name == attrName)
      return &a;
  return nullptr;
}

const OpInfo &opInfo(OpKind kind) {
  return table()[static_cast<size_t>(kind)];
}

llvm::ArrayRef<OpInfo> allOpInfos() { return table(); }

std::optional<OpKind> lookupOpKind(llvm::StringRef name) {
  for (const OpInfo &info : table())
    if (info.name == name)
      return info.kind;
  return std::nullopt;
}

void fillDefaultAttrs(OpKind kind, Attrs &attrs) {
  for (const AttrSpec &spec : opInfo(kind).attrs)
    if (spec.defaultValue && !attrs.has(spec.name))
      attrs.set(spec.name, *spec.defaultValue);
}

TypeOrError inferResultType(OpKind kind, llvm::ArrayRef<TensorType> operands,
                            const Attrs &attrs) {
  const OpInfo &info = opInfo(kind);
  if (info.arity >= 0 && operands.size() != static_cast<size_t>(info.arity))
    return TypeOrError::error(
        (info.name + " takes " + llvm::Twine(info.arity) + " operand" +
         (info.arity == 1 ? "" : "s") + ", got " + llvm::Twine(operands.size()))
            .str());
  if (info.arity < 0 && operands.empty())
    return TypeOrError::error(
        (info.name + " takes at least one operand, got none").str());
  for (const auto &[name, value] : attrs.entries()) {
    const AttrSpec *spec = info.findAttr(name);
    if (!spec)
      return TypeOrError::error(
          (info.name + " has no attribute '" + name + "'").str());
    if (attrTypeOf(value) != spec->type)
      return TypeOrError::error((info.name + " attribute '" + name +
                                 "' must be " + attrTypeName(spec->type) +
                                 ", got " + formatAttrValue(value))
                                    .str());
  }
  for (const AttrSpec &spec : info.attrs)
    if (!attrs.has(spec.name))
      return TypeOrError::error(
          (info.name + " needs attribute '" + spec.name + "'").str());
  for (size_t i = 0; i < operands.size(); ++i)
    if (!numElements(operands[i].shape))
      return TypeOrError::error((info.name + " operand " + llvm::Twine(i) +
                                 " has an invalid shape " +
                                 shapeStr(operands[i].shape))
                                    .str());
  return info.shapeRule(ShapeQuery{info.name, operands, attrs});
}

} // namespace mgc::ir
