// The pipeline pass: the micro-batch program of a training step (its
// forward and backward on one micro-batch, passes/Accumulation.h) cut into
// the programs of a pipeline's stages. Each stage runs its layers' part of
// the forward (F) and of the backward (B), or with a split backward (the
// zero-bubble schedule) the backward's input-gradient half (I, which the
// stage before waits for) and its weight-gradient half (W, which nothing
// waits for).
//
// Which stage runs an op: a layer is a `repeat` iteration, found by the
// op's scope (passes/CostModel.h); an unscoped op runs with the op before it
// in program order (the embedding, before every layer, on the first stage;
// the head, the loss and the start of the backward after the last layer,
// on the last stage; the embedding's backward, after the first layer's, on
// the first stage again). Which phase: F is everything the micro program's
// forward outputs (the loss, the logits) depend on, the rest is the
// backward; I is the part of the backward that another stage reads.
//
// An op whose operands are all parameters, constants or such ops (a
// transposed weight, a broadcast bias, a constant) is computed by every
// program that reads it instead of being passed between them. Every other
// value one program makes and another reads crosses between them: within
// a stage it is kept from one phase to the next; between stages the
// forward sends it on (an activation) and the backward sends it back (the
// gradient of one). A gradient summed from two stages (GPT's token
// embedding, read by the embedding on the first stage and by the tied head
// on the last) is not sent: each stage gives its part of the sum, and the
// runtime adds the parts once per micro-batch (Megatron-LM's embedding
// group).
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgc::passes {

// The phases of one stage's work on one micro-batch, in the order they run.
// Backward is the whole backward, or the input-gradient half (I) when the
// backward is split; Weight (W) exists only then.
enum class Phase : uint8_t { Forward, Backward, Weight };
// "F", "B", or with a split backward "I" for Backward; "W".
const char *phaseName(Phase phase, bool splitBackward);

// Prefix of the names of the values that cross between programs (inputs of
// the programs that read them, outputs of the one that makes them).
inline constexpr const char *kPipeValuePrefix = "pipe.";

struct PipeValue {
  std::string name; // "pipe.<index>"
  ir::TensorType type;
  int64_t stage = 0; // the stage that makes it
  Phase phase = Phase::Forward;
  // Every stage but its own that reads it, in order.
  std::vector<int64_t> readers;
};

struct PipelineSplit {
  int64_t stages = 0;
  bool splitBackward = false;
  // programs[s][p]: stage s's program of phase p. Its arguments are the
  // micro program's arguments it reads and the pipe values it reads; its
  // outputs the pipe values it makes that another program reads, and its
  // part of the micro program's outputs. A micro.sum.* output (a summed
  // gradient) may be given in parts by several stages' programs: the
  // output is their sum.
  std::vector<std::vector<std::unique_ptr<ir::Module>>> programs;
  // Every value that crosses between programs; values[i] is "pipe.<i>".
  std::vector<PipeValue> values;
  // Per boundary b (between stages b and b + 1): what the forward sends
  // across it (values made in F on stages <= b and read on a stage > b) and
  // what the backward sends back (values made in the backward on stages
  // > b and read on a stage <= b), as indices into `values`. A value read
  // two stages on is relayed by the stage between.
  std::vector<std::vector<size_t>> forwardAcross, backwardAcross;

  int numPhases() const { return splitBackward ? 3 : 2; }
};

// Cuts `micro` (a one-device micro-batch program) into `first.size()`
// stages, stage s holding layers [first[s], first[s + 1]) of the program's
// layer sequence (its repeat iterations, in order). Reports and fails on a
// split that is not one (each stage needs a layer), and, naming the op, on
// a program whose values would have to travel against the pipeline (a
// forward op reading a later stage's value, a backward op an earlier
// stage's backward).
FailureOr<PipelineSplit> splitPipeline(const ir::Module &micro,
                                       llvm::ArrayRef<int64_t> first,
                                       bool splitBackward,
                                       DiagnosticEngine &diag);

// A stage program's messages as the runtime passes them: each recv becomes
// an input and each send an output of its value's name (pipe.N), so that a
// backend compiles an ordinary program whose pipe values the pipeline runner
// posts in the schedule's groups. Programs without messages are unchanged.
void lowerPipeMessages(ir::Module &program);

// Checks that `first` splits `layers` layers into stages of at least one
// layer each, in order from layer 0; reports naming the model and fails.
LogicalResult checkStageSplit(llvm::ArrayRef<int64_t> first, int64_t layers,
                              llvm::StringRef model, DiagnosticEngine &diag);

// The stage of every op of `module` but the recomputed ones (see above):
// its layer's stage, or, unscoped, the stage of the op before it (the
// first stage before any layer). `first` must pass checkStageSplit on the
// module's layers.
llvm::DenseMap<const ir::Op *, int64_t>
stagesOfOps(const ir::Module &module, llvm::ArrayRef<int64_t> first);

// The ops of `module` that every program reading them computes for itself
// (see above): those without operands, or with only parameters, state and
// results of such ops as operands.
llvm::DenseSet<const ir::Op *> recomputedOps(const ir::Module &module);

} // namespace mgc::passes
