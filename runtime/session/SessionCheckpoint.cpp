// Session checkpoints: parameters, optimizer state and the training
// metadata in a safetensors file (runtime/Checkpoint.h), or with several
// processes one file of shards per rank and an index
// (runtime/ShardedCheckpoint.h). Loading checks the whole checkpoint
// against the model before anything changes, so a refused checkpoint leaves
// the session as it was. initFrom takes only the parameters, by name, into
// a model that may differ from the one that saved them.
#include "runtime/session/Guarded.h"
#include "runtime/session/SessionImpl.h"

#include "runtime/Checkpoint.h"
#include "runtime/HfCheckpoint.h"
#include "runtime/ShardedCheckpoint.h"

#include "passes/LossScale.h"
#include "passes/Optimizer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>

namespace mgc {

namespace {

runtime::CheckpointInfo infoOf(const Session::Impl &impl) {
  runtime::CheckpointInfo info;
  info.step = session::stepCount(impl);
  info.optimizer = impl.optimizer;
  info.seed = impl.seed;
  info.sourceHash = impl.modelHash;
  return info;
}

// Every rank writes the parts its devices hold; when all have, rank 0
// writes the index, and every rank learns how it went. A message between
// the ranks is "ok" and the rank's shard entry, or "error" and why.
Status saveSharded(const Session::Impl &impl, const std::string &path) {
  backend::ProcessGroup &ranks = *impl.processes;
  int rank = ranks.rank(), size = ranks.size();
  runtime::CheckpointInfo info = infoOf(impl);
  std::map<std::string, ir::TensorType> types =
      impl.meshRunner->persistentTypes();
  DiagnosticCollector c;
  if (failed(impl.meshRunner->syncState(c.diag())))
    return c.status();
  std::vector<runtime::TensorSlab> slabs = impl.meshRunner->localSlabs();
  std::string file = runtime::shardPath(path, rank, size, info.step);
  std::string mine;
  auto digest = runtime::saveShard(file, slabs, types, info);
  if (!digest) {
    mine = "error\n" + llvm::toString(digest.takeError());
  } else {
    runtime::ShardEntry entry;
    entry.file = llvm::sys::path::filename(file).str();
    entry.step = info.step;
    entry.digest = *digest;
    for (const runtime::TensorSlab &s : slabs)
      entry.slabs.push_back({s.name,
                             runtime::slabKey(s, types.at(s.name).shape),
                             entry.file, s.offsets});
    mine = "ok\n" + runtime::shardEntryToJson(entry);
  }
  std::vector<std::string> all;
  std::string error;
  if (failed(ranks.allGather(mine, all, error)))
    return Status::error("error: saving checkpoint '" + path + "': " + error);
  std::vector<runtime::ShardEntry> entries;
  for (int r = 0; r < size; ++r) {
    llvm::StringRef text(all[r]);
    auto [status, body] = text.split('\n');
    if (status != "ok")
      return Status::error("error: saving checkpoint '" + path + "': rank " +
                           std::to_string(r) + ": " + body.str());
    auto entry = runtime::shardEntryFromJson(body);
    if (!entry)
      return Status::error("error: saving checkpoint '" + path + "': rank " +
                           std::to_string(r) + ": " +
                           llvm::toString(entry.takeError()));
    entries.push_back(std::move(*entry));
  }
  std::string indexError;
  if (rank == 0)
    if (llvm::Error err = runtime::saveShardIndex(path, types, entries, info))
      indexError = llvm::toString(std::move(err));
  if (failed(ranks.allGather(indexError, all, error)))
    return Status::error("error: saving checkpoint '" + path + "': " + error);
  if (!all[0].empty())
    return Status::error("error: " + all[0]);
  // The index names this save's shards: the earlier saves' are garbage.
  std::vector<std::string> keep;
  for (const runtime::ShardEntry &e : entries)
    keep.push_back(e.file);
  runtime::removeOtherShards(path, keep);
  return Status::ok();
}

llvm::Expected<runtime::Checkpoint> readCheckpoint(const std::string &path) {
  return runtime::isShardIndex(path) ? runtime::loadShardedCheckpoint(path)
                                     : runtime::loadCheckpoint(path);
}

// Replaces the session's persistent tensors named in `tensors` (all checked
// against the model), keeping the others.
Status replacePersistent(Session::Impl &impl,
                         const runtime::TensorMap &tensors) {
  DiagnosticCollector sync(&impl);
  if (failed(session::syncHost(impl, sync.diag())))
    return sync.status();
  for (const auto &[name, t] : tensors)
    impl.persistent.insert_or_assign(name, t);
  session::hostChanged(impl);
  return Status::ok();
}

// The model's parameters that `tensors` has no tensor for, in declaration
// order: an error for a checkpoint to resume, new ones for initFrom.
std::vector<std::string> paramsMissing(const Session::Impl &impl,
                                       const runtime::TensorMap &tensors) {
  std::vector<std::string> missing;
  for (const auto &arg : impl.main->graph().arguments())
    if (arg->kind() == ir::ValueKind::Param && !tensors.count(arg->name()))
      missing.push_back(arg->name());
  return missing;
}

// Up to six of `names`, then how many more.
std::string someOf(const std::vector<std::string> &names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 6; ++i)
    out += (i ? ", " : "") + names[i];
  if (names.size() > 6)
    out += ", and " + std::to_string(names.size() - 6) + " more";
  return out;
}

// What keeps `tensors` from being the model's parameters and state: the
// parameters they lack, the tensors the model does not have and those of
// another type, each named, parameters before optimizer state; empty when
// they fit.
std::string stateMismatch(const Session::Impl &impl,
                          const runtime::TensorMap &tensors) {
  std::vector<std::string> missing, extra, retyped;
  for (const std::string &name : paramsMissing(impl, tensors))
    missing.push_back("'" + name + "'");
  for (bool state : {false, true})
    for (const auto &[name, t] : tensors) {
      if (llvm::StringRef(name).startswith(passes::kOptimizerStatePrefix) !=
          state)
        continue;
      const ir::Value *v = impl.main->graph().findArgument(name);
      if (!v || !v->isPersistent())
        extra.push_back("'" + name + "'");
      else if (t.type() != v->type())
        retyped.push_back("'" + name + "' (" + t.type().str() +
                          " in the checkpoint, " + v->type().str() +
                          " in the model)");
    }
  std::string out;
  auto add = [&](const char *what, const std::vector<std::string> &names) {
    if (!names.empty())
      out += (out.empty() ? "" : "; ") + std::string(what) + someOf(names);
  };
  add("the model's parameters it lacks: ", missing);
  add("tensors the model does not have: ", extra);
  add("tensors of another type: ", retyped);
  return out;
}

} // namespace

