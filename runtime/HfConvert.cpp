// Applying a name map (HfMap.h): a Hugging Face checkpoint's tensors to the
// model's parameters (importHf), and back (exportHf).
#include "runtime/HfMap.h"
#include "runtime/ShardTensor.h"
#include "runtime/Slab.h"

#include "llvm/ADT/StringExtras.h"

#include <set>

namespace mgc::runtime {

namespace {

using llvm::json::Object;
using llvm::json::Value;

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 msg.str().c_str());
}

std::string typeText(const Tensor &t) { return t.type().str(); }

// `t` in element type `dtype` (each element rounded once).
Tensor castTensor(const Tensor &t, ir::DType dtype) {
  if (t.dtype() == dtype)
    return t;
  Tensor out(ir::TensorType(dtype, t.type().shape));
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    out.set(i, t.get(i));
  return out;
}

Tensor transposed(const Tensor &t) {
  int64_t rows = t.shape()[0], cols = t.shape()[1];
  Tensor out(ir::TensorType(t.dtype(), {cols, rows}));
  size_t bytes = ir::dtypeBytes(t.dtype());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(out.data() + (c * rows + r) * bytes,
                  t.data() + (r * cols + c) * bytes, bytes);
  return out;
}

// `t` with dimension `dim` made `len` long: zero rows appended.
Tensor padded(const Tensor &t, int64_t dim, int64_t len) {
  ir::TensorType type = t.type();
  type.shape[dim] = len;
  Tensor out(type);
  unpackSlab(t.data(), type.shape, dim, 0, t.shape()[dim], out.data(),
             ir::dtypeBytes(t.dtype()));
  return out;
}

// The layer index of `name` under `pattern` ("h.{i}.ln_1.weight"): -1 for
// a pattern without one; none when the name does not match.
std::optional<int64_t> matchLayer(llvm::StringRef pattern,
                                  llvm::StringRef name) {
  size_t at = pattern.find("{i}");
  if (at == llvm::StringRef::npos)
    return pattern == name ? std::optional<int64_t>(-1) : std::nullopt;
  llvm::StringRef head = pattern.take_front(at),
                  tail = pattern.drop_front(at + 3);
  if (!name.consume_front(head) || !name.consume_back(tail) || name.empty() ||
      !llvm::all_of(name, llvm::isDigit) || (name.size() > 1 && name[0] == '0'))
    return std::nullopt;
  int64_t i;
  if (name.getAsInteger(10, i))
    return std::nullopt;
  return i;
}

std::string withLayer(llvm::StringRef pattern, int64_t layer) {
  if (layer < 0)
    return pattern.str();
  size_t at = pattern.find("{i}");
  return (pattern.take_front(at) + std::to_string(layer) +
          pattern.drop_front(at + 3))
      .str();
}

std::optional<int64_t> layerCount(const HfMap &map,
                                  const ModelConstants &constants) {
  auto it = constants.find(map.layers);
  if (map.layers.empty() || it == constants.end())
    return std::nullopt;
  if (auto i = it->second.getAsInteger())
    return *i;
  return std::nullopt;
}

std::string numberText(const Value &v) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << v;
  return out;
}

