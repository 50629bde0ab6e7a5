// The text form of the IR. print(parse(print(m))) == print(m) for every
// module; see docs/ir.md for the grammar.
#pragma once

#include "ir/Graph.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mgc::ir {

struct PrintOptions {
  // Append loc("file":line:col) to op, argument and output lines
  // (loc(unknown) where the location is not known, so that it reads back
  // as unknown rather than as the line of the .mgir file).
  bool locations = false;
};

void printModule(const Module &module, llvm::raw_ostream &os,
                 const PrintOptions &options = {});
std::string printModuleToString(const Module &module,
                                const PrintOptions &options = {});

} // namespace mgc::ir
