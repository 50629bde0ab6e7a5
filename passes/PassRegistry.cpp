#include "passes/PassManager.h"

namespace mgc::passes {

#define MGC_PASS(Name, Create, Summary) std::unique_ptr<Pass> Create();
#include "passes/Passes.def"

llvm::ArrayRef<PassInfo> registeredPasses() {
  static const std::vector<PassInfo> table = {
#define MGC_PASS(Name, Create, Summary) PassInfo{Name, Summary, &Create},
#include "passes/Passes.def"
  };
  return table;
}

} // namespace mgc::passes
