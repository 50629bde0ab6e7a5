// The command line of `mgc run` beside runSpec() (tools/mgc/Commands.h):
// the flags that override the model file's train section.
#pragma once

#include "llvm/ADT/ArrayRef.h"

namespace mgc::cli {

// A flag that overrides the model file's train section: flag -> key.
struct TrainFlag {
  const char *flag, *key, *metavar, *help;
};
llvm::ArrayRef<TrainFlag> trainFlags();

} // namespace mgc::cli
