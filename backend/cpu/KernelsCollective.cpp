// The communication ops on the CPU: placeholders until the multi-device
// runtime supplies a communicator.
#include "backend/cpu/Kernels.h"

namespace mgc::backend::cpu {

namespace {
LogicalResult needsCommunicator(const KernelArgs &args) {
  return args.fail(args.op.name().str() +
                   " needs a communicator (a multi-device run)");
}
} // namespace

LogicalResult kernelAllReduce(const KernelArgs &args) {
  return needsCommunicator(args);
}
LogicalResult kernelReduceScatter(const KernelArgs &args) {
  return needsCommunicator(args);
}
LogicalResult kernelAllGather(const KernelArgs &args) {
  return needsCommunicator(args);
}
LogicalResult kernelAllToAll(const KernelArgs &args) {
  return needsCommunicator(args);
}
LogicalResult kernelLocalSplit(const KernelArgs &args) {
  return needsCommunicator(args);
}

} // namespace mgc::backend::cpu
