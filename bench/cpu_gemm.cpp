// GFLOP/s of mgc's matmul on the CPU backend (one matmul op run by the
// executor: fixed tiles, single-threaded OpenBLAS per tile, deterministic
// for any thread count), in f32 and in bf16 (AVX512_BF16 where the
// processor has it), against OpenBLAS's own sgemm with all its threads
// (not deterministic across thread counts), at the shapes of the GPT-2 124M
// step (B=4, T=64) and of the MLP (B=64), and a square 2048^3:
//   cpu_gemm [--threads N] [--seconds S]
#include "backend/Executable.h"
#include "backend/cpu/CpuExecutor.h"
#include "backend/cpu/GemmBF16.h"
#include "ir/Builder.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cblas.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

using namespace mgc;

namespace {

struct Shape {
  const char *what;
  int64_t m, k, n;
};

// Seconds per call of `run`, repeated for about `seconds` after a warm-up.
double timePerCall(const std::function<void()> &run, double seconds) {
  run();
  int64_t calls = 0;
  auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds || calls < 3) {
    run();
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count();
  }
  return elapsed / static_cast<double>(calls);
}

// Seconds per run of one matmul op of `dtype` through the executor; the
// arguments (f32) are left in `args`. Negative on error.
double timeMgc(const Shape &s, ir::DType dtype, unsigned threads,
               double seconds, backend::cpu::NamedTensors &args) {
  auto module = std::make_unique<ir::Module>("gemm");
  ir::Graph &g = module->graph();
  ir::Value *a = g.addInput("a", ir::TensorType(dtype, {s.m, s.k}));
  ir::Value *b = g.addInput("b", ir::TensorType(dtype, {s.k, s.n}));
  ir::Builder builder(g);
  ir::ValueOrError c = builder.create(ir::OpKind::Matmul, {a, b});
  if (!c.ok())
    return -1;
  g.addOutput("c", c.value);
  DiagnosticEngine diag;
  auto exe =
      backend::buildExecutable(std::move(module), backend::cpu::scratchBytes);
  backend::cpu::CpuOptions options;
  options.threads = threads;
  auto ex = backend::cpu::CpuExecutor::create(*exe, options, diag);
  if (!ex)
    return -1;
  args.clear();
  for (const auto &arg : exe->module->graph().arguments()) {
    runtime::Tensor t(arg->type());
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, static_cast<double>((i * 37 % 101) - 50) / 50.0);
    args.emplace(arg->name(), std::move(t));
  }
  return timePerCall([&] { (void)ex->run(args, diag); }, seconds);
}

int benchOne(const Shape &s, unsigned threads, double seconds) {
  backend::cpu::NamedTensors args;
  double bf16Seconds = timeMgc(s, ir::DType::BF16, threads, seconds, args);
  double mgcSeconds = timeMgc(s, ir::DType::F32, threads, seconds, args);
  if (bf16Seconds < 0 || mgcSeconds < 0)
    return 1;
  double flop = 2.0 * static_cast<double>(s.m * s.k * s.n);

  std::vector<float> out(static_cast<size_t>(s.m * s.n));
  const float *pa = args.at("a").as<float>(), *pb = args.at("b").as<float>();
  openblas_set_num_threads(static_cast<int>(threads));
  double blasSeconds = timePerCall(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.m),
                    int(s.n), int(s.k), 1.0f, pa, int(s.k), pb, int(s.n), 0.0f,
                    out.data(), int(s.n));
      },
      seconds);
  openblas_set_num_threads(1); // as the executor keeps it
  llvm::outs() << llvm::format(
      "%-14s [%lld x %lld] @ [%lld x %lld]: mgc f32 %6.1f, OpenBLAS threaded "
      "f32 %6.1f (mgc / OpenBLAS %.2f), mgc bf16 %6.1f GFLOP/s\n",
      s.what, static_cast<long long>(s.m), static_cast<long long>(s.k),
      static_cast<long long>(s.k), static_cast<long long>(s.n),
      flop / mgcSeconds / 1e9, flop / blasSeconds / 1e9,
      blasSeconds / mgcSeconds, flop / bf16Seconds / 1e9);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atof(argv[i + 1]);
  }
  llvm::outs() << "threads: " << threads << " (output includes the executor's "
               << "copy of the result); bf16 products by "
               << (backend::cpu::bf16DotInstructions()
                       ? "the AVX512_BF16 instruction"
                       : "the emulation of AVX512_BF16")
               << "\n";
  const Shape shapes[] = {
      {"gpt qkv", 256, 768, 2304},      {"gpt attn proj", 256, 768, 768},
      {"gpt mlp fc", 256, 768, 3072},   {"gpt mlp proj", 256, 3072, 768},
      {"gpt head", 256, 768, 50304},    {"gpt dW fc", 768, 256, 3072},
      {"mlp layer 1", 64, 784, 1024},   {"mlp layer 2", 64, 1024, 1024},
      {"square", 2048, 2048, 2048},
  };
  int rc = 0;
  for (const Shape &s : shapes)
    rc |= benchOne(s, threads, seconds);
  return rc;
}
