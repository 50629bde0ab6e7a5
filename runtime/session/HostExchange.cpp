#include "runtime/session/HostExchange.h"

#include <algorithm>
#include <cstring>

namespace mgc::session {

using backend::cpu::NamedTensors;

namespace {

// The exchange format of tensor parts between processes: per part its
// device, name, dtype, shape and bytes.
void putU64(std::string &out, uint64_t v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof v);
}

class PartReader {
public:
  explicit PartReader(const std::string &s) : s_(s) {}
  bool done() const { return at_ >= s_.size(); }
  bool ok() const { return ok_; }
  uint64_t u64() {
    uint64_t v = 0;
    if (at_ + sizeof v > s_.size()) {
      ok_ = false;
      return 0;
    }
    std::memcpy(&v, s_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  const char *bytes(uint64_t n) {
    if (n > s_.size() - std::min(at_, s_.size())) {
      ok_ = false;
      return nullptr;
    }
    const char *p = s_.data() + at_;
    at_ += n;
    return p;
  }

private:
  const std::string &s_;
  size_t at_ = 0;
  bool ok_ = true;
};

} // namespace

std::string
packParts(const std::map<int64_t, NamedTensors> &parts,
          const std::function<bool(int64_t, const std::string &)> &needed) {
  std::string out;
  for (const auto &[device, tensors] : parts)
    for (const auto &[name, t] : tensors) {
      if (!needed(device, name))
        continue;
      putU64(out, static_cast<uint64_t>(device));
      putU64(out, name.size());
      out += name;
      putU64(out, static_cast<uint64_t>(t.dtype()));
      putU64(out, t.shape().size());
      for (int64_t d : t.shape())
        putU64(out, static_cast<uint64_t>(d));
      putU64(out, t.nbytes());
      out.append(reinterpret_cast<const char *>(t.data()), t.nbytes());
    }
  return out;
}

bool unpackParts(const std::string &bytes,
                 std::map<int64_t, NamedTensors> &into) {
  PartReader r(bytes);
  while (r.ok() && !r.done()) {
    int64_t device = static_cast<int64_t>(r.u64());
    uint64_t len = r.u64();
    const char *name = r.bytes(len);
    uint64_t dtypeCode = r.u64();
    uint64_t rank = r.u64();
    if (!r.ok() || rank > 64 ||
        dtypeCode > static_cast<uint64_t>(ir::DType::I64))
      return false;
    auto dtype = static_cast<ir::DType>(dtypeCode);
    std::vector<int64_t> shape;
    for (uint64_t i = 0; i < rank; ++i)
      shape.push_back(static_cast<int64_t>(r.u64()));
    uint64_t n = r.u64();
    const char *data = r.bytes(n);
    if (!r.ok())
      return false;
    runtime::Tensor t(ir::TensorType(dtype, shape));
    if (t.nbytes() != n)
      return false;
    if (n > 0)
      std::memcpy(t.data(), data, n);
    into[device].insert_or_assign(std::string(name, len), std::move(t));
  }
  return r.ok();
}

// The exchange format of trace events: per event its device, queue, times
// and the lengths and bytes of its name and detail.
std::string packEvents(const std::vector<backend::TraceEvent> &events) {
  std::string out;
  for (const backend::TraceEvent &e : events) {
    putU64(out, static_cast<uint64_t>(e.device));
    putU64(out, static_cast<uint64_t>(e.queue));
    double times[2] = {e.startUs, e.endUs};
    out.append(reinterpret_cast<const char *>(times), sizeof times);
    for (const std::string *s : {&e.name, &e.detail}) {
      putU64(out, s->size());
      out += *s;
    }
  }
  return out;
}

bool unpackEvents(const std::string &bytes,
                  std::vector<backend::TraceEvent> &into) {
  PartReader r(bytes);
  while (r.ok() && !r.done()) {
    backend::TraceEvent e;
    e.device = static_cast<int64_t>(r.u64());
    uint64_t queue = r.u64();
    if (queue >
        static_cast<uint64_t>(backend::TraceEvent::Queue::Communication))
      return false;
    e.queue = static_cast<backend::TraceEvent::Queue>(queue);
    const char *times = r.bytes(2 * sizeof(double));
    if (!times)
      return false;
    std::memcpy(&e.startUs, times, sizeof(double));
    std::memcpy(&e.endUs, times + sizeof(double), sizeof(double));
    for (std::string *s : {&e.name, &e.detail}) {
      uint64_t n = r.u64();
      const char *text = r.bytes(n);
      if (!text)
        return false;
      s->assign(text, n);
    }
    into.push_back(std::move(e));
  }
  return r.ok();
}

} // namespace mgc::session