// config.json against the model: the sizes its constants must have, and
// the values its code fixes.
llvm::Error checkConfig(const HfMap &map, const Object &config,
                        const ModelConstants &constants,
                        llvm::StringRef checkpoint) {
  std::vector<std::string> differences, defines;
  for (const HfConfigEntry &entry : map.config) {
    const Value *theirs = config.get(entry.key);
    if (!theirs || !theirs->getAsNumber())
      continue;
    auto ours = constants.find(entry.constant);
    if (ours == constants.end() || !ours->second.getAsNumber())
      return fail("name map '" + map.path + "': config \"" + entry.key +
                  "\" names the constant '" + entry.constant +
                  "', which the model does not have");
    double model = *ours->second.getAsNumber(), file = *theirs->getAsNumber();
    using R = HfConfigEntry::Relation;
    bool fits = entry.relation == R::Equal              ? model == file
                : entry.relation == R::ModelMayBeLarger ? model >= file
                                                        : model <= file;
    if (fits)
      continue;
    differences.push_back(entry.key + " " + numberText(*theirs) +
                          " (the model's " + entry.constant + " is " +
                          numberText(ours->second) + ")");
    defines.push_back("-D " + entry.constant + "=" + numberText(*theirs));
  }
  std::vector<std::string> fixedKeys;
  for (const auto &entry : map.fixed)
    fixedKeys.push_back(entry.first.str());
  llvm::sort(fixedKeys);
  for (const std::string &key : fixedKeys) {
    const Value *theirs = config.get(key);
    if (theirs && *theirs != *map.fixed.get(key))
      differences.push_back(key + " " + numberText(*theirs) +
                            " (the model computes " +
                            numberText(*map.fixed.get(key)) + ")");
  }
  if (differences.empty())
    return llvm::Error::success();
  std::string msg = "'" + checkpoint.str() +
                    "' does not fit the model: its config.json has " +
                    llvm::join(differences, ", ");
  if (!defines.empty())
    msg += "; run with " + llvm::join(defines, " ");
  return fail(msg);
}

const ir::TensorType *paramType(const ParamTypes &params,
                                const std::string &name) {
  auto it = params.find(name);
  return it == params.end() ? nullptr : &it->second;
}

// One tensor of the checkpoint, taken by `rule` at `layer`, into `out`.
llvm::Error takeTensor(const HfTensorRule &rule, int64_t layer,
                       const std::string &name, Tensor t,
                       const ParamTypes &params, HfImport &out,
                       std::set<std::string> &notes) {
  std::vector<std::string> names;
  const ir::TensorType *first = nullptr;
  for (const std::string &part : rule.mgc) {
    names.push_back(part.empty() ? "" : withLayer(part, layer));
    if (part.empty())
      continue;
    const ir::TensorType *type = paramType(params, names.back());
    if (!type)
      return fail("cannot take '" + name + "': the model has no parameter '" +
                  names.back() + "' (the name map says it holds it)");
    first = first ? first : type;
  }
  if (rule.transpose) {
    if (t.shape().size() != 2)
      return fail("cannot take '" + name + "' " + typeText(t) +
                  ": the name map transposes it, but it is not a matrix");
    t = transposed(t);
  }
  t = castTensor(t, first->dtype);
  std::vector<Tensor> parts{t};
  if (rule.split >= 0) {
    if (rule.split >= static_cast<int64_t>(t.shape().size()))
      return fail("cannot split '" + name + "' " + typeText(t) +
                  " on dimension " + std::to_string(rule.split));
    // A part with no parameter is as long as the others (a key bias, like
    // the query's and the value's), so that the sizes check every part.
    std::optional<int64_t> common;
    for (const std::string &part : names)
      if (!part.empty()) {
        int64_t len = paramType(params, part)->shape[rule.split];
        common = !common || *common == len ? len : -1;
      }
    std::vector<int64_t> lens;
    for (const std::string &part : names)
      lens.push_back(part.empty() ? *common
                                  : paramType(params, part)->shape[rule.split]);
    if (llvm::is_contained(lens, -1))
      return fail("cannot split '" + name +
                  "': a part with no parameter among parts of different "
                  "sizes has no known size");
    int64_t total = 0;
    std::vector<std::string> lensText, partsText;
    for (size_t k = 0; k < lens.size(); ++k) {
      total += lens[k];
      lensText.push_back(std::to_string(lens[k]));
      partsText.push_back(names[k].empty() ? "(no parameter)" : names[k]);
    }
    if (total != t.shape()[rule.split])
      return fail("cannot split '" + name + "' " + typeText(t) +
                  " into the model's " + llvm::join(partsText, ", ") +
                  ": their sizes on dimension " + std::to_string(rule.split) +
                  " (" + llvm::join(lensText, ", ") + ") do not add up to " +
                  std::to_string(t.shape()[rule.split]));
    parts.clear();
    int64_t off = 0;
    for (int64_t len : lens) {
      parts.push_back(cutTensor(t, rule.split, off, len));
      off += len;
    }
    if (llvm::is_contained(names, ""))
      notes.insert(rule.hf + ": the part with no parameter dropped (" +
                   rule.why + ")");
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    if (names[k].empty())
      continue;
    Tensor part = std::move(parts[k]);
    const ir::TensorType &want = *paramType(params, names[k]);
    bool sameRank = part.shape().size() == want.shape.size();
    if (sameRank && rule.padDim >= 0 && rule.padDim < int64_t(want.rank()) &&
        part.shape()[rule.padDim] < want.shape[rule.padDim]) {
      notes.insert(rule.hf + ": " + std::to_string(part.shape()[rule.padDim]) +
                   " rows padded with zeros to the model's " +
                   std::to_string(want.shape[rule.padDim]));
      part = padded(part, rule.padDim, want.shape[rule.padDim]);
    }
    if (sameRank && rule.truncateDim >= 0 &&
        rule.truncateDim < int64_t(want.rank()) &&
        part.shape()[rule.truncateDim] > want.shape[rule.truncateDim]) {
      notes.insert(rule.hf + ": the first " +
                   std::to_string(want.shape[rule.truncateDim]) + " of " +
                   std::to_string(part.shape()[rule.truncateDim]) +
                   " rows taken");
      part = cutTensor(part, rule.truncateDim, 0, want.shape[rule.truncateDim]);
    }
    if (part.type() != want)
      return fail("cannot take '" + name + "' " + typeText(t) +
                  " as parameter '" + names[k] + "' " + want.str() +
                  (parts.size() > 1 ? " (its part " + std::to_string(k + 1) +
                                          " is " + typeText(part) + ")"
                                    : std::string()));
    out.tensors.insert_or_assign(names[k], std::move(part));
  }
  return llvm::Error::success();
}

