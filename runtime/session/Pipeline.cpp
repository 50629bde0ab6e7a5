// The standard pipeline from a model to its executables, the training
// overrides and the model hash.
#include "runtime/session/Pipeline.h"

#include "backend/cpu/Kernels.h"
#include "ir/Printer.h"
#include "ir/TargetModule.h"
#include "ir/TextParser.h"
#include "passes/MixedPrecision.h"
#include "passes/Optimizer.h"
#include "passes/PassManager.h"
#include "runtime/Checkpoint.h"
#include "support/Suggest.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace mgc::session {

namespace {

enum class SettingKind { Number, Integer, Word, Bool };

struct Setting {
  const char *key;
  SettingKind kind;
};

// The train.* settings of docs/training.md and the type each is read as.
constexpr Setting kSettings[] = {
    {"optimizer", SettingKind::Word},
    {"lr", SettingKind::Number},
    {"momentum", SettingKind::Number},
    {"beta1", SettingKind::Number},
    {"beta2", SettingKind::Number},
    {"eps", SettingKind::Number},
    {"weight_decay", SettingKind::Number},
    {"schedule", SettingKind::Word},
    {"warmup_steps", SettingKind::Integer},
    {"steps", SettingKind::Integer},
    {"decay_steps", SettingKind::Integer},
    {"wsd_decay_steps", SettingKind::Integer},
    {"min_lr", SettingKind::Number},
    {"clip_grad_norm", SettingKind::Number},
    {"keep_gradients", SettingKind::Bool},
    {"seed", SettingKind::Integer},
    {"precision", SettingKind::Word},
};

std::optional<double> parseNumber(const std::string &text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])))
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  double d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(d))
    return std::nullopt;
  return d;
}

} // namespace

LogicalResult
applyTrainOverrides(ir::Module &module,
                    const std::map<std::string, std::string> &train,
                    DiagnosticEngine &diag) {
  bool ok = true;
  for (const auto &[key, text] : train) {
    const Setting *setting = nullptr;
    for (const Setting &s : kSettings)
      if (key == s.key)
        setting = &s;
    if (!setting) {
      std::string msg = "unknown training setting '" + key + "'";
      ClosestName closest(key);
      for (const Setting &s : kSettings)
        closest.consider(s.key);
      if (!closest.best().empty())
        msg += "; did you mean '" + closest.best().str() + "'?";
      diag.error(msg);
      ok = false;
      continue;
    }
    std::string name = "train." + key;
    // Not a capture of the structured bindings, which clang 14 refuses.
    auto bad = [&, &key = key, &text = text](const char *expected) {
      diag.error("invalid value '" + text + "' for training setting '" + key +
                 "': expected " + expected);
      ok = false;
    };
    switch (setting->kind) {
    case SettingKind::Word:
      if (text.empty())
        bad("a word");
      else
        module.attrs().set(name, text);
      break;
    case SettingKind::Number:
      if (auto d = parseNumber(text))
        module.attrs().set(name, *d);
      else
        bad("a number");
      break;
    case SettingKind::Integer: {
      int64_t n = 0;
      if (llvm::StringRef(text).getAsInteger(10, n))
        bad("an integer");
      else
        module.attrs().set(name, n);
      break;
    }
    case SettingKind::Bool:
      if (text == "true" || text == "1")
        module.attrs().set(name, true);
      else if (text == "false" || text == "0")
        module.attrs().set(name, false);
      else
        bad("true or false");
      break;
    }
  }
  return ok ? success() : failure();
}

std::string
dropOtherOptimizerSettings(ir::Module &module,
                           const std::map<std::string, std::string> &train) {
  auto flag = train.find("optimizer");
  const ir::AttrValue *file = module.attrs().find("train.optimizer");
  const auto *named = file ? std::get_if<std::string>(file) : nullptr;
  if (flag == train.end() || !named || *named == flag->second)
    return "";
  const std::string fileName = *named; // erasing below moves the attributes
  std::vector<std::string> dropped;
  for (const char *key : {"beta1", "beta2", "eps", "momentum", "weight_decay"})
    if (!train.count(key) && module.attrs().erase(std::string("train.") + key))
      dropped.push_back(key);
  if (dropped.empty())
    return "";
  return "optimizer " + flag->second + " replaces the model file's " +
         fileName + ": its settings " + llvm::join(dropped, ", ") +
         " were dropped (the learning rate stays; give the new optimizer's "
         "settings by their flags, --momentum, --weight-decay, ...)";
}

