#include "runtime/DataSynthetic.h"

#include "support/Random.h"

#include <cmath>
#include <vector>

namespace mgc::runtime {

namespace {

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
      Tensor t(input.type);
      int64_t n = t.numel();
      // Disjoint index ranges per step: element i of step k is element
      // k * n + i of the input's stream.
      uint64_t base = static_cast<uint64_t>(step_) * static_cast<uint64_t>(n);
      uint64_t stream = hashName("data.synthetic." + input.name);
      // The elements of the rows to make (all of a scalar input).
      int64_t lo = 0, hi = n;
      if (input.type.rank() > 0 && input.type.shape[0] > 0) {
        int64_t perRow = n / input.type.shape[0];
        RowRange rows = rowsOf(input.name, input.type.shape[0]);
        lo = rows.begin * perRow;
        hi = rows.end * perRow;
      }
      if (ir::isInteger(input.type.dtype)) {
        int64_t range = options_.intRange.at(input.name);
        for (int64_t i = lo; i < hi; ++i) {
          int64_t v =
              uniformBelow(randomBits(options_.seed, stream, base + i), range);
          if (input.type.dtype == ir::DType::I32)
            t.as<int32_t>()[i] = static_cast<int32_t>(v);
          else
            t.as<int64_t>()[i] = v;
        }
      } else {
        // The rows' normals in one vectorised call.
        std::vector<double> z(static_cast<size_t>(hi - lo));
        standardNormals(options_.seed, stream, base + lo, hi - lo, z.data());
        for (int64_t i = lo; i < hi; ++i)
          t.set(i, options_.stddev * z[static_cast<size_t>(i - lo)]);
      }
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
