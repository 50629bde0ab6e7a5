#include "tools/mgc/Options.h"

#include "support/Suggest.h"

#include <cmath>
#include <algorithm>

namespace mgc::cli {

const std::string &ParsedArgs::get(llvm::StringRef name) const {
  static const std::string kAbsent;
  auto it = values_.find(name.str());
  if (it == values_.end() || it->second.empty())
    return kAbsent;
  return it->second.back();
}

std::string ParsedArgs::get(llvm::StringRef name,
                            llvm::StringRef fallback) const {
  return has(name) ? get(name) : fallback.str();
}

std::vector<std::string> ParsedArgs::getList(llvm::StringRef name,
                                             char separator) const {
  std::string value = get(name);
  llvm::SmallVector<llvm::StringRef, 16> parts;
  llvm::StringRef(value).split(parts, separator);
  std::vector<std::string> out;
  for (llvm::StringRef part : parts)
    out.push_back(part.trim().str());
  return out;
}

std::string ParsedArgs::getIntList(llvm::StringRef name, int64_t min,
                                   int64_t max, llvm::StringRef what,
                                   std::vector<int64_t> &out) const {
  out.clear();
  for (const std::string &piece : getList(name)) {
    int64_t v = 0;
    if (!parseInt(piece, min, v) || v > max)
      return name.str() + " expects " + what.str() +
             " separated by commas, got '" + piece + "'";
    out.push_back(v);
  }
  return "";
}

std::vector<std::string> ParsedArgs::getAll(llvm::StringRef name) const {
  auto it = values_.find(name.str());
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

static const OptionSpec *findOption(const CommandSpec &spec,
                                    llvm::StringRef name) {
  for (const OptionSpec &o : spec.options)
    if (o.name == name)
      return &o;
  return nullptr;
}

static std::string joinChoices(const std::vector<std::string> &choices) {
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i)
    s += (i ? ", " : "") + choices[i];
  return s;
}

std::optional<ParsedArgs> parseArgs(const CommandSpec &spec,
                                    llvm::ArrayRef<std::string> args,
                                    std::string &error) {
  ParsedArgs out;
  bool onlyPositionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (onlyPositionals || arg == "-" || !arg.startswith("-")) {
      out.positionals.push_back(arg.str());
      continue;
    }
    if (arg == "--") {
      onlyPositionals = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      out.helpRequested = true;
      continue;
    }
    // Split the forms --name=value, -Dvalue, -ovalue.
    std::string name = arg.str(), value;
    bool hasInlineValue = false;
    if (arg.startswith("--")) {
      auto eq = arg.find('=');
      if (eq != llvm::StringRef::npos) {
        name = arg.substr(0, eq).str();
        value = arg.substr(eq + 1).str();
        hasInlineValue = true;
      }
    } else if (arg.size() > 2) {
      name = arg.substr(0, 2).str();
      value = arg.substr(2).str();
      hasInlineValue = true;
    }
    const OptionSpec *opt = findOption(spec, name);
    if (!opt) {
      std::vector<std::string> known{"--help"};
      for (const OptionSpec &o : spec.options)
        known.push_back(o.name);
      error = "unknown option '" + name + "' for 'mgc " + spec.name + "'" +
              didYouMean(name, known) + " (see 'mgc " + spec.name + " --help')";
      return std::nullopt;
    }
    if (opt->metavar.empty()) {
      if (hasInlineValue) {
        error = "option '" + name + "' takes no value";
        return std::nullopt;
      }
      out.add(name, "");
      continue;
    }
    if (!hasInlineValue) {
      if (i + 1 >= args.size()) {
        error = "option '" + name + "' needs a value (" + opt->metavar + ")";
        return std::nullopt;
      }
      value = args[++i];
    }
    if (value.empty() && !opt->mayBeEmpty) {
      error = "option '" + name + "' needs a value (" + opt->metavar +
              "), got an empty one";
      return std::nullopt;
    }
    if (!opt->choices.empty() &&
        std::find(opt->choices.begin(), opt->choices.end(), value) ==
            opt->choices.end()) {
      error = "invalid value '" + value + "' for option '" + name +
              "'; expected one of: " + joinChoices(opt->choices);
      return std::nullopt;
    }
    if (!opt->repeatable && out.has(name)) {
      error = "option '" + name + "' given more than once";
      return std::nullopt;
    }
    out.add(name, value);
  }
  if (out.helpRequested)
    return out;
  if (out.positionals.size() < spec.minPositionals) {
    error = "'mgc " + spec.name + "' needs " + spec.positionalName +
            " (see 'mgc " + spec.name + " --help')";
    return std::nullopt;
  }
  if (out.positionals.size() > spec.maxPositionals) {
    error = "unexpected argument '" + out.positionals[spec.maxPositionals] +
            "' for 'mgc " + spec.name + "'";
    return std::nullopt;
  }
  return out;
}

