// Hugging Face checkpoints in and out of a session, through the model's
// name map (runtime/HfMap.h): initFrom reads one (readHuggingFace), and
// exportHuggingFace writes the parameters as transformers loads them.
#include "runtime/session/Guarded.h"
#include "runtime/session/SessionImpl.h"

#include "runtime/HfCheckpoint.h"
#include "runtime/HfMap.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mgc {

namespace {

runtime::ParamTypes paramTypes(const Session::Impl &impl) {
  runtime::ParamTypes types;
  for (const auto &arg : impl.main->graph().arguments())
    if (arg->kind() == ir::ValueKind::Param)
      types.emplace(arg->name(), arg->type());
  return types;
}

Result<runtime::HfMap> sessionMap(const Session::Impl &impl,
                                  const std::string &checkpoint) {
  if (impl.hfMap.empty())
    return Status::error(
        "error: " +
        (checkpoint.empty() ? std::string("exporting a Hugging Face checkpoint")
                            : "'" + checkpoint +
                                  "' is a Hugging Face checkpoint, and "
                                  "reading it") +
        " needs a name map from its tensors to the model's parameters: "
        "give one (--hf-map FILE; SessionOptions::hfMap in the library), or "
        "put "
        "MODEL.hf.json beside the model file MODEL.mg (docs/checkpoints.md, "
        "\"Hugging Face checkpoints\")");
  auto map = runtime::loadHfMap(impl.hfMap);
  if (!map)
    return Status::error("error: " + llvm::toString(map.takeError()));
  return std::move(*map);
}

// The model's constants as the name map compares them with config.json.
runtime::ModelConstants jsonConstants(const Session::Impl &impl) {
  runtime::ModelConstants out;
  for (const auto &[name, n] : impl.constants)
    out.emplace(name,
                n.isInt ? llvm::json::Value(n.i) : llvm::json::Value(n.f));
  return out;
}

} // namespace

namespace session {

void setHuggingFaceMap(
    Session::Impl &impl, const std::string &modelPath, const std::string &given,
    const std::map<std::string, frontend::Number> &constants) {
  impl.constants = constants;
  if (!given.empty()) {
    impl.hfMap = given;
    return;
  }
  llvm::SmallString<256> beside(modelPath);
  llvm::sys::path::replace_extension(beside, ".hf.json");
  if (beside != modelPath && llvm::sys::fs::is_regular_file(beside))
    impl.hfMap = beside.str().str();
}

Result<runtime::TensorMap> readHuggingFace(const Session::Impl &impl,
                                           const std::string &path,
                                           InitFromReport &report) {
  auto map = sessionMap(impl, path);
  if (!map)
    return map.status();
  auto checkpoint = runtime::loadHfCheckpoint(path);
  if (!checkpoint)
    return Status::error("error: " + llvm::toString(checkpoint.takeError()));
  auto imported =
      runtime::importHf(*map, checkpoint->tensors,
                        checkpoint->config ? &*checkpoint->config : nullptr,
                        paramTypes(impl), jsonConstants(impl), path);
  if (!imported)
    return Status::error("error: " + llvm::toString(imported.takeError()));
  report.hfMap = impl.hfMap;
  report.notes = std::move(imported->notes);
  if (!checkpoint->config)
    report.notes.push_back("no config.json beside it: only the tensors' "
                           "shapes were checked against the model");
  report.unused = std::move(imported->unused);
  return std::move(imported->tensors);
}

} // namespace session

Status Session::exportHuggingFace(const std::string &folder,
                                  const HuggingFaceExport &options) const {
  return session::guarded("exporting the checkpoint", [&]() -> Status {
    auto map = sessionMap(*impl_, "");
    if (!map)
      return map.status();
    if (options.dtype != DType::F32 && options.dtype != DType::BF16 &&
        options.dtype != DType::F16)
      return Status::error(
          std::string("error: cannot export tensors of type ") +
          dtypeName(options.dtype) +
          ": Hugging Face checkpoints take f32, bf16 or f16");
    DiagnosticCollector sync(impl_.get());
    if (failed(session::syncHost(*impl_, sync.diag())))
      return sync.status();
    runtime::TensorMap params;
    for (const auto &[name, type] : paramTypes(*impl_))
      params.emplace(name, impl_->persistent.at(name));
    runtime::HfExportOptions how;
    if (options.vocabulary > 0)
      how.vocabulary = options.vocabulary;
    how.dtype = static_cast<ir::DType>(options.dtype);
    auto exported = runtime::exportHf(*map, params, jsonConstants(*impl_), how);
    if (!exported)
      return Status::error("error: " + llvm::toString(exported.takeError()));
    if (llvm::Error err = runtime::saveHfCheckpoint(folder, exported->tensors,
                                                    exported->config))
      return Status::error("error: " + llvm::toString(std::move(err)));
    return Status::ok();
  });
}

} // namespace mgc
