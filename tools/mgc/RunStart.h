// Where `mgc run` starts: a checkpoint it continues (--resume), or the
// weights of another run it fine-tunes from (--init-from), whose report says
// what was loaded, what is new and what went unused.
#pragma once

#include "mgc/Session.h"
#include "tools/mgc/Options.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mgc::cli {

// Loads `resume` (a checkpoint to continue) or `initFrom` (weights to start
// from), whichever is not empty, into `s`; prints the --init-from report to
// `out` when `out` is given.
Status loadStartingPoint(Session &s, const std::string &resume,
                         const std::string &initFrom, llvm::raw_ostream *out);

// Every parameter of the model from `path` (Session::initFrom: a
// checkpoint mgc saved or a Hugging Face one), for a command that uses a
// trained model as it is (eval, generate, export): a parameter the
// checkpoint lacks is an error.
Result<InitFromReport> loadEveryParameter(Session &s, const std::string &path);

// --hf-map FILE, the name map of Hugging Face checkpoints
// (SessionOptions::hfMap).
OptionSpec hfMapOption();

// The lines that report an --init-from of `path`.
std::string initFromSummary(const std::string &path,
                            const InitFromReport &report);

} // namespace mgc::cli