std::string formatHelp(const CommandSpec &spec) {
  std::string s = "usage: " + spec.usage + "\n\n" + spec.summary + "\n";
  if (!spec.options.empty()) {
    s += "\noptions:\n";
    std::vector<std::string> left;
    size_t width = 0;
    for (const OptionSpec &o : spec.options) {
      std::string l = "  " + o.name;
      if (!o.metavar.empty())
        l += (o.name.rfind("--", 0) == 0 ? "=" : " ") + o.metavar;
      width = std::max(width, l.size());
      left.push_back(l);
    }
    for (size_t i = 0; i < spec.options.size(); ++i) {
      const OptionSpec &o = spec.options[i];
      s += left[i] + std::string(width - left[i].size() + 2, ' ') + o.help;
      if (!o.choices.empty())
        s += " (" + joinChoices(o.choices) + ")";
      if (o.repeatable)
        s += " [repeatable]";
      s += "\n";
    }
    std::string help = "  -h, --help";
    s += help +
         std::string(width > help.size() ? width - help.size() + 2 : 2, ' ') +
         "show this help\n";
  }
  if (!spec.details.empty())
    s += "\n" + spec.details;
  return s;
}

bool splitBinding(const std::string &s, std::string &name,
                  std::string &value) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0)
    return false;
  name = s.substr(0, eq);
  value = s.substr(eq + 1);
  return true;
}

std::vector<OptionSpec> modelSizeOptions() {
  return {
      {"-D", "NAME=VALUE", "override the constant NAME of the model file",
       true},
      {"--batch-size", "N",
       "the batch size: sets the constant that the first input's leading "
       "dimension is written with (B in the samples); in training, the "
       "samples of a whole step over all devices and micro-batches"},
  };
}

std::string parseModelSizes(const ParsedArgs &args,
                            std::map<std::string, std::string> &defines,
                            int64_t &batchSize) {
  for (const std::string &define : args.getAll("-D")) {
    std::string name, value;
    if (!splitBinding(define, name, value))
      return "-D expects NAME=VALUE, got '" + define + "'";
    defines[name] = value;
  }
  batchSize = 0;
  if (args.has("--batch-size") &&
      !parseInt(args.get("--batch-size"), 1, batchSize))
    return "--batch-size expects a positive integer, got '" +
           args.get("--batch-size") + "'";
  return "";
}

bool parseInt(const std::string &s, int64_t min, int64_t &out) {
  long long v;
  if (llvm::StringRef(s).getAsInteger(10, v) || v < min)
    return false;
  out = v;
  return true;
}

std::string parseThreads(const ParsedArgs &args, int &threads) {
  int64_t n = 0;
  if (args.has("--threads") &&
      (!parseInt(args.get("--threads"), 0, n) || n > 1024))
    return "--threads expects an integer in [0, 1024], got '" +
           args.get("--threads") + "'";
  threads = static_cast<int>(n);
  return "";
}

bool parseNumber(const std::string &s, double &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end && *end == '\0' && std::isfinite(out);
}

} // namespace mgc::cli