LogicalResult applyPrecision(ir::Module &module, const std::string &precision,
                             DiagnosticEngine &diag) {
  if (precision.empty())
    return success();
  if (!passes::parsePrecision(precision)) {
    diag.error("unknown precision '" + precision + "': expected " +
               passes::kPrecisionChoices);
    return failure();
  }
  module.attrs().set(passes::kPrecisionAttr, precision);
  return success();
}

std::string modelHash(const ir::Module &module) {
  // The first line of the text form holds the module's name and attributes:
  // rebuild it without train.* (and without the hash itself and the
  // target) so that the training settings and the backend do not change the
  // model's identity.
  std::string text = ir::printModuleToString(module);
  size_t eol = text.find('\n');
  std::string body = eol == std::string::npos ? "" : text.substr(eol);
  std::string header = "module @" + module.name();
  for (const auto &[name, value] : module.attrs().entries())
    if (!llvm::StringRef(name).startswith("train.") && name != kModelHashAttr &&
        name != ir::kTargetAttr)
      header += " " + name + "=" + ir::formatAttrValue(value);
  return runtime::hashModelSource(header + body);
}

std::string executableModelHash(const ir::Module &module) {
  if (const ir::AttrValue *v = module.attrs().find(kModelHashAttr))
    if (auto *s = std::get_if<std::string>(v))
      return *s;
  return modelHash(module);
}

std::unique_ptr<ir::Module> cloneModule(const ir::Module &module,
                                        DiagnosticEngine &diag) {
  ir::PrintOptions options;
  options.locations = true;
  std::string text = ir::printModuleToString(module, options);
  return ir::parseModuleText("<module copy>", text, diag);
}

LogicalResult runPipeline(ir::Module &module, const char *pipeline,
                          DiagnosticEngine &diag) {
  passes::PassManagerOptions options;
  options.verifyEach = true;
  passes::PassManager pm(options);
  if (failed(pm.parsePipeline(pipeline, diag)))
    return failure();
  return pm.run(module, diag);
}

FailureOr<ModelExecutables>
buildModelExecutables(std::unique_ptr<ir::Module> module,
                      DiagnosticEngine &diag, bool withStep) {
  module->attrs().set(kModelHashAttr, modelHash(*module));
  ModelExecutables result;
  if (withStep && module->graph().lossOutput()) {
    // Check the settings first so that a bad one is reported as such, not
    // after the cost of differentiating.
    if (passes::readOptimizerConfig(module->attrs(), diag).failed() ||
        passes::readPrecision(module->attrs(), diag).failed())
      return failure();
    auto step = cloneModule(*module, diag);
    if (!step || failed(runPipeline(*step, kTrainingPipeline, diag)))
      return failure();
    result.step =
        backend::buildExecutable(std::move(step), backend::cpu::scratchBytes);
  }
  if (failed(runPipeline(*module, kForwardPipeline, diag)))
    return failure();
  result.forward =
      backend::buildExecutable(std::move(module), backend::cpu::scratchBytes);
  return result;
}

std::unique_ptr<backend::Executable> forwardFromStep(const ir::Module &step,
                                                     DiagnosticEngine &diag) {
  auto module = cloneModule(step, diag);
  if (!module)
    return nullptr;
  ir::Graph &g = module->graph();
  g.updates().clear();
  auto &outs = g.outputs();
  outs.erase(std::remove_if(outs.begin(), outs.end(),
                            [](const ir::Output &o) {
                              llvm::StringRef n(o.name);
                              return n == passes::kLROutputName ||
                                     n == passes::kGradNormOutputName ||
                                     n.startswith("grad.");
                            }),
             outs.end());
  if (failed(runPipeline(*module, "eval-mode,accuracy,dce", diag)))
    return nullptr;
  return backend::buildExecutable(std::move(module),
                                  backend::cpu::scratchBytes);
}

} // namespace mgc::session
