// Every op of the samples' training steps, on CUDA against the CPU, on the
// shapes and values the step gives it: the step compiled for the CUDA target
// runs once on the CPU with every op result an output; then each op runs
// alone on both backends from the CPU's values of its operands, and the
// first op (in program order) whose results differ is named with its source
// line. Running each op from the same inputs keeps one kernel's rounding
// from being taken for the next one's error. Without a device the steps are
// still built and checked as CudaExecutor::create checks them.
#include "CudaTestSupport.h"
#include "SourcePath.h"

#if MGC_HAVE_CUDA
#include "backend/cuda/CudaKernels.h"
#include "frontend/Frontend.h"
#include "ir/Builder.h"
#include "ir/TargetModule.h"
#include "runtime/session/Pipeline.h"

#include <cmath>
#include <map>

namespace mgc::backend::testing {
namespace {

struct Sample {
  const char *file;
  frontend::ConstOverrides defines;
};

// Small shapes of every sample (the class labels and token ids of
// randomArguments are below 5: every vocabulary and class count here is
// larger).
const Sample kSamples[] = {
    {"mlp.mg", {{"B", "8"}, {"D", "12"}, {"H", "16"}}},
    {"deep_mlp.mg", {{"B", "8"}}},
    {"gpt.mg",
     {{"V", "32"},
      {"T", "8"},
      {"D", "16"},
      {"H", "2"},
      {"L", "2"},
      {"B", "2"}}},
    {"llama.mg",
     {{"V", "32"},
      {"T", "8"},
      {"D", "16"},
      {"H", "4"},
      {"Hkv", "2"},
      {"F", "32"},
      {"L", "2"},
      {"B", "2"}}},
    {"resnet.mg", {{"B", "2"}, {"W", "8"}, {"HW", "8"}}},
    {"digits_cnn.mg", {{"B", "4"}}},
};

// The training step of `s` for the CUDA target, every op result an output
// ("v<position>: <op>").
std::unique_ptr<ir::Module> stepWithEveryValue(const Sample &s) {
  auto m = cudaTrainingStep(s.file, s.defines);
  ir::Graph &g = m->graph();
  std::vector<ir::Op *> ops;
  for (const auto &op : g.ops())
    ops.push_back(op.get());
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]->type().size() > 0)
      g.addOutput("v" + std::to_string(i) + ": " + ops[i]->name().str(),
                  ops[i]->result());
  return m;
}

double largestOf(const runtime::Tensor &t) {
  double largest = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(t.get(i)))
      largest = std::max(largest, std::fabs(t.get(i)));
  return largest;
}

// The element of `got` furthest from `want` beyond tol * scale (or not
// finite where `want` is, or the other way round), or -1.
int64_t worstElement(const runtime::Tensor &got, const runtime::Tensor &want,
                     double scale, double tol) {
  int64_t worst = -1;
  double worstErr = tol * std::max(scale, 1e-30);
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.get(i), w = want.get(i);
    if (std::isfinite(w) != std::isfinite(g))
      return i;
    if (!std::isfinite(w))
      continue;
    if (std::fabs(g - w) > worstErr) {
      worstErr = std::fabs(g - w);
      worst = i;
    }
  }
  return worst;
}

TEST_CASE("cuda: every op of the samples' training steps equals the CPU's "
          "on the step's values") {
  std::vector<std::unique_ptr<ir::Module>> steps;
  for (const Sample &s : kSamples) {
    INFO(std::string(s.file));
    steps.push_back(stepWithEveryValue(s));
  }
  if (skipWithoutCuda())
    return;
  for (size_t k = 0; k < steps.size(); ++k) {
    const ir::Module &m = *steps[k];
    INFO(std::string(kSamples[k].file));
    ir::TensorMap args = randomArguments(m, 11, 5, -1, 1);
    cpu::RunResult step = runCpu(m, args);
    // The CPU's value of every argument and op result.
    std::map<const ir::Value *, ir::HostTensor> value;
    for (const auto &arg : m.graph().arguments())
      value[arg.get()] = args.at(arg->name());
    for (const ir::Output &o : m.graph().outputs())
      if (o.name[0] == 'v')
        value[o.value] = step.outputs.at(o.name).toHost();
    for (const ir::Output &o : m.graph().outputs()) {
      if (o.name[0] != 'v')
        continue;
      const ir::Op &op = *o.value->definingOp();
      // The op alone, its operands as inputs with the step's values.
      ir::Module one;
      ir::TensorMap inputs;
      std::vector<ir::Value *> operands;
      double scale = 0;
      for (size_t i = 0; i < op.operands().size(); ++i) {
        const ir::Value *v = op.operand(i);
        std::string name = "a" + std::to_string(i);
        operands.push_back(one.graph().addInput(name, v->type()));
        inputs[name] = value.at(v);
        scale =
            std::max(scale, largestOf(runtime::Tensor::fromHost(inputs[name])));
      }
      ir::ValueOrError r =
          ir::Builder(one.graph()).create(op.kind(), operands, op.attrs());
      REQUIRE(r.ok());
      one.graph().addOutput("y", r.value);
      cpu::RunResult want = runCpu(one, inputs), got = runCuda(one, inputs);
      const runtime::Tensor &w = want.outputs.at("y"), &g = got.outputs.at("y");
      // Errors relative to the largest value of the result or of the
      // operands: a sum that cancels to about 0 (a batch norm's mean
      // gradient) differs by its operands' rounding, not by its own size.
      scale = std::max(scale, largestOf(w));
      // f32 kernels add in other orders than the CPU's; bf16 rounds more.
      double tol = o.value->type().dtype == ir::DType::BF16 ? 3e-2 : 1e-3;
      int64_t worst = worstElement(g, w, scale, tol);
      if (worst >= 0) {
        FAIL_CHECK("the first op whose results differ: "
                   << o.name << " at line " << op.loc().line << ", element "
                   << worst << ": got " << g.get(worst) << ", want "
                   << w.get(worst) << " (scale " << scale << ")");
        break;
      }
    }
  }
}

} // namespace
} // namespace mgc::backend::testing
#endif
