#include "runtime/HfCheckpoint.h"
#include "support/AtomicFile.h"
#include "support/Json.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <set>

namespace mgc::runtime {

namespace {

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 msg.str().c_str());
}

std::string join(llvm::StringRef folder, llvm::StringRef name) {
  llvm::SmallString<256> path(folder);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

llvm::Expected<llvm::json::Value> readJson(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return fail("cannot read '" + path + "': " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> v = parseJson((*buffer)->getBuffer());
  if (!v)
    return fail("'" + path + "' is not JSON: " + llvm::toString(v.takeError()));
  return v;
}

llvm::Expected<llvm::json::Object> readConfig(const std::string &path) {
  auto v = readJson(path);
  if (!v)
    return v.takeError();
  if (!v->getAsObject())
    return fail("'" + path + "' is not a JSON object");
  return *v->getAsObject();
}

// The "format" in a safetensors file's metadata; "" where there is none or
// the file is not one.
std::string formatOf(llvm::StringRef path) {
  llvm::Expected<StringMap> metadata = loadSafeTensorsMetadata(path);
  if (!metadata) {
    llvm::consumeError(metadata.takeError());
    return "";
  }
  auto format = metadata->find("format");
  return format == metadata->end() ? "" : format->second;
}

// The files of a sharded checkpoint, from its index's "weight_map".
llvm::Error loadIndexed(const std::string &folder, const std::string &index,
                        TensorMap &out) {
  auto v = readJson(index);
  if (!v)
    return v.takeError();
  const llvm::json::Object *o = v->getAsObject();
  const llvm::json::Object *map = o ? o->getObject("weight_map") : nullptr;
  if (!map)
    return fail("'" + index + "' has no \"weight_map\" object");
  std::set<std::string> files;
  for (const auto &[name, file] : *map) {
    auto f = file.getAsString();
    if (!f || f->contains('/') || f->contains('\\'))
      return fail("'" + index + "': the file of '" + name.str() +
                  "' is not a file name in its folder");
    files.insert(f->str());
  }
  for (const std::string &file : files) {
    auto contents = loadSafeTensors(join(folder, file), "checkpoint file");
    if (!contents)
      return contents.takeError();
    for (auto &[name, t] : contents->tensors)
      out.insert_or_assign(name, std::move(t));
  }
  for (const auto &[name, file] : *map)
    if (!out.count(name.str()))
      return fail("'" + index + "' places '" + name.str() + "' in '" +
                  file.getAsString()->str() + "', which does not hold it");
  return llvm::Error::success();
}

} // namespace

bool isHfCheckpoint(llvm::StringRef path) {
  if (llvm::sys::fs::is_directory(path))
    return true;
  std::string format = formatOf(path);
  return !format.empty() && format != "mgc";
}

llvm::Expected<HfCheckpoint> loadHfCheckpoint(llvm::StringRef path) {
  HfCheckpoint out;
  std::string folder = path.str(), configPath;
  if (llvm::sys::fs::is_directory(path)) {
    std::string single = join(folder, "model.safetensors"),
                index = join(folder, "model.safetensors.index.json");
    if (llvm::sys::fs::exists(single)) {
      auto contents = loadSafeTensors(single, "checkpoint file");
      if (!contents)
        return contents.takeError();
      out.tensors = std::move(contents->tensors);
    } else if (llvm::sys::fs::exists(index)) {
      if (auto err = loadIndexed(folder, index, out.tensors))
        return err;
    } else {
      return fail("'" + folder +
                  "' holds neither model.safetensors nor "
                  "model.safetensors.index.json (a folder is read as a Hugging "
                  "Face checkpoint; torch's pytorch_model.bin is not read: "
                  "save it with safe_serialization=True)");
    }
    configPath = join(folder, "config.json");
  } else {
    auto contents = loadSafeTensors(path, "checkpoint");
    if (!contents)
      return contents.takeError();
    out.tensors = std::move(contents->tensors);
    configPath = join(llvm::sys::path::parent_path(path), "config.json");
  }
  if (llvm::sys::fs::exists(configPath)) {
    auto config = readConfig(configPath);
    if (!config)
      return config.takeError();
    out.config = std::move(*config);
  }
  return out;
}

llvm::Error saveHfCheckpoint(llvm::StringRef folder, const TensorMap &tensors,
                             const llvm::json::Object &config) {
  if (std::error_code ec = llvm::sys::fs::create_directories(folder))
    return fail("cannot make the folder '" + folder + "': " + ec.message());
  if (auto err = saveSafeTensors(join(folder, "model.safetensors"), tensors,
                                 {{"format", "pt"}}))
    return err;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object(config)))
     << "\n";
  os.flush();
  return writeFileAtomically(join(folder, "config.json"),
                             [&](FileSink &sink) { return sink.write(text); });
}

} // namespace mgc::runtime
