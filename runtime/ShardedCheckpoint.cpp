#include "runtime/ShardedCheckpoint.h"

#include "support/AtomicFile.h"
#include "support/InputFile.h"
#include "support/Json.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstring>

namespace mgc::runtime {

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Copies the box `src` (of shape `box`) into `dst` (of shape `whole`) at
// `offsets`, one contiguous innermost run at a time.
void copyBox(const std::byte *src, llvm::ArrayRef<int64_t> box, std::byte *dst,
             llvm::ArrayRef<int64_t> whole, llvm::ArrayRef<int64_t> offsets,
             size_t bytes) {
  size_t rank = box.size();
  if (rank == 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
  int64_t runs = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    runs *= box[d];
  int64_t run = box[rank - 1];
  if (run == 0)
    return;
  std::vector<int64_t> index(rank, 0); // within the box, outer dimensions
  for (int64_t r = 0; r < runs; ++r) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d)
      at = at * whole[d] + (d + 1 < rank ? index[d] + offsets[d] : offsets[d]);
    std::memcpy(dst + at * bytes, src + r * run * bytes, run * bytes);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < box[d])
        break;
      index[d] = 0;
    }
  }
}

bool overlap(llvm::ArrayRef<int64_t> ao, llvm::ArrayRef<int64_t> as,
             llvm::ArrayRef<int64_t> bo, llvm::ArrayRef<int64_t> bs) {
  for (size_t d = 0; d < ao.size(); ++d)
    if (ao[d] + as[d] <= bo[d] || bo[d] + bs[d] <= ao[d])
      return false;
  return true;
}

llvm::json::Array intsToJson(llvm::ArrayRef<int64_t> xs) {
  llvm::json::Array out;
  for (int64_t x : xs)
    out.push_back(x);
  return out;
}

bool intsFromJson(const llvm::json::Array *a, std::vector<int64_t> &out) {
  if (!a)
    return false;
  out.clear();
  for (const llvm::json::Value &v : *a) {
    llvm::Optional<int64_t> x = v.getAsInteger();
    if (!x || *x < 0)
      return false;
    out.push_back(*x);
  }
  return true;
}

} // namespace

std::string slabKey(const TensorSlab &slab, llvm::ArrayRef<int64_t> whole) {
  llvm::ArrayRef<int64_t> shape = slab.data.shape();
  bool all = shape == whole;
  for (int64_t o : slab.offsets)
    all &= o == 0;
  if (all)
    return slab.name;
  std::string key = slab.name + "[";
  for (size_t d = 0; d < shape.size(); ++d)
    key += (d ? "," : "") + std::to_string(slab.offsets[d]) + ":" +
           std::to_string(slab.offsets[d] + shape[d]);
  return key + "]";
}

std::string shardPath(llvm::StringRef indexPath, int rank, int ranks,
                      int64_t step) {
  char suffix[96];
  std::snprintf(suffix, sizeof suffix, ".step%lld.rank%05d-of-%05d.safetensors",
                static_cast<long long>(step), rank, ranks);
  return indexPath.str() + suffix;
}

std::string shardDigest(const TensorMap &tensors) {
  std::string record;
  for (const auto &[key, t] : tensors)
    record += key + "\n" + checksumOf(t) + "\n";
  return xxh64Hex(record);
}

llvm::Expected<std::string>
saveShard(llvm::StringRef path, const std::vector<TensorSlab> &slabs,
          const std::map<std::string, ir::TensorType> &whole,
          const CheckpointInfo &info) {
  TensorMap tensors;
  for (const TensorSlab &s : slabs) {
    auto it = whole.find(s.name);
    if (it == whole.end())
      return fail("'" + path + "': no type for tensor '" + s.name + "'");
    tensors.emplace(slabKey(s, it->second.shape), s.data);
  }
  std::string digest = shardDigest(tensors);
  if (llvm::Error err =
          saveCheckpoint(path, Checkpoint{info, std::move(tensors)}))
    return std::move(err);
  return digest;
}

