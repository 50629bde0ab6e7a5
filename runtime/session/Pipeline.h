// The standard way a model becomes executables: the training step (when the
// model has a loss) through kTrainingPipeline, and a forward-only program for
// inference through kForwardPipeline (in the same precision: mixed-precision
// does nothing unless train.precision is bf16). Used by the executor
// library (Session) and by `mgc compile --emit=exe`, so both make the same
// program from the same model.
#pragma once

#include "backend/Executable.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <map>
#include <memory>
#include <string>

namespace mgc::session {

// The pipelines that build a one-device program; `fuse` comes last, as it
// needs the final program (passes/Fusion.cpp).
inline constexpr const char *kTrainingPipeline =
    "mixed-precision,autodiff,optimizer,canonicalize,cse,dce,fuse";
inline constexpr const char *kForwardPipeline =
    "eval-mode,mixed-precision,accuracy,canonicalize,cse,dce,fuse";
// What runs on each device program of a mesh before it is scheduled.
inline constexpr const char *kDeviceProgramPipeline = "fuse";
// Module attribute that carries the model's identity into executables (a
// SHA-256, see modelHash), so checkpoints can be matched to their model.
inline constexpr const char *kModelHashAttr = "model.hash";

// Sets the module's `train.<key>` attributes from textual overrides
// ({"lr", "3e-4"}, {"optimizer", "sgd"}), converting each value to the type
// the optimizer pass reads (numbers, integers, words, booleans). Reports an
// unknown key or a malformed value naming the key, and fails.
LogicalResult
applyTrainOverrides(ir::Module &module,
                    const std::map<std::string, std::string> &train,
                    DiagnosticEngine &diag);

// When `train` changes the model file's optimizer ({"optimizer", "sgd"} on
// a file whose train section says adamw): removes the file's settings of
// its optimizer that the new one would refuse or read differently (betas,
// eps, momentum, weight decay; lr stays), as a flag replaces what the file
// says, and returns the note that names them ("" when nothing changed).
std::string
dropOtherOptimizerSettings(ir::Module &module,
                           const std::map<std::string, std::string> &train);

// Sets the module's train.precision from `precision` ("fp32" or "bf16"; an
// empty string keeps what the model file says). Reports any other word and
// fails. The precision is a training setting: it does not change the model
// hash, so a checkpoint trained in one precision resumes in the other.
LogicalResult applyPrecision(ir::Module &module, const std::string &precision,
                             DiagnosticEngine &diag);

// SHA-256 (hex) of the module's IR text without locations and without its
// train.* attributes: the same model (file, defines) gives the same hash
// whatever its comments, layout or training settings.
std::string modelHash(const ir::Module &module);

// The hash an executable's module carries (kModelHashAttr), or, for one
// built without it, the hash of its module text.
std::string executableModelHash(const ir::Module &module);

// A copy of a module (through its text form, locations kept).
std::unique_ptr<ir::Module> cloneModule(const ir::Module &module,
                                        DiagnosticEngine &diag);

// Runs the passes `pipeline` (a --passes list) on `module`, verifying after
// each.
LogicalResult runPipeline(ir::Module &module, const char *pipeline,
                          DiagnosticEngine &diag);

struct ModelExecutables {
  // Null when the model has no loss output.
  std::unique_ptr<backend::Executable> step;
  std::unique_ptr<backend::Executable> forward;
};

// Takes the frontend's module (train overrides already applied) and builds
// both executables for the CPU backend (only the forward program without
// `withStep`: a session on a mesh builds its step with MeshStep.h).
// Reports and fails on any error of the passes (bad training settings among
// them).
FailureOr<ModelExecutables>
buildModelExecutables(std::unique_ptr<ir::Module> module,
                      DiagnosticEngine &diag, bool withStep = true);

// The forward program of a training step: the step module without its
// updates and its optimizer outputs (lr, grad_norm, grad.*), pruned by dce.
// Lets a session loaded from a step executable serve forward().
std::unique_ptr<backend::Executable> forwardFromStep(const ir::Module &step,
                                                     DiagnosticEngine &diag);

} // namespace mgc::session
