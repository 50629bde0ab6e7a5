#include "backend/cuda/NcclLibrary.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <type_traits>

namespace mgc::backend::cuda {

#if MGC_HAVE_NCCL_H

std::string NcclLibrary::failure(const char *call, ncclResult_t result,
                                 ncclComm_t comm) const {
  std::string text = std::string(call) + " failed: " + getErrorString(result);
  const char *last = getLastError ? getLastError(comm) : nullptr;
  if (last && *last)
    text += std::string(" (") + last + ")";
  return text;
}

namespace {

// Loads the library and its entry points; "" on success, else why not.
std::string load(NcclLibrary &lib) {
  const char *chosen = std::getenv("MGC_NCCL_LIBRARY");
  std::string name = chosen && *chosen ? chosen : "libnccl.so.2";
  void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    return "cannot load NCCL (" + name + "): " + (why ? why : "unknown") +
           "; install NCCL 2.18 or later, or name the library in "
           "MGC_NCCL_LIBRARY";
  }
  std::string missing;
  auto bind = [&](auto &fn, const char *symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(handle, symbol));
    if (!fn)
      missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  bind(lib.getVersion, "ncclGetVersion");
  bind(lib.getUniqueId, "ncclGetUniqueId");
  bind(lib.commInitRank, "ncclCommInitRank");
  bind(lib.commInitAll, "ncclCommInitAll");
  bind(lib.commSplit, "ncclCommSplit");
  bind(lib.commDestroy, "ncclCommDestroy");
  bind(lib.commAbort, "ncclCommAbort");
  bind(lib.groupStart, "ncclGroupStart");
  bind(lib.groupEnd, "ncclGroupEnd");
  bind(lib.send, "ncclSend");
  bind(lib.recv, "ncclRecv");
  bind(lib.getErrorString, "ncclGetErrorString");
  bind(lib.getLastError, "ncclGetLastError");
  if (!missing.empty())
    return name + " lacks " + missing +
           " (ncclCommSplit needs NCCL 2.18 or later)";
  int code = 0;
  if (lib.getVersion(&code) != ncclSuccess)
    return name + ": ncclGetVersion failed";
  // NCCL_VERSION_CODE: X*1000 + Y*100 + Z before 2.9, X*10000 + Y*100 + Z
  // from 2.9 on.
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  lib.version = std::to_string(major) + "." + std::to_string(minor) + "." +
                std::to_string(code % 100);
  return "";
}

} // namespace

const NcclLibrary *loadNccl(std::string &error) {
  static NcclLibrary lib;
  static std::string why;
  static std::once_flag once;
  std::call_once(once, [] { why = load(lib); });
  if (!why.empty()) {
    error = why;
    return nullptr;
  }
  return &lib;
}

#else

const NcclLibrary *loadNccl(std::string &error) {
  error = "this build of mgc has no NCCL support (nccl.h was not found when "
          "it was built)";
  return nullptr;
}

#endif

} // namespace mgc::backend::cuda