bool sameTensor(const Tensor &a, const Tensor &b) {
  return a.type() == b.type() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

} // namespace

llvm::Expected<HfImport> importHf(const HfMap &map, const TensorMap &tensors,
                                  const Object *config,
                                  const ParamTypes &params,
                                  const ModelConstants &constants,
                                  llvm::StringRef checkpoint) {
  if (config)
    if (auto err = checkConfig(map, *config, constants, checkpoint))
      return err;
  std::optional<int64_t> layers = layerCount(map, constants);
  if (!map.layers.empty() && !layers)
    return fail("name map '" + map.path + "': \"layers\" names '" + map.layers +
                "', which is not an integer constant of the model");
  // The names without the optional prefix.
  std::map<std::string, const Tensor *> byName;
  for (const auto &[name, t] : tensors) {
    llvm::StringRef rel = name;
    if (!map.prefix.empty())
      rel.consume_front(map.prefix);
    byName[rel.str()] = &t;
  }
  HfImport out;
  std::set<std::string> notes;
  for (const auto &[relName, t] : byName) {
    // A name of its own: a lambda may not capture a structured binding
    // in C++17, which this file builds as in the fuzz build.
    const std::string &name = relName;
    auto matches = [&](const std::string &pattern) {
      return matchLayer(pattern, name).has_value();
    };
    if (llvm::any_of(map.ignore, matches) ||
        llvm::any_of(map.tied, [&](auto &p) { return matches(p.first); }))
      continue;
    const HfTensorRule *rule = nullptr;
    int64_t layer = -1;
    for (const HfTensorRule &r : map.tensors)
      if (auto i = matchLayer(r.hf, name)) {
        rule = &r;
        layer = *i;
        break;
      }
    if (!rule) {
      out.unused.push_back(name);
      continue;
    }
    if (layers && layer >= *layers)
      return fail("'" + checkpoint.str() + "' has layer " +
                  std::to_string(layer) + " ('" + name + "'), the model " +
                  std::to_string(*layers) + " (" + map.layers +
                  "): run with -D " + map.layers + "=" +
                  std::to_string(layer + 1) + " or more");
    if (auto err = takeTensor(*rule, layer, name, *t, params, out, notes))
      return err;
  }
  for (const auto &[name, to] : map.tied) {
    auto a = byName.find(name), b = byName.find(to);
    if (a != byName.end() && b != byName.end() &&
        !sameTensor(*a->second, *b->second))
      return fail("'" + checkpoint.str() + "' holds '" + name +
                  "' apart from '" + to +
                  "', which the model ties it to (one tensor for both): it is "
                  "not a model of this kind");
  }
  out.notes.assign(notes.begin(), notes.end());
  return out;
}

