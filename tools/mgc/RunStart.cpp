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

Result<InitFromReport> loadEveryParameter(Session &s, const std::string &path) {
  auto report = s.initFrom(path);
  if (!report)
    return report;
  if (!report->fresh.empty())
    return Status::error(
        "error: checkpoint '" + path + "' lacks the model's parameters " +
        nameList(report->fresh) + " (" + std::to_string(report->fresh.size()) +
        " missing): it was saved from another model");
  return report;
}

OptionSpec hfMapOption() {
  return {"--hf-map", "FILE",
          "the name map that reads Hugging Face checkpoints into the model "
          "(default: MODEL.hf.json beside MODEL.mg, where it exists)"};
}

std::string initFromSummary(const std::string &path,
                            const InitFromReport &report) {
  size_t parameters = report.loaded.size() + report.fresh.size();
  std::string text =
      "initialised from " + path + ": " + std::to_string(report.loaded.size()) +
      " of " + std::to_string(parameters) + " parameters loaded" +
      (report.hfMap.empty()
           ? std::string()
           : " (a Hugging Face checkpoint, through " + report.hfMap + ")") +
      "\n";
  for (const std::string &note : report.notes)
    text += "  " + note + "\n";
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
