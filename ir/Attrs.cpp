#include "ir/Attrs.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>

namespace mgc::ir {

llvm::StringRef attrTypeName(AttrType type) {
  switch (type) {
  case AttrType::Bool: return "bool";
  case AttrType::Int: return "int";
  case AttrType::Float: return "float";
  case AttrType::String: return "string";
  case AttrType::Ints: return "int list";
  }
  return "?";
}

AttrType attrTypeOf(const AttrValue &value) {
  return static_cast<AttrType>(value.index());
}

void Attrs::set(llvm::StringRef name, AttrValue value) {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), name,
      [](const Entry &e, llvm::StringRef n) { return llvm::StringRef(e.first) < n; });
  if (it != entries_.end() && it->first == name)
    it->second = std::move(value);
  else
    entries_.insert(it, Entry(name.str(), std::move(value)));
}

const AttrValue *Attrs::find(llvm::StringRef name) const {
  for (const Entry &e : entries_)
    if (e.first == name)
      return &e.second;
  return nullptr;
}

bool Attrs::erase(llvm::StringRef name) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->first == name) {
      entries_.erase(it);
      return true;
    }
  return false;
}

bool Attrs::getBool(llvm::StringRef name) const {
  return std::get<bool>(*find(name));
}
int64_t Attrs::getInt(llvm::StringRef name) const {
  return std::get<int64_t>(*find(name));
}
double Attrs::getFloat(llvm::StringRef name) const {
  return std::get<double>(*find(name));
}
const std::string &Attrs::getString(llvm::StringRef name) const {
  return std::get<std::string>(*find(name));
}
const std::vector<int64_t> &Attrs::getInts(llvm::StringRef name) const {
  return std::get<std::vector<int64_t>>(*find(name));
}

std::string formatDouble(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  std::string s(buf, res.ptr);
  // Keep a float recognisable as a float: 1 -> 1.0 (but not 1e+20).
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

std::string formatAttrValue(const AttrValue &value) {
  switch (attrTypeOf(value)) {
  case AttrType::Bool:
    return std::get<bool>(value) ? "true" : "false";
  case AttrType::Int:
    return std::to_string(std::get<int64_t>(value));
  case AttrType::Float:
    return formatDouble(std::get<double>(value));
  case AttrType::String: {
    std::string out = "\"";
    for (char c : std::get<std::string>(value)) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    return out + "\"";
  }
  case AttrType::Ints: {
    std::string out = "[";
    const auto &v = std::get<std::vector<int64_t>>(value);
    for (size_t i = 0; i < v.size(); ++i) {
      if (i)
        out += ", ";
      out += std::to_string(v[i]);
    }
    return out + "]";
  }
  }
  return "?";
}

} // namespace mgc::ir
