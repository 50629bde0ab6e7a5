#include "tools/mgc/RunStart.h"

#include <vector>

namespace mgc::cli {

namespace {

// "a, b, c" with at most `shown` names and a count of the rest, so that a
// model of a thousand new tensors still gets a short line.
std::string nameList(const std::vector<std::string> &names, size_t shown = 8) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < shown; ++i)
    text += (i ? ", " : "") + names[i];
  if (names.size() > shown)
    text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

} // namespace

std::string initFromSummary(const std::string &path,
                            const InitFromReport &report) {
  size_t parameters = report.loaded.size() + report.fresh.size();
  std::string text = "initialised from " + path + ": " +
                     std::to_string(report.loaded.size()) + " of " +
                     std::to_string(parameters) + " parameters loaded\n";
  if (!report.fresh.empty())
    text += "  new, kept as initialised: " + nameList(report.fresh) + "\n";
  if (!report.unused.empty())
    text +=
        "  unused, not parameters of this model: " + nameList(report.unused) +
        "\n";
  if (!report.skipped.empty())
    text += "  not taken: " + std::to_string(report.skipped.size()) +
            " tensors of optimizer state (training starts at step 0)\n";
  return text;
}

Status loadStartingPoint(Session &s, const std::string &resume,
                         const std::string &initFrom, llvm::raw_ostream *out) {
  if (!resume.empty())
    return s.loadCheckpoint(resume);
  if (initFrom.empty())
    return Status::ok();
  auto report = s.initFrom(initFrom);
  if (!report)
    return report.status();
  if (out)
    *out << initFromSummary(initFrom, *report);
  return Status::ok();
}

} // namespace mgc::cli
