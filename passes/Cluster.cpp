#include "passes/Cluster.h"

#include "support/InputFile.h"
#include "support/Json.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace mgc::passes {

namespace {

// Cluster files are small: anything larger is not one.
constexpr uint64_t kMaxClusterBytes = 16 << 20;

std::string numberText(const llvm::json::Value *v) {
  if (!v)
    return "nothing";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << *v;
  return os.str();
}

// A positive finite number `key` of `obj`; sets `error` naming `where`.
bool positive(const llvm::json::Object &obj, llvm::StringRef key,
              const std::string &where, double &out, std::string &error,
              bool allowZero = false) {
  const llvm::json::Value *v = obj.get(key);
  llvm::Optional<double> x;
  if (v)
    x = v->getAsNumber();
  if (!x || !std::isfinite(*x) || *x < 0 || (*x == 0 && !allowZero)) {
    error = where + ": '" + key.str() + "' must be a number " +
            (allowZero ? ">= 0" : "> 0") + ", got " + numberText(v);
    return false;
  }
  out = *x;
  return true;
}

bool readLink(const llvm::json::Object &obj, const std::string &where,
              ClusterLink &link, std::string &error) {
  double gbps = 0, latencyUs = 0;
  if (!positive(obj, "gbps", where, gbps, error) ||
      !positive(obj, "latency_us", where, latencyUs, error, true))
    return false;
  link.bytesPerSecond = gbps * 1e9;
  link.latencySeconds = latencyUs * 1e-6;
  return true;
}

} // namespace

