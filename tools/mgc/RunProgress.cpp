#include "tools/mgc/RunProgress.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <cmath>

namespace mgc::cli {

using Clock = std::chrono::steady_clock;

ProgressReporter::ProgressReporter(llvm::raw_ostream &os, bool terminal,
                                   int64_t logEvery, int64_t firstStep,
                                   int64_t totalSteps, std::string units,
                                   int64_t perStep)
    : os_(os), terminal_(terminal), logEvery_(std::max<int64_t>(1, logEvery)),
      firstStep_(firstStep), totalSteps_(totalSteps), units_(std::move(units)),
      perStep_(perStep), start_(Clock::now()), lastDraw_(start_) {}

std::string ProgressReporter::openJsonLog(const std::string &path) {
  std::error_code ec;
  json_ =
      std::make_unique<llvm::raw_fd_ostream>(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    json_.reset();
    return "cannot write the log '" + path + "': " + ec.message();
  }
  logPath_ = path;
  return "";
}

std::string ProgressReporter::formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  std::string out;
  llvm::raw_string_ostream os(out);
  if (s >= 3600)
    os << s / 3600 << ":"
       << llvm::format("%02d:%02d", int((s / 60) % 60), int(s % 60));
  else
    os << llvm::format("%02d:%02d", int(s / 60), int(s % 60));
  return os.str();
}

std::string ProgressReporter::formatRate(double v) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (!std::isfinite(v))
    os << "?";
  else if (v >= 1e6)
    os << llvm::format("%.1fM", v / 1e6);
  else if (v >= 1e3)
    os << llvm::format("%.1fk", v / 1e3);
  else
    os << llvm::format("%.1f", v);
  return os.str();
}

std::string ProgressReporter::statusLine(const StepRecord &r, bool bar) const {
  int64_t done = r.step - firstStep_;
  int64_t todo = totalSteps_ - firstStep_;
  double rate = elapsed_ > 0 ? done * perStep_ / elapsed_ : 0;
  double eta = done > 0 ? elapsed_ / done * (totalSteps_ - r.step) : NAN;
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "step " << r.step << "/" << totalSteps_ << " ";
  if (bar) {
    constexpr int kWidth = 20;
    int filled = todo > 0 ? static_cast<int>(kWidth * done / todo) : kWidth;
    os << "|" << std::string(filled, '#') << std::string(kWidth - filled, ' ')
       << "| ";
  }
  os << llvm::format("loss %.4f", r.loss);
  if (!bar) {
    if (auto lr = r.metrics.find("lr"); lr != r.metrics.end())
      os << llvm::format(" | lr %.3e", lr->second);
    auto g = r.metrics.find("grad_norm");
    if (g != r.metrics.end())
      os << llvm::format(" | grad_norm %.4f", g->second);
    if (auto scale = r.metrics.find("loss_scale"); scale != r.metrics.end()) {
      os << llvm::format(" | loss_scale %g", scale->second);
      if (g != r.metrics.end() && !std::isfinite(g->second))
        os << " (overflow: step skipped)";
    }
  }
  os << " | " << formatRate(rate) << " " << units_ << "/s | "
     << formatDuration(elapsed_) << "<" << formatDuration(eta);
  return os.str();
}

namespace {

// A number as JSON: null for NaN and the infinities, which JSON has no
// word for (so every line of the log stays parseable).
llvm::json::Value jsonNumber(double v) {
  if (std::isfinite(v))
    return v;
  return nullptr;
}

} // namespace

void ProgressReporter::writeLog(const llvm::json::Value &line) {
  if (!json_)
    return;
  *json_ << line << "\n";
  json_->flush();
  if (!json_->has_error())
    return;
  // Training goes on (its checkpoints are what matters); the log stops,
  // said now and in the exit status.
  logError_ = "writing the log '" + logPath_ + "': " + json_->error().message();
  json_->clear_error();
  json_.reset();
  llvm::errs() << "mgc run: error: " << logError_
               << "; the log stops here, training goes on\n";
}

void ProgressReporter::record(const StepRecord &r) {
  auto now = Clock::now();
  elapsed_ = std::chrono::duration<double>(now - start_).count();
  last_ = r;
  any_ = true;
  if (json_) {
    llvm::json::Object o{{"step", r.step}, {"loss", jsonNumber(r.loss)}};
    for (const auto &[name, value] : r.metrics)
      o[name] = jsonNumber(value);
    if (r.skipped)
      o["skipped"] = true;
    o["time"] = elapsed_;
    o["step_time"] = r.stepSeconds;
    if (r.transfersMeasured) {
      o["h2d_bytes"] = static_cast<int64_t>(r.hostToDeviceBytes);
      o["d2h_bytes"] = static_cast<int64_t>(r.deviceToHostBytes);
    }
    double perSecond = r.stepSeconds > 0 ? perStep_ / r.stepSeconds : 0;
    o[units_ == "tok" ? "tokens_per_s" : "samples_per_s"] =
        jsonNumber(perSecond);
    writeLog(llvm::json::Value(std::move(o)));
  }
  if (terminal_) {
    // Redraw at most ten times a second, and always the last step.
    if (now - lastDraw_ < std::chrono::milliseconds(100) && drawn_ &&
        r.step != totalSteps_)
      return;
    lastDraw_ = now;
    drawn_ = true;
    os_ << "\r" << statusLine(r, /*bar=*/true) << "\x1b[K";
    os_.flush();
    return;
  }
  if (r.step == firstStep_ + 1 || r.step % logEvery_ == 0 ||
      r.step == totalSteps_) {
    os_ << statusLine(r, /*bar=*/false) << "\n";
    os_.flush();
  }
}

void ProgressReporter::recordEval(int64_t step, const EvalResult &eval,
                                  const std::string &what, double seconds) {
  start_ += std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(seconds));
  if (json_) {
    llvm::json::Object o{{"step", step}, {"eval_loss", jsonNumber(eval.loss)}};
    if (eval.accuracy)
      o["eval_accuracy"] = jsonNumber(*eval.accuracy);
    writeLog(llvm::json::Value(std::move(o)));
  }
  // On a terminal the line replaces the progress line, which the next
  // step draws again below it.
  if (terminal_ && drawn_)
    os_ << "\r\x1b[K";
  os_ << "step " << step << "/" << totalSteps_ << " "
      << llvm::format("eval loss %.4f", eval.loss);
  if (eval.accuracy)
    os_ << llvm::format(", accuracy %.4f", *eval.accuracy);
  os_ << " (" << what << ")\n";
  os_.flush();
  drawn_ = false;
}

void ProgressReporter::finish(const std::string &why) {
  elapsed_ = std::chrono::duration<double>(Clock::now() - start_).count();
  if (terminal_ && drawn_)
    os_ << "\n";
  int64_t done = any_ ? last_.step - firstStep_ : 0;
  os_ << why << ": " << done << (done == 1 ? " step" : " steps") << " in "
      << llvm::format("%.2f", elapsed_) << "s";
  if (done > 0 && elapsed_ > 0)
    os_ << llvm::format(", %.2f steps/s, ", done / elapsed_)
        << formatRate(done * perStep_ / elapsed_) << " " << units_ << "/s"
        << ", step " << last_.step
        << llvm::format(", final loss %.6f", last_.loss);
  os_ << "\n";
  os_.flush();
  if (json_) {
    json_->flush();
    if (json_->has_error()) {
      logError_ =
          "writing the log '" + logPath_ + "': " + json_->error().message();
      json_->clear_error();
      json_.reset();
    }
  }
}

} // namespace mgc::cli
