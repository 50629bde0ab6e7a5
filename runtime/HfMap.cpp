#include "runtime/HfMap.h"
#include "runtime/ShardTensor.h"
#include "support/Json.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <set>

namespace mgc::runtime {

namespace {

using llvm::json::Object;
using llvm::json::Value;

llvm::Error mapError(llvm::StringRef path, const llvm::Twine &msg) {
  return llvm::createStringError(std::errc::invalid_argument,
                                 "name map '%s': %s", path.str().c_str(),
                                 msg.str().c_str());
}

// ---- Reading a map ----

// Reads the fields of one JSON object, refusing keys it does not know (a
// misspelt "tranpose" must not be ignored).
class Fields {
public:
  Fields(const Object &o, std::string where, llvm::StringRef path)
      : o_(o), where_(std::move(where)), path_(path) {}

  llvm::Error string(llvm::StringRef key, std::string &out, bool required) {
    known_.insert(key.str());
    const Value *v = o_.get(key);
    if (!v)
      return required ? fail("has no \"" + key + "\"") : llvm::Error::success();
    if (auto s = v->getAsString()) {
      out = s->str();
      return llvm::Error::success();
    }
    return fail("\"" + key + "\" is not a string");
  }
  llvm::Error integer(llvm::StringRef key, int64_t &out) {
    known_.insert(key.str());
    const Value *v = o_.get(key);
    if (!v)
      return llvm::Error::success();
    auto i = v->getAsInteger();
    if (!i || *i < 0)
      return fail("\"" + key + "\" is not a dimension (an integer >= 0)");
    out = *i;
    return llvm::Error::success();
  }
  llvm::Error boolean(llvm::StringRef key, bool &out) {
    known_.insert(key.str());
    const Value *v = o_.get(key);
    if (!v)
      return llvm::Error::success();
    if (auto b = v->getAsBoolean()) {
      out = *b;
      return llvm::Error::success();
    }
    return fail("\"" + key + "\" is not true or false");
  }
  // A list of strings; `nulls` lets null stand for "".
  llvm::Error strings(llvm::StringRef key, std::vector<std::string> &out,
                      bool nulls = false) {
    known_.insert(key.str());
    const Value *v = o_.get(key);
    if (!v)
      return llvm::Error::success();
    const llvm::json::Array *a = v->getAsArray();
    if (!a)
      return fail("\"" + key + "\" is not a list");
    for (const Value &e : *a) {
      if (auto s = e.getAsString())
        out.push_back(s->str());
      else if (nulls && e.getAsNull())
        out.push_back("");
      else
        return fail("\"" + key + "\" holds something other than " +
                    (nulls ? "names and nulls" : "strings"));
    }
    return llvm::Error::success();
  }
  const Value *any(llvm::StringRef key) {
    known_.insert(key.str());
    return o_.get(key);
  }
  llvm::Error unknownKeys() {
    for (const auto &entry : o_)
      if (!known_.count(entry.first.str()))
        return fail("has an unknown key \"" + entry.first.str() + "\"");
    return llvm::Error::success();
  }
  llvm::Error fail(const llvm::Twine &msg) {
    return mapError(path_, where_ + " " + msg);
  }

private:
  const Object &o_;
  std::string where_;
  llvm::StringRef path_;
  std::set<std::string> known_;
};

llvm::Expected<HfTensorRule> parseRule(const Value &v, size_t index,
                                       llvm::StringRef path) {
  const Object *o = v.getAsObject();
  std::string where = "tensors[" + std::to_string(index) + "]";
  if (!o)
    return mapError(path, where + " is not an object");
  HfTensorRule rule;
  if (auto hf = o->getString("hf"))
    rule.hf = hf->str();
  else
    return mapError(path, where + " has no name \"hf\"");
  Fields g(*o, where + " (" + rule.hf + ")", path);
  g.any("hf");
  const Value *mgc = g.any("mgc");
  if (mgc && mgc->getAsString()) {
    rule.mgc.push_back(mgc->getAsString()->str());
  } else if (auto err = g.strings("mgc", rule.mgc, /*nulls=*/true)) {
    return err;
  }
  if (rule.mgc.empty())
    return g.fail("names no parameter (\"mgc\")");
  if (auto err = g.integer("split", rule.split))
    return err;
  if (auto err = g.boolean("transpose", rule.transpose))
    return err;
  if (auto err = g.integer("pad", rule.padDim))
    return err;
  if (auto err = g.integer("truncate", rule.truncateDim))
    return err;
  if (auto err = g.string("why", rule.why, false))
    return err;
  if (auto err = g.unknownKeys())
    return err;
  if ((rule.mgc.size() > 1) != (rule.split >= 0))
    return g.fail("needs \"split\" exactly when \"mgc\" lists several parts");
  bool dropped = llvm::is_contained(rule.mgc, "");
  if (dropped && rule.why.empty())
    return g.fail("drops a part (null) without saying why (\"why\")");
  if (dropped && size_t(llvm::count(rule.mgc, "")) == rule.mgc.size())
    return g.fail("takes no parameter: list it under \"ignore\"");
  return rule;
}

llvm::Error parseConfig(const Value *v, HfMap &map) {
  if (!v)
    return llvm::Error::success();
  const Object *o = v->getAsObject();
  if (!o)
    return mapError(map.path, "\"config\" is not an object");
  for (const auto &[key, entryValue] : *o) {
    HfConfigEntry entry;
    entry.key = key.str();
    std::string where = "config \"" + entry.key + "\"";
    if (auto s = entryValue.getAsString()) {
      entry.constant = s->str();
    } else if (const Object *e = entryValue.getAsObject()) {
      Fields f(*e, where, map.path);
      std::string model;
      if (auto err = f.string("constant", entry.constant, true))
        return err;
      if (auto err = f.string("model", model, false))
        return err;
      if (auto err = f.unknownKeys())
        return err;
      if (model == "may be larger")
        entry.relation = HfConfigEntry::Relation::ModelMayBeLarger;
      else if (model == "may be smaller")
        entry.relation = HfConfigEntry::Relation::ModelMayBeSmaller;
      else if (!model.empty())
        return f.fail("\"model\" is '" + model +
                      "', not 'may be larger' or 'may be smaller'");
    } else {
      return mapError(map.path,
                      where + " is neither a constant's name nor an "
                              "object {\"constant\": ..., \"model\": ...}");
    }
    map.config.push_back(std::move(entry));
  }
  // A JSON object's keys have no order: in the key's, every message and
  // every config.json written is the same from run to run.
  llvm::sort(map.config, [](const HfConfigEntry &a, const HfConfigEntry &b) {
    return a.key < b.key;
  });
  return llvm::Error::success();
}

} // namespace

llvm::Expected<HfMap> parseHfMap(llvm::StringRef text, llvm::StringRef path) {
  llvm::Expected<Value> parsed = parseJson(text);
  if (!parsed)
    return mapError(path, "not JSON: " + llvm::toString(parsed.takeError()));
  const Object *o = parsed->getAsObject();
  if (!o)
    return mapError(path, "not a JSON object");
  HfMap map;
  map.path = path.str();
  Fields f(*o, "the map", path);
  if (auto err = f.string("model_type", map.modelType, true))
    return err;
  if (auto err = f.strings("architectures", map.architectures))
    return err;
  if (auto err = f.string("prefix", map.prefix, false))
    return err;
  if (auto err = f.string("layers", map.layers, false))
    return err;
  f.any("comment");
  if (auto err = parseConfig(f.any("config"), map))
    return err;
  if (const Value *fixed = f.any("fixed")) {
    if (!fixed->getAsObject())
      return mapError(path, "\"fixed\" is not an object");
    map.fixed = *fixed->getAsObject();
  }
  const Value *tensors = f.any("tensors");
  if (!tensors || !tensors->getAsArray())
    return mapError(path, "has no list \"tensors\"");
  for (const Value &t : *tensors->getAsArray()) {
    auto rule = parseRule(t, map.tensors.size(), path);
    if (!rule)
      return rule.takeError();
    map.tensors.push_back(std::move(*rule));
  }
  if (auto err = f.strings("ignore", map.ignore))
    return err;
  if (const Value *tied = f.any("tied")) {
    const Object *t = tied->getAsObject();
    if (!t)
      return mapError(path, "\"tied\" is not an object");
    for (const auto &[name, to] : *t) {
      if (!to.getAsString())
        return mapError(path, "tied \"" + name.str() + "\" is not a name");
      map.tied.emplace_back(name.str(), to.getAsString()->str());
    }
  }
  if (auto err = f.unknownKeys())
    return err;
  for (const HfTensorRule &rule : map.tensors)
    if (llvm::StringRef(rule.hf).contains("{i}") && map.layers.empty())
      return mapError(path, "tensor '" + rule.hf +
                                "' has a layer index {i} but the map names no "
                                "\"layers\" constant");
  return map;
}

llvm::Expected<HfMap> loadHfMap(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return llvm::createStringError(
        buffer.getError(), "cannot read name map '%s': %s", path.str().c_str(),
        buffer.getError().message().c_str());
  return parseHfMap((*buffer)->getBuffer(), path);
}

} // namespace mgc::runtime
