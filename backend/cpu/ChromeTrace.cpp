// The Chrome trace-event format (the JSON object form): complete events
// ("ph": "X") with microsecond timestamps, one process per device and one
// thread per queue, named by metadata events ("ph": "M").
#include "backend/cpu/MeshExecutor.h"

#include "support/AtomicFile.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

namespace mgc::backend::cpu {

namespace {

constexpr int64_t kComputeThread = 0, kCommunicationThread = 1;

// json::Value keeps a StringRef without copying: names are std::strings.
llvm::json::Object metadata(llvm::StringRef what, int64_t pid, int64_t tid,
                            std::string name) {
  return llvm::json::Object{
      {"name", what},
      {"ph", "M"},
      {"pid", pid},
      {"tid", tid},
      {"args", llvm::json::Object{{"name", std::move(name)}}}};
}

} // namespace

LogicalResult writeChromeTrace(const std::vector<TraceEvent> &events,
                               const std::string &path,
                               DiagnosticEngine &diag) {
  llvm::json::Array list;
  std::set<int64_t> devices;
  for (const TraceEvent &e : events)
    devices.insert(e.device);
  for (int64_t d : devices) {
    list.push_back(
        metadata("process_name", d, 0, "device " + std::to_string(d)));
    list.push_back(
        llvm::json::Object{{"name", "process_sort_index"},
                           {"ph", "M"},
                           {"pid", d},
                           {"args", llvm::json::Object{{"sort_index", d}}}});
    list.push_back(metadata("thread_name", d, kComputeThread, "compute"));
    list.push_back(
        metadata("thread_name", d, kCommunicationThread, "communication"));
  }
  for (const TraceEvent &e : events) {
    bool comm = e.queue == TraceEvent::Queue::Communication;
    llvm::json::Object args;
    if (!e.detail.empty())
      args["detail"] = e.detail;
    list.push_back(llvm::json::Object{
        {"name", e.name},
        {"cat", comm ? "communication" : "compute"},
        {"ph", "X"},
        {"ts", e.startUs},
        {"dur", std::max(0.0, e.endUs - e.startUs)},
        {"pid", e.device},
        {"tid", comm ? kCommunicationThread : kComputeThread},
        {"args", std::move(args)}});
  }
  llvm::json::Value root = llvm::json::Object{{"traceEvents", std::move(list)},
                                              {"displayTimeUnit", "ms"}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << root << "\n";
  os.flush();
  if (llvm::Error err = writeFileAtomically(
          path, [&](FileSink &sink) { return sink.write(text); })) {
    diag.error("cannot write the trace: " + llvm::toString(std::move(err)));
    return failure();
  }
  return success();
}

} // namespace mgc::backend::cpu