std::optional<Cluster>
Cluster::parse(llvm::StringRef file, llvm::StringRef text, std::string &error) {
  std::string at = file.str() + ": ";
  llvm::Expected<llvm::json::Value> json = parseJson(text);
  if (!json) {
    error = at + "not JSON: " + llvm::toString(json.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *devices = root ? root->getArray("devices") : nullptr;
  if (!devices || devices->empty()) {
    error = at + "expected an object with a non-empty array \"devices\"";
    return std::nullopt;
  }
  // A field of the wrong type is an error, never taken as absent.
  for (auto [key, wanted] :
       {std::pair<const char *, const char *>{"links", "an array"},
        {"default_link", "an object"}}) {
    const llvm::json::Value *v = root->get(key);
    bool fits =
        !v || (llvm::StringRef(key) == "links" ? v->getAsArray() != nullptr
                                               : v->getAsObject() != nullptr);
    if (!fits) {
      error =
          at + "\"" + key + "\" must be " + wanted + ", got " + numberText(v);
      return std::nullopt;
    }
  }
  // The count first: no more devices than a mesh can have, before
  // anything is read per device.
  size_t n = devices->size();
  if (n > static_cast<size_t>(ir::kMaxMeshDevices)) {
    error = at + std::to_string(n) + " devices: a mesh has at most " +
            std::to_string(ir::kMaxMeshDevices);
    return std::nullopt;
  }
  Cluster c;
  for (size_t i = 0; i < n; ++i) {
    std::string where = at + "devices[" + std::to_string(i) + "]";
    const llvm::json::Object *d = (*devices)[i].getAsObject();
    if (!d) {
      error = where + ": expected an object";
      return std::nullopt;
    }
    ClusterDevice dev;
    llvm::Optional<llvm::StringRef> name = d->getString("name");
    if (d->get("name") && !name) {
      error = where + ": 'name' must be a string, got " +
              numberText(d->get("name"));
      return std::nullopt;
    }
    dev.name = name ? name->str() : "device " + std::to_string(i);
    double tflops = 0, gib = 0, gbs = 0;
    if (!positive(*d, "tflops", where, tflops, error) ||
        !positive(*d, "memory_gib", where, gib, error) ||
        !positive(*d, "bandwidth_gbs", where, gbs, error))
      return std::nullopt;
    dev.flopsPerSecond = tflops * 1e12;
    dev.memoryBytes = gib * 1024.0 * 1024.0 * 1024.0;
    dev.bytesPerSecond = gbs * 1e9;
    c.devices_.push_back(std::move(dev));
  }
  // The links listed as such (not taken from the other way).
  std::set<std::pair<size_t, size_t>> listed;
  if (const llvm::json::Array *links = root->getArray("links"))
    for (size_t i = 0; i < links->size(); ++i) {
      std::string where = at + "links[" + std::to_string(i) + "]";
      const llvm::json::Object *l = (*links)[i].getAsObject();
      llvm::Optional<int64_t> from, to;
      if (l) {
        from = l->getInteger("from");
        to = l->getInteger("to");
      }
      if (!from || !to || *from < 0 || *to < 0 ||
          static_cast<size_t>(*from) >= n || static_cast<size_t>(*to) >= n ||
          *from == *to) {
        error = where +
                ": expected \"from\" and \"to\", two different "
                "device indices below " +
                std::to_string(n);
        return std::nullopt;
      }
      ClusterLink link;
      if (!readLink(*l, where, link, error))
        return std::nullopt;
      // Links go both ways unless the other way is listed too.
      size_t a = static_cast<size_t>(*from), b = static_cast<size_t>(*to);
      c.links_[{a, b}] = link;
      listed.insert({a, b});
      if (!listed.count({b, a}))
        c.links_[{b, a}] = link;
    }
  if (const llvm::json::Object *d = root->getObject("default_link")) {
    ClusterLink fallback;
    if (!readLink(*d, at + "default_link", fallback, error))
      return std::nullopt;
    c.defaultLink_ = fallback;
    return c;
  }
  // Without a default every pair needs a link (links_ holds both ways of
  // each, in order): the first pair without one.
  auto next = c.links_.begin();
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      if (a == b)
        continue;
      if (next != c.links_.end() && next->first == std::make_pair(a, b)) {
        ++next;
        continue;
      }
      error = at + "no link between devices " + std::to_string(std::min(a, b)) +
              " and " + std::to_string(std::max(a, b)) +
              ": list it in \"links\" or give \"default_link\"";
      return std::nullopt;
    }
  return c;
}

ClusterLink Cluster::link(size_t a, size_t b) const {
  auto it = links_.find({a, b});
  if (it != links_.end())
    return it->second;
  return defaultLink_.value_or(ClusterLink{});
}

std::optional<Cluster> Cluster::read(llvm::StringRef path, std::string &error) {
  llvm::Expected<std::string> text =
      readInputFile(path, "cluster description", kMaxClusterBytes);
  if (!text) {
    error = llvm::toString(text.takeError());
    return std::nullopt;
  }
  return parse(path, *text, error);
}

std::string clusterMismatch(const Cluster &cluster, const ir::Mesh &mesh) {
  if (static_cast<int64_t>(cluster.devices().size()) == mesh.numDevices())
    return "";
  return std::to_string(cluster.devices().size()) + " devices for the mesh " +
         mesh.str() + " of " + std::to_string(mesh.numDevices()) +
         ": expected one per device";
}

std::vector<int64_t> rowWeights(const ir::MeshAxis &axis, int64_t batch) {
  if (axis.weights.empty() || batch <= 0)
    return axis.weights;
  std::vector<int64_t> rows = ir::splitSizes(batch, axis);
  if (*std::min_element(rows.begin(), rows.end()) == 0)
    return axis.weights;
  int64_t common = 0;
  for (int64_t r : rows)
    common = std::gcd(common, r);
  for (int64_t &r : rows)
    r /= common;
  return rows;
}

std::optional<ir::Mesh>
weightDataAxis(const ir::Mesh &mesh, const Cluster &cluster,
               const std::function<double(const ClusterDevice &)> &seconds,
               std::string &error, int64_t batch) {
  int dp = mesh.axisIndex(ir::kDataAxis);
  if (dp < 0) {
    error = "a cluster balances a pipeline's stages (pp) or the dp shares "
            "of the batch: give the mesh a pp or a dp axis";
    return std::nullopt;
  }
  int64_t n = mesh.numDevices();
  error = clusterMismatch(cluster, mesh);
  if (!error.empty())
    return std::nullopt;
  std::vector<ir::MeshAxis> axes(mesh.axes().begin(), mesh.axes().end());
  ir::MeshAxis &axis = axes[static_cast<size_t>(dp)];
  if (!axis.weights.empty()) {
    error = "the dp shares come from the cluster or from --dp-weights: give "
            "one of them";
    return std::nullopt;
  }
  // Each dp coordinate goes at the pace of its slowest device.
  std::vector<double> time(static_cast<size_t>(axis.size), 0);
  for (int64_t d = 0; d < n; ++d) {
    double &t = time[static_cast<size_t>(mesh.coords(d)[dp])];
    t = std::max(t, seconds(cluster.devices()[static_cast<size_t>(d)]));
  }
  double slowest = *std::max_element(time.begin(), time.end());
  int64_t common = 0;
  // Weights past a billion to one say no more than that (and would
  // overflow the integer they are rounded to, inverting the shares).
  constexpr double kLargestWeight = 1e9;
  for (double t : time) {
    double ratio = t > 0 ? 10 * slowest / t : 10;
    int64_t w =
        std::max<int64_t>(1, std::llround(std::min(ratio, kLargestWeight)));
    axis.weights.push_back(w);
    common = std::gcd(common, w);
  }
  for (int64_t &w : axis.weights)
    w /= common;
  if (batch > 0)
    axis.weights = rowWeights(axis, batch);
  if (ir::allEqual(axis.weights))
    axis.weights.clear();
  return ir::Mesh(std::move(axes));
}

} // namespace mgc::passes