Status Session::saveCheckpoint(const std::string &path) const {
  return session::guarded("saving the checkpoint", [&]() -> Status {
    if (impl_->processes && impl_->meshRunner)
      return saveSharded(*impl_, path);
    DiagnosticCollector sync(impl_.get());
    if (failed(session::syncHost(*impl_, sync.diag())))
      return sync.status();
    runtime::Checkpoint c;
    c.info = infoOf(*impl_);
    for (const auto &[name, t] : impl_->persistent)
      c.tensors.emplace(name, t);
    if (llvm::Error err = runtime::saveCheckpoint(path, c))
      return Status::error("error: " + llvm::toString(std::move(err)));
    return Status::ok();
  });
}

Status Session::loadCheckpoint(const std::string &path) {
  return session::guarded("loading the checkpoint", [&]() -> Status {
    auto loaded = readCheckpoint(path);
    if (!loaded)
      return Status::error("error: " + llvm::toString(loaded.takeError()));
    // fp16's loss scale means nothing in another precision: a checkpoint
    // of an fp16 run resumes in fp32 or bf16 without it.
    for (auto it = loaded->tensors.begin(); it != loaded->tensors.end();)
      if (passes::isLossScaleState(it->first) &&
          !impl_->main->graph().findArgument(it->first))
        it = loaded->tensors.erase(it);
      else
        ++it;
    const runtime::Checkpoint &c = *loaded;
    auto refuse = [&](const std::string &why) {
      return Status::error("error: cannot load checkpoint '" + path +
                           "': " + why);
    };
    if (!c.info.optimizer.empty() && !impl_->optimizer.empty() &&
        c.info.optimizer != impl_->optimizer)
      return refuse("it was saved with optimizer " + c.info.optimizer +
                    ", this session uses " + impl_->optimizer);
    // Matched by its tensors, as torch's load_state_dict does: a model
    // whose source changed but whose parameters and state did not (another
    // batch size, say) resumes; one whose tensors differ is refused with
    // every difference named.
    if (std::string mismatch = stateMismatch(*impl_, c.tensors);
        !mismatch.empty()) {
      bool otherModel =
          !c.info.sourceHash.empty() && c.info.sourceHash != impl_->modelHash;
      return refuse((otherModel
                         ? "it was saved from another model (model hash " +
                               c.info.sourceHash.substr(0, 12) +
                               "..., this model " +
                               impl_->modelHash.substr(0, 12) + "...): "
                         : std::string()) +
                    mismatch +
                    ". To start a new run from the parameters the two share, "
                    "initialise from it instead (mgc run --init-from, "
                    "Session::initFrom)");
    }
    // The step counter is a whole number of steps, the one the metadata
    // names (a NaN would become step -2^63).
    if (auto it = c.tensors.find(passes::kStepStateName);
        it != c.tensors.end() && it->second.numel() == 1) {
      double v = it->second.get(0);
      if (!std::isfinite(v) || v < 0 || v != std::floor(v) || v > 9.0e15)
        return refuse(std::string("its step counter '") +
                      passes::kStepStateName + "' holds " +
                      llvm::formatv("{0}", llvm::format("%g", v)).str() +
                      ", not a whole number of steps >= 0");
      if (!c.info.sourceHash.empty() && static_cast<int64_t>(v) != c.info.step)
        return refuse(
            std::string("its step counter '") + passes::kStepStateName +
            "' holds " + std::to_string(static_cast<int64_t>(v)) +
            " but its metadata says step " + std::to_string(c.info.step));
    }
    // Optimizer state missing from the file (weights only) keeps its value.
    if (Status st = replacePersistent(*impl_, c.tensors); !st)
      return st;
    // The run's seed travels with its checkpoints.
    if (!c.info.sourceHash.empty())
      impl_->seed = c.info.seed;
    return Status::ok();
  });
}

