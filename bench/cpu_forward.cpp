// Times the forward pass of the sample models on the CPU backend and prints
// milliseconds per run and the arena peak:
//   cpu_forward [--threads N] [--runs N]
#include "backend/Executable.h"
#include "backend/cpu/CpuExecutor.h"
#include "frontend/Frontend.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace mgc;

namespace {

struct Case {
  const char *label;
  const char *file;
  frontend::ConstOverrides defines;
};

int benchOne(const Case &c, unsigned threads, int runs) {
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.defines = c.defines;
  std::string path = std::string(MGC_SOURCE_DIR) + "/samples/" + c.file;
  auto module = frontend::compileModelFile(path, options, diag);
  if (!module)
    return 1;
  auto exe =
      backend::buildExecutable(std::move(module), backend::cpu::scratchBytes);
  backend::cpu::CpuOptions opts;
  opts.threads = threads;
  auto ex = backend::cpu::CpuExecutor::create(*exe, opts, diag);
  if (!ex)
    return 1;
  // Arguments: parameters from their initialisers, inputs with valid ids.
  backend::cpu::NamedTensors args;
  for (const auto &arg : exe->module->graph().arguments()) {
    runtime::Tensor t(arg->type());
    if (arg->kind() == ir::ValueKind::Input) {
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set(i,
              ir::isInteger(t.dtype()) ? double(i % 7) : double(i % 13) / 13);
    } else {
      t = runtime::Tensor::fromHost(ir::initParameter(*arg, 1));
    }
    args[arg->name()] = std::move(t);
  }
  auto once = [&] { return ex->run(args, diag).succeeded(); };
  if (!once())
    return 1;
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < runs; ++r)
    if (!once())
      return 1;
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count() /
              runs;
  llvm::outs() << c.label << ": " << llvm::format("%.3f", ms)
               << " ms/forward, arena " << ex->arenaBytes() << " bytes, "
               << exe->module->graph().numOps() << " ops, " << ex->threads()
               << " threads\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  unsigned threads = 0;
  int runs = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--runs"))
      runs = std::max(1, std::atoi(argv[i + 1]));
  }
  Case cases[] = {
      {"mlp", "mlp.mg", {}},
      {"tiny gpt",
       "gpt.mg",
       {{"V", "64"},
        {"T", "8"},
        {"D", "16"},
        {"H", "2"},
        {"L", "2"},
        {"B", "2"}}},
      {"small gpt",
       "gpt.mg",
       {{"V", "256"},
        {"T", "64"},
        {"D", "128"},
        {"H", "4"},
        {"L", "4"},
        {"B", "8"}}},
  };
  int rc = 0;
  for (const Case &c : cases)
    rc |= benchOne(c, threads, runs);
  return rc;
}
