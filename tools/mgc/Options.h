// A small declarative command-line parser for the mgc commands: each command
// lists its options once, and that list drives both parsing and --help.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgc::cli {

// Exit statuses shared by every command.
enum ExitCode : int { kSuccess = 0, kUserError = 1, kUsageError = 2 };

struct OptionSpec {
  std::string name;    // "--emit", "-D", "-o"
  std::string metavar; // "KIND"; empty for a flag without a value
  std::string help;
  bool repeatable = false;
  // Allowed values (empty: anything).
  std::vector<std::string> choices = {};
  // Whether the value may be empty (--passes=: no passes); otherwise an
  // empty value (--cluster '') is refused rather than taken as absent.
  bool mayBeEmpty = false;
};

struct CommandSpec {
  std::string name;     // "compile"
  std::string usage;    // "mgc compile MODEL.mg [options]"
  std::string summary;  // one line
  std::string details;  // paragraphs after the option list
  size_t minPositionals = 0;
  size_t maxPositionals = 0;
  std::string positionalName; // "MODEL.mg", for messages
  std::vector<OptionSpec> options;
};

class ParsedArgs {
public:
  std::vector<std::string> positionals;
  bool helpRequested = false;

  bool has(llvm::StringRef name) const { return values_.count(name.str()) > 0; }
  // The last value given for an option, "" when it is absent: a reference
  // into the parsed arguments, so a StringRef of it stays valid as long as
  // they do (a StringRef of a returned copy would dangle at once).
  const std::string &get(llvm::StringRef name) const;
  // The last value, or a copy of `fallback` when it is absent.
  std::string get(llvm::StringRef name, llvm::StringRef fallback) const;
  // Every value given for a repeatable option, in order.
  std::vector<std::string> getAll(llvm::StringRef name) const;
  // The last value of a list option split at `separator`, each piece
  // trimmed and owned (pieces of get()'s temporary string would dangle).
  std::vector<std::string> getList(llvm::StringRef name,
                                   char separator = ',') const;
  // The last value of a list option as integers in [min, max], one per
  // comma-separated piece. Returns the usage error ("NAME expects WHAT
  // separated by commas, got 'PIECE'"), empty when every piece is one.
  std::string getIntList(llvm::StringRef name, int64_t min, int64_t max,
                         llvm::StringRef what, std::vector<int64_t> &out) const;
  void add(const std::string &name, std::string value) {
    values_[name].push_back(std::move(value));
  }

private:
  std::map<std::string, std::vector<std::string>> values_;
};

// Parses `args` (without the program and command names). On a usage error
// returns nullopt and sets `error` to a message naming the flag.
std::optional<ParsedArgs> parseArgs(const CommandSpec &spec,
                                    llvm::ArrayRef<std::string> args,
                                    std::string &error);

std::string formatHelp(const CommandSpec &spec);

// Splits "NAME=VALUE" (-D, --data, --int-range) at its first '='; false
// when there is none or the name is empty.
bool splitBinding(const std::string &s, std::string &name, std::string &value);

// -D NAME=VALUE and --batch-size N: the model's sizes, options of every
// command that compiles a model file.
std::vector<OptionSpec> modelSizeOptions();
// Reads every -D NAME=VALUE into `defines` and --batch-size into
// `batchSize` (0 when absent); returns the usage error of a malformed one,
// empty when there is none.
std::string parseModelSizes(const ParsedArgs &args,
                            std::map<std::string, std::string> &defines,
                            int64_t &batchSize);

// A decimal integer >= min (counts, seeds, steps); false when `s` is not.
bool parseInt(const std::string &s, int64_t min, int64_t &out);
// Reads --threads (0: one per core) into `threads`; returns the usage
// error, empty when there is none or the flag is absent.
std::string parseThreads(const ParsedArgs &args, int &threads);

// A finite decimal number (rates, tolerances, temperatures); false when `s`
// is not.
bool parseNumber(const std::string &s, double &out);

} // namespace mgc::cli
