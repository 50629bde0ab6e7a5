#include "runtime/DataSynthetic.h"

#include "support/Random.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

namespace mgc::runtime {

namespace {

// Runs fn(begin, end) over [lo, hi) in chunks, on several threads when the
// range is large (a batch of hundreds of megabytes would otherwise take one
// core for a second, longer than a GPU's step).
void forChunks(int64_t lo, int64_t hi,
               const std::function<void(int64_t, int64_t)> &fn) {
  constexpr int64_t kPerThread = 1 << 20;
  int64_t threads =
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                        (hi - lo + kPerThread - 1) / kPerThread);
  if (threads <= 1) {
    fn(lo, hi);
    return;
  }
  std::vector<std::thread> pool;
  int64_t chunk = (hi - lo + threads - 1) / threads;
  for (int64_t b = lo + chunk; b < hi; b += chunk)
    pool.emplace_back(fn, b, std::min(hi, b + chunk));
  fn(lo, std::min(hi, lo + chunk));
  for (std::thread &th : pool)
    th.join();
}

// Elements [begin, end) of a synthetic tensor.
void fill(Tensor &t, const InputSpec &input, uint64_t stream, uint64_t base,
          int64_t begin, int64_t end, const SyntheticOptions &options) {
  if (ir::isInteger(input.type.dtype)) {
    int64_t range = options.intRange.at(input.name);
    for (int64_t i = begin; i < end; ++i) {
      int64_t v =
          uniformBelow(randomBits(options.seed, stream, base + i), range);
      if (input.type.dtype == ir::DType::I32)
        t.as<int32_t>()[i] = static_cast<int32_t>(v);
      else
        t.as<int64_t>()[i] = v;
    }
    return;
  }
  // The normals in vectorised calls of a bounded buffer, stored in the
  // tensor's type (f32 without Tensor::set's per-element dispatch).
  constexpr int64_t kBlock = 4096;
  double z[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    int64_t count = std::min(kBlock, end - b);
    standardNormals(options.seed, stream, base + b, count, z);
    if (t.dtype() == ir::DType::F32) {
      float *out = t.as<float>() + b;
      for (int64_t j = 0; j < count; ++j)
        out[j] = static_cast<float>(options.stddev * z[j]);
    } else {
      for (int64_t j = 0; j < count; ++j)
        t.set(b + j, options.stddev * z[j]);
    }
  }
}

class SyntheticSource : public BatchSource {
public:
  SyntheticSource(std::vector<InputSpec> inputs, SyntheticOptions options)
      : inputs_(std::move(inputs)), options_(std::move(options)) {}

  const std::vector<InputSpec> &inputs() const override { return inputs_; }
  int64_t position() const override { return step_; }

  llvm::Error seek(int64_t step) override {
    if (step < 0)
      return dataError("cannot seek synthetic data to step " +
                       llvm::Twine(step));
    step_ = step;
    return llvm::Error::success();
  }

  llvm::Error next(Batch &out) override {
    out.clear();
    for (const InputSpec &input : inputs_) {
      int64_t n = input.type.size();
      // The elements of the rows to make (all of a scalar input).
      int64_t lo = 0, hi = n;
      if (input.type.rank() > 0 && input.type.shape[0] > 0) {
        int64_t perRow = n / input.type.shape[0];
        RowRange rows = rowsOf(input.name, input.type.shape[0]);
        lo = rows.begin * perRow;
        hi = rows.end * perRow;
      }
      // Rows this process does not read stay zero.
      Tensor t = lo == 0 && hi == n ? Tensor::uninitialized(input.type)
                                    : Tensor(input.type);
      // Disjoint index ranges per step: element i of step k is element
      // k * n + i of the input's stream.
      uint64_t base = static_cast<uint64_t>(step_) * static_cast<uint64_t>(n);
      uint64_t stream = hashName("data.synthetic." + input.name);
      // Each element is a function of its index alone: any split of the
      // range over threads gives the same tensor.
      forChunks(lo, hi, [&](int64_t begin, int64_t end) {
        fill(t, input, stream, base, begin, end, options_);
      });
      out.emplace(input.name, std::move(t));
    }
    ++step_;
    return llvm::Error::success();
  }

private:
  std::vector<InputSpec> inputs_;
  SyntheticOptions options_;
  int64_t step_ = 0;
};

} // namespace

llvm::Expected<std::unique_ptr<BatchSource>>
makeSyntheticSource(std::vector<InputSpec> inputs, SyntheticOptions options) {
  for (const auto &[name, range] : options.intRange) {
    llvm::Expected<const InputSpec *> input =
        findInput(inputs, name, "a synthetic value range");
    if (!input)
      return input.takeError();
    if (!ir::isInteger((*input)->type.dtype))
      return dataError("synthetic value range given for input '" + name +
                       "', which is " + (*input)->type.str() +
                       ", not an integer input");
    if (range <= 0)
      return dataError("synthetic value range of input '" + name +
                       "' must be positive, not " + llvm::Twine(range));
    if (range > (int64_t(1) << 31) && (*input)->type.dtype == ir::DType::I32)
      return dataError("synthetic value range " + llvm::Twine(range) +
                       " of input '" + name + "' does not fit i32");
  }
  for (const InputSpec &input : inputs) {
    if (!ir::numElements(input.type.shape))
      return dataError("input '" + input.name + "' has an invalid shape " +
                       ir::shapeStr(input.type.shape));
    if (ir::isInteger(input.type.dtype) && !options.intRange.count(input.name))
      return dataError("synthetic data for integer input '" + input.name +
                       "' (" + input.type.str() +
                       ") needs a value range n: values are drawn from [0, n)");
    if (!std::isfinite(options.stddev) || options.stddev < 0)
      return dataError("synthetic standard deviation must be finite and "
                       "non-negative");
  }
  return std::make_unique<SyntheticSource>(std::move(inputs),
                                           std::move(options));
}

} // namespace mgc::runtime
