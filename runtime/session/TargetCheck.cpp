#include "runtime/session/TargetCheck.h"

#include "ir/TargetModule.h"

#if MGC_HAVE_CUDA
#include "backend/cuda/CudaKernels.h"
#endif

namespace mgc::session {

LogicalResult checkRunsOnTarget(const backend::Executable &exe,
                                DiagnosticEngine &diag) {
  const ir::TargetLimits &target = ir::targetOf(*exe.module);
  std::vector<const ir::Op *> ops;
  for (const auto &op : exe.module->graph().ops())
    ops.push_back(op.get());
  unsigned before = diag.errorCount();
  for (uint32_t i : exe.order) {
    const ir::Op &op = *ops[i];
    std::string why;
#if MGC_HAVE_CUDA
    if (&target == &ir::kCudaTarget)
      why = backend::cuda::cudaUnsupported(op);
    else
#endif
      why = ir::exceedsTarget(op, target);
    if (!why.empty())
      diag.error(op.loc(), why);
  }
  return diag.errorCount() == before ? success() : failure();
}

std::vector<const backend::Executable *> allExecutables(const MeshStep &step) {
  std::vector<const backend::Executable *> out;
  auto add = [&](const MeshPart &part) {
    for (const auto &exe : part.executables)
      out.push_back(exe.get());
  };
  add(step.step);
  add(step.micro);
  if (const PipelinePart *pipe = step.pipeline.get()) {
    for (const auto &split : pipe->executables)
      for (const auto &stage : split)
        for (const auto &exe : stage)
          out.push_back(exe.get());
    for (const MeshPart &part : pipe->applyGather)
      add(part);
    for (const MeshPart &part : pipe->applyUpdate)
      add(part);
  }
  return out;
}

LogicalResult checkMeshStepRunsOnTarget(const MeshStep &step,
                                        DiagnosticEngine &diag) {
  bool refused = false;
  for (const backend::Executable *exe : allExecutables(step))
    refused |= failed(checkRunsOnTarget(*exe, diag));
  return refused ? failure() : success();
}

} // namespace mgc::session
