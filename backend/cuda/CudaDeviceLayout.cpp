#include "backend/cuda/CudaDeviceLayout.h"

#include "backend/MemoryPlan.h"
#include "backend/cuda/CudaGroupLaunch.h"
#include "backend/cuda/CudaKernels.h"
#include "backend/cuda/Launch.h"

#include <algorithm>

namespace mgc::backend::cuda {

Layout layoutOf(const Executable &exe, const CudaOptions &options,
                const LaunchPlan &plan) {
  Layout l;
  l.error = 0;
  l.arena = alignUp(sizeof(DeviceError));
  uint64_t at = l.arena + alignUp(plan.peak);
  l.arguments = at;
  l.twoInputSets = options.graph;
  for (const auto &arg : exe.module->graph().arguments()) {
    l.argumentOffsets[0].push_back(at);
    // Another executor's buffer holds it (CudaOptions::stateOf).
    if (options.stateOf && arg->isPersistent())
      continue;
    at += alignUp(typeBytes(arg->type()));
    if (arg->kind() == ir::ValueKind::Input)
      l.inputBytes += alignUp(typeBytes(arg->type()));
  }
  l.argumentOffsets[1] = l.argumentOffsets[0];
  if (l.twoInputSets) {
    const auto &args = exe.module->graph().arguments();
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i]->kind() == ir::ValueKind::Input) {
        l.argumentOffsets[1][i] = at;
        at += alignUp(typeBytes(args[i]->type()));
      }
  }
  l.scratch = at;
  // The communication ops run beside the compute stream's: their own area.
  uint64_t scratch = 0, commScratch = 0;
  for (const auto &op : exe.module->graph().ops()) {
    uint64_t &area = op->info().has(ir::kCollective) ? commScratch : scratch;
    area = std::max(area, cudaScratchBytes(*op));
  }
  l.commScratch = l.scratch + alignUp(scratch);
  l.workspace = l.commScratch + alignUp(commScratch);
  l.descriptors = l.workspace + alignUp(options.workspaceBytes);
  l.descriptorsPerSet = plan.groupedOps();
  l.total =
      l.descriptors + alignUp((l.twoInputSets ? 2 : 1) * l.descriptorsPerSet *
                              sizeof(FusedGroupTensor));
  return l;
}

} // namespace mgc::backend::cuda