llvm::Error saveShardIndex(llvm::StringRef path,
                           const std::map<std::string, ir::TensorType> &types,
                           const std::vector<ShardEntry> &shards,
                           const CheckpointInfo &info) {
  llvm::json::Object metadata, weightMap, tensors;
  llvm::json::Array shardList;
  for (const auto &[k, v] : checkpointMetadata(info))
    metadata[k] = v;
  std::map<std::string, llvm::json::Array> slabsOf;
  for (const ShardEntry &shard : shards) {
    shardList.push_back(llvm::json::Object{
        {"file", shard.file}, {"step", shard.step}, {"digest", shard.digest}});
    for (const SlabEntry &e : shard.slabs) {
      weightMap[e.key] = e.file;
      slabsOf[e.name].push_back(
          llvm::json::Object{{"key", e.key},
                             {"file", e.file},
                             {"offsets", intsToJson(e.offsets)}});
    }
  }
  for (const auto &[name, type] : types)
    tensors[name] =
        llvm::json::Object{{"dtype", safeTensorsDTypeName(type.dtype).str()},
                           {"shape", intsToJson(type.shape)},
                           {"slabs", std::move(slabsOf[name])}};
  llvm::json::Value index(
      llvm::json::Object{{"metadata", std::move(metadata)},
                         {"shards", std::move(shardList)},
                         {"weight_map", std::move(weightMap)},
                         {"tensors", std::move(tensors)}});
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", index) << "\n";
  os.flush();
  return writeFileAtomically(path,
                             [&](FileSink &sink) { return sink.write(text); });
}

// Whether `name` is a shard file of the index named `index`:
// "<index>[.step<N>].rank<5 digits>-of-<5 digits>.safetensors".
static bool isShardOf(llvm::StringRef name, llvm::StringRef index) {
  if (!name.consume_front(index) || !name.consume_front(".") ||
      !name.consume_back(".safetensors"))
    return false;
  if (name.consume_front("step")) {
    size_t digits = name.find_first_not_of("0123456789");
    if (digits == 0 || digits == llvm::StringRef::npos)
      return false;
    name = name.drop_front(digits);
    if (!name.consume_front("."))
      return false;
  }
  return name.size() == 18 && name.startswith("rank") &&
         name.substr(9, 4) == "-of-" &&
         name.substr(4, 5).find_first_not_of("0123456789") ==
             llvm::StringRef::npos &&
         name.substr(13).find_first_not_of("0123456789") ==
             llvm::StringRef::npos;
}