llvm::Expected<HfExport> exportHf(const HfMap &map, const TensorMap &params,
                                  const ModelConstants &constants,
                                  const HfExportOptions &options) {
  std::optional<int64_t> layers = layerCount(map, constants);
  if (!map.layers.empty() && !layers)
    return fail("name map '" + map.path + "': \"layers\" names '" + map.layers +
                "', which is not an integer constant of the model");
  HfExport out;
  std::set<std::string> written;
  for (const HfTensorRule &rule : map.tensors) {
    bool layered = llvm::StringRef(rule.hf).contains("{i}");
    for (int64_t i = layered ? 0 : -1, end = layered ? *layers : 0; i < end;
         ++i) {
      std::vector<Tensor> parts;
      std::optional<int64_t> partLen;
      std::string named; // a part that has a parameter
      for (const std::string &part : rule.mgc) {
        if (part.empty())
          continue;
        std::string name = withLayer(part, i);
        named = name;
        written.insert(name);
        auto it = params.find(name);
        if (it == params.end())
          return fail("the parameters have no '" + name + "' (the name map '" +
                      map.path + "' writes it into '" + withLayer(rule.hf, i) +
                      "')");
        int64_t len = rule.split >= 0 ? it->second.shape()[rule.split] : 0;
        if (partLen && *partLen != len)
          partLen = -1;
        else if (!partLen)
          partLen = len;
      }
      for (const std::string &part : rule.mgc) {
        if (!part.empty()) {
          parts.push_back(params.at(withLayer(part, i)));
          continue;
        }
        // A part with no parameter (a key bias) is written as zeros, as
        // long as the others tell its size.
        if (!partLen || *partLen < 0)
          return fail("name map '" + map.path + "': '" + rule.hf +
                      "' has a part with no parameter, and its other parts "
                      "differ in size: the size of that part is unknown");
        ir::TensorType type = params.at(named).type();
        type.shape[rule.split] = *partLen;
        parts.emplace_back(type);
      }
      Tensor t = rule.split >= 0 ? joinTensors(parts, rule.split) : parts[0];
      if (rule.padDim >= 0 && options.vocabulary &&
          rule.padDim < int64_t(t.shape().size())) {
        if (*options.vocabulary > t.shape()[rule.padDim])
          return fail("cannot write a vocabulary of " +
                      std::to_string(*options.vocabulary) + ": '" + named +
                      "' has " + std::to_string(t.shape()[rule.padDim]) +
                      " rows");
        t = cutTensor(t, rule.padDim, 0, *options.vocabulary);
      }
      if (rule.transpose)
        t = transposed(t);
      out.tensors.emplace(map.prefix + withLayer(rule.hf, i),
                          castTensor(t, options.dtype));
    }
  }
  std::vector<std::string> lost;
  for (const auto &[name, t] : params)
    if (!written.count(name))
      lost.push_back("'" + name + "'");
  if (!lost.empty())
    return fail("the name map '" + map.path +
                "' writes no tensor for the parameters " +
                llvm::join(lost, ", ") + ": they would be lost");
  Object &config = out.config;
  config["model_type"] = map.modelType;
  if (!map.architectures.empty())
    config["architectures"] = llvm::json::Array(map.architectures);
  for (const auto &[key, value] : map.fixed)
    config[key] = value;
  for (const HfConfigEntry &entry : map.config) {
    auto it = constants.find(entry.constant);
    if (it == constants.end())
      return fail("name map '" + map.path + "': config \"" + entry.key +
                  "\" names the constant '" + entry.constant +
                  "', which the model does not have");
    bool vocabulary =
        entry.relation == HfConfigEntry::Relation::ModelMayBeLarger;
    config[entry.key] = vocabulary && options.vocabulary
                            ? Value(*options.vocabulary)
                            : it->second;
  }
  config["torch_dtype"] = options.dtype == ir::DType::BF16  ? "bfloat16"
                          : options.dtype == ir::DType::F16 ? "float16"
                                                            : "float32";
  return out;
}

} // namespace mgc::runtime
