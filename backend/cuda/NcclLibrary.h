// NCCL, loaded when a mesh first asks for it (dlopen of libnccl.so.2, or
// the file MGC_NCCL_LIBRARY names): mgc links and runs without NCCL, and
// the NCCL of the machine that runs it is the one used (its driver and
// fabric plugins match), not one fixed at build time. The build needs
// nccl.h only, for the types; without it, load() says so.
#pragma once

#include <string>

#if __has_include(<nccl.h>)
#include <nccl.h>
#define MGC_HAVE_NCCL_H 1
#else
#define MGC_HAVE_NCCL_H 0
#endif

namespace mgc::backend::cuda {

#if MGC_HAVE_NCCL_H
// The entry points mgc calls, as the library exports them.
struct NcclLibrary {
  decltype(&::ncclGetVersion) getVersion = nullptr;
  decltype(&::ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&::ncclCommInitRank) commInitRank = nullptr;
  decltype(&::ncclCommInitAll) commInitAll = nullptr;
  decltype(&::ncclCommSplit) commSplit = nullptr;
  decltype(&::ncclCommDestroy) commDestroy = nullptr;
  decltype(&::ncclCommAbort) commAbort = nullptr;
  decltype(&::ncclGroupStart) groupStart = nullptr;
  decltype(&::ncclGroupEnd) groupEnd = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  decltype(&::ncclGetErrorString) getErrorString = nullptr;
  decltype(&::ncclGetLastError) getLastError = nullptr;
  // The library's version, as "2.28.9".
  std::string version;

  // "<call> failed: <NCCL's text> (<its last error>)".
  std::string failure(const char *call, ncclResult_t result,
                      ncclComm_t comm = nullptr) const;
};
#else
struct NcclLibrary {};
#endif

// The library, loaded on the first call; null with `error` set (naming
// what was tried) when it cannot be loaded or lacks an entry point.
const NcclLibrary *loadNccl(std::string &error);

} // namespace mgc::backend::cuda