void removeOtherShards(llvm::StringRef indexPath,
                       const std::vector<std::string> &keep) {
  llvm::SmallString<256> folder(indexPath);
  llvm::sys::path::remove_filename(folder);
  if (folder.empty())
    folder = ".";
  llvm::StringRef index = llvm::sys::path::filename(indexPath);
  std::error_code ec;
  std::vector<std::string> stale;
  for (llvm::sys::fs::directory_iterator it(folder, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (isShardOf(name, index) &&
        std::find(keep.begin(), keep.end(), name) == keep.end())
      stale.push_back(it->path());
  }
  for (const std::string &path : stale)
    llvm::sys::fs::remove(path);
}

bool isShardIndex(llvm::StringRef path) {
  // A safetensors file starts with its header's length, an index with '{'.
  llvm::Expected<InputFile> file = InputFile::open(path, "checkpoint");
  char first = 0;
  if (!file) {
    llvm::consumeError(file.takeError());
    return false;
  }
  if (llvm::Error err = file->read(0, 1, &first)) {
    llvm::consumeError(std::move(err));
    return false;
  }
  return first == '{';
}

std::string shardEntryToJson(const ShardEntry &entry) {
  llvm::json::Array slabs;
  for (const SlabEntry &e : entry.slabs)
    slabs.push_back(llvm::json::Object{{"name", e.name},
                                       {"key", e.key},
                                       {"file", e.file},
                                       {"offsets", intsToJson(e.offsets)}});
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(llvm::json::Object{{"file", entry.file},
                                             {"step", entry.step},
                                             {"digest", entry.digest},
                                             {"slabs", std::move(slabs)}});
  return os.str();
}

llvm::Expected<ShardEntry> shardEntryFromJson(llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> v = parseJson(text);
  if (!v)
    return v.takeError();
  const llvm::json::Object *root = v->getAsObject();
  const llvm::json::Array *a = root ? root->getArray("slabs") : nullptr;
  if (!a || !root->getString("file") || !root->getInteger("step") ||
      !root->getString("digest"))
    return fail("shard entry: expected an object with file, step, digest "
                "and slabs");
  ShardEntry out;
  out.file = root->getString("file")->str();
  out.step = *root->getInteger("step");
  out.digest = root->getString("digest")->str();
  for (const llvm::json::Value &x : *a) {
    const llvm::json::Object *o = x.getAsObject();
    SlabEntry e;
    if (!o || !o->getString("name") || !o->getString("key") ||
        !o->getString("file") ||
        !intsFromJson(o->getArray("offsets"), e.offsets))
      return fail("shard entry: expected slabs with name, key, file and "
                  "offsets");
    e.name = o->getString("name")->str();
    e.key = o->getString("key")->str();
    e.file = o->getString("file")->str();
    out.slabs.push_back(std::move(e));
  }
  return out;
}

llvm::Expected<Checkpoint> loadShardedCheckpoint(llvm::StringRef indexPath) {
  llvm::Expected<std::string> text =
      readInputFile(indexPath, "checkpoint index", kMaxTextInputBytes);
  if (!text)
    return text.takeError();
  auto bad = [&](const llvm::Twine &why) {
    return fail("'" + indexPath + "' is not a valid checkpoint index: " + why);
  };
  llvm::Expected<llvm::json::Value> json = parseJson(*text);
  if (!json)
    return bad(llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Object *metadata =
      root ? root->getObject("metadata") : nullptr;
  const llvm::json::Object *tensors =
      root ? root->getObject("tensors") : nullptr;
  if (!metadata || !tensors)
    return bad("expected an object with \"metadata\" and \"tensors\"");
  StringMap meta;
  for (const auto &[k, v] : *metadata) {
    if (!v.getAsString())
      return bad("metadata value '" + k.str() + "' is not a string");
    meta[k.str()] = v.getAsString()->str();
  }
  Checkpoint out;
  auto info = parseCheckpointMetadata(meta, indexPath);
  if (!info)
    return info.takeError();
  out.info = std::move(*info);

  // The shards the index was written with (an index written before it
  // listed them has no "shards": its shards are taken as they are).
  std::map<std::string, std::pair<int64_t, std::string>> listed;
  const llvm::json::Array *shardList = root->getArray("shards");
  if (shardList)
    for (const llvm::json::Value &v : *shardList) {
      const llvm::json::Object *o = v.getAsObject();
      if (!o || !o->getString("file") || !o->getInteger("step") ||
          !o->getString("digest"))
        return bad("a shard needs a file, a step and a digest");
      listed[o->getString("file")->str()] = {*o->getInteger("step"),
                                             o->getString("digest")->str()};
    }

  llvm::SmallString<256> folder(indexPath);
  llvm::sys::path::remove_filename(folder);
  std::map<std::string, Checkpoint> shards;
  auto shard =
      [&](const std::string &file) -> llvm::Expected<const Checkpoint *> {
    auto it = shards.find(file);
    if (it != shards.end())
      return &it->second;
    if (file.empty() || llvm::sys::path::has_parent_path(file))
      return bad("shard file '" + file +
                 "' is not a file name beside the index");
    llvm::SmallString<256> path(folder);
    llvm::sys::path::append(path, file);
    auto loaded = loadCheckpoint(path, "checkpoint shard");
    if (!loaded)
      return loaded.takeError();
    if (shardList) {
      auto it = listed.find(file);
      if (it == listed.end())
        return bad("its slabs name shard '" + file +
                   "', which its list of shards does not");
      if (loaded->info.step != out.info.step ||
          it->second.first != out.info.step)
        return fail("checkpoint shard '" + path + "' holds step " +
                    llvm::Twine(loaded->info.step) + ", but its index '" +
                    indexPath + "' is of step " + llvm::Twine(out.info.step) +
                    ": the shard is from another save (one that stopped "
                    "half way, or a file copied in); resume from a "
                    "checkpoint whose shards are its own");
      std::string digest = shardDigest(loaded->tensors);
      if (digest != it->second.second)
        return fail("checkpoint shard '" + path +
                    "' is not the one its index '" + indexPath +
                    "' was written with (its contents' digest is " + digest +
                    ", the index lists " + it->second.second +
                    "): it is from another save or was changed");
    }
    return &shards.emplace(file, std::move(*loaded)).first->second;
  };

  for (const auto &[nameKey, value] : *tensors) {
    std::string name = nameKey.str();
    const llvm::json::Object *t = value.getAsObject();
    std::vector<int64_t> shape;
    llvm::Optional<llvm::StringRef> dtypeName;
    if (t)
      dtypeName = t->getString("dtype");
    std::optional<ir::DType> dtype =
        dtypeName ? parseSafeTensorsDType(*dtypeName) : std::nullopt;
    const llvm::json::Array *slabs = t ? t->getArray("slabs") : nullptr;
    if (!t || !dtype || !intsFromJson(t->getArray("shape"), shape) || !slabs)
      return bad("tensor '" + name + "' needs a dtype, a shape and slabs");
    Tensor whole(ir::TensorType(*dtype, shape));
    size_t bytes = ir::dtypeBytes(*dtype);
    int64_t covered = 0;
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> boxes;
    for (const llvm::json::Value &sv : *slabs) {
      const llvm::json::Object *s = sv.getAsObject();
      std::vector<int64_t> offsets;
      if (!s || !s->getString("key") || !s->getString("file") ||
          !intsFromJson(s->getArray("offsets"), offsets))
        return bad("a slab of '" + name + "' needs a key, a file and offsets");
      auto contents = shard(s->getString("file")->str());
      if (!contents)
        return contents.takeError();
      std::string key = s->getString("key")->str();
      auto it = (*contents)->tensors.find(key);
      if (it == (*contents)->tensors.end())
        return bad("shard '" + s->getString("file")->str() + "' has no '" +
                   key + "'");
      const Tensor &part = it->second;
      llvm::ArrayRef<int64_t> box = part.shape();
      bool inside = part.dtype() == *dtype && box.size() == shape.size() &&
                    offsets.size() == shape.size();
      for (size_t d = 0; inside && d < shape.size(); ++d)
        inside = offsets[d] + box[d] <= shape[d];
      if (!inside)
        return bad("slab '" + key + "' (" + part.type().str() +
                   ") does not fit tensor '" + name + "' (" +
                   whole.type().str() + ")");
      for (const auto &[o, b] : boxes)
        if (overlap(o, b, offsets, box))
          return bad("slabs of '" + name + "' overlap");
      boxes.push_back({offsets, std::vector<int64_t>(box.begin(), box.end())});
      copyBox(part.data(), box, whole.data(), shape, offsets, bytes);
      covered += part.numel();
    }
    if (covered != whole.numel())
      return bad("the slabs of '" + name + "' cover " +
                 std::to_string(covered) + " of its " +
                 std::to_string(whole.numel()) + " elements");
    out.tensors.emplace(name, std::move(whole));
  }
  return out;
}

} // namespace mgc::runtime