Result<InitFromReport> Session::initFrom(const std::string &path) {
  using R = Result<InitFromReport>;
  return session::guarded("initialising from the checkpoint", [&]() -> R {
    InitFromReport report;
    runtime::TensorMap tensors;
    bool foreign = false;
    if (runtime::isHfCheckpoint(path) &&
        (!impl_->hfMap.empty() || llvm::sys::fs::is_directory(path))) {
      auto read = session::readHuggingFace(*impl_, path, report);
      if (!read)
        return read.status();
      tensors = std::move(*read);
    } else {
      auto loaded = readCheckpoint(path);
      if (!loaded)
        return Status::error("error: " + llvm::toString(loaded.takeError()));
      tensors = std::move(loaded->tensors);
      foreign = !loaded->info.foreignFormat.empty();
    }
    runtime::TensorMap taken;
    for (auto &[name, t] : tensors) {
      const ir::Value *v =
          session::findArgument(*impl_, name, ir::ValueKind::Param);
      if (!v) {
        bool state =
            llvm::StringRef(name).startswith(passes::kOptimizerStatePrefix);
        (state ? report.skipped : report.unused).push_back(name);
        continue;
      }
      if (t.type() != v->type()) {
        DiagnosticCollector c(impl_.get());
        c.diag().error(v->loc(), "cannot initialise parameter '" + name +
                                     "' from '" + path + "': it is " +
                                     t.type().str() + " there but " +
                                     v->type().str() + " in the model");
        return c.status();
      }
      report.loaded.push_back(name);
      taken.emplace(name, std::move(t));
    }
    report.fresh = paramsMissing(*impl_, taken);
    if (report.loaded.empty())
      return Status::error(
          "error: cannot initialise from '" + path + "': none of its " +
          std::to_string(tensors.size()) +
          " tensors is a parameter of the model (parameters are matched by "
          "their full name, as 'mgc run --save' writes them" +
          (foreign ? std::string("; a Hugging Face checkpoint is read through "
                                 "a name map: --hf-map, or MODEL.hf.json "
                                 "beside the model file)")
                   : std::string(")")));
    if (Status st = replacePersistent(*impl_, taken); !st)
      return st;
    std::sort(report.fresh.begin(), report.fresh.end());
    return report;
  });
}

} // namespace mgc
