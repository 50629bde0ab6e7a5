// JSON from files a user gives (safetensors headers, checkpoint indexes,
// cluster descriptions). llvm::json::parse recurses once per level of
// nesting, so a file of 50,000 '[' overflows the stack; every such parse goes
// through here, which measures the nesting first and refuses it past a depth
// no real file of ours comes near.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace mgc {

inline constexpr unsigned kMaxJsonDepth = 64;

// Parses `text`; the error says where the nesting went past `maxDepth`, or
// what llvm::json found wrong.
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text,
                                            unsigned maxDepth = kMaxJsonDepth);

} // namespace mgc
