#include "runtime/DataArrays.h"

#include "runtime/DataNpy.h"

#include <algorithm>
#include <cmath>

namespace mgc::runtime {

namespace {

struct BoundArray {
  size_t input; // index into the source's inputs
  NpyArray array;
  int64_t rowElems; // elements per row
};

class ArraySource : public BatchSource {
public:
  ArraySource(std::vector<InputSpec> inputs, std::vector<BoundArray> arrays,
              int64_t rows, int64_t batch, ArraySourceOptions options)
      : inputs_(std::move(inputs)), arrays_(std::move(arrays)), rows_(rows),
        batch_(batch), options_(options) {}

  const std::vector<InputSpec> &inputs() const override { return inputs_; }
  int64_t position() const override { return step_; }
  std::optional<int64_t> batchesPerEpoch() const override {
    return rows_ / batch_;
  }

  llvm::Error seek(int64_t step) override {
    if (step < 0)
      return dataError("cannot seek array data to step " + llvm::Twine(step));
    step_ = step;
    return llvm::Error::success();
  }

  llvm::Error checkEveryValue() override;

  llvm::Error next(Batch &out) override {
    int64_t perEpoch = rows_ / batch_;
    int64_t epoch = step_ / perEpoch;
    int64_t first = (step_ % perEpoch) * batch_;
    if (options_.shuffle && epoch != permEpoch_) {
      perm_ = epochPermutation(rows_, options_.seed, epoch);
      permEpoch_ = epoch;
    }
    out.clear();
    for (const BoundArray &bound : arrays_) {
      const InputSpec &input = inputs_[bound.input];
      Tensor t(input.type);
      RowRange rows = rowsOf(input.name, batch_);
      for (int64_t r = rows.begin; r < rows.end; ++r) {
        int64_t row = options_.shuffle ? perm_[first + r] : first + r;
        if (llvm::Error err =
                copyNpyElements(bound.array, row * bound.rowElems,
                                bound.rowElems, t, r * bound.rowElems))
          return err;
      }
      out.emplace(input.name, std::move(t));
    }
    ++step_;
    return llvm::Error::success();
  }

private:
  std::vector<InputSpec> inputs_;
  std::vector<BoundArray> arrays_;
  int64_t rows_, batch_;
  ArraySourceOptions options_;
  int64_t step_ = 0;
  int64_t permEpoch_ = -1;
  std::vector<int64_t> perm_;
};

llvm::Error ArraySource::checkEveryValue() {
  for (const BoundArray &bound : arrays_) {
    const InputSpec &input = inputs_[bound.input];
    bool integer = ir::isInteger(input.type.dtype);
    auto range = options_.intRange.find(input.name);
    if (integer && range == options_.intRange.end())
      continue;
    // Whole rows, about a million elements at a time, in the input's type.
    int64_t perChunk =
        std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(1, bound.rowElems));
    for (int64_t row = 0; row < rows_; row += perChunk) {
      int64_t rows = std::min(perChunk, rows_ - row);
      Tensor t(ir::TensorType(input.type.dtype, {rows * bound.rowElems}));
      if (llvm::Error err = copyNpyElements(bound.array, row * bound.rowElems,
                                            t.numel(), t, 0))
        return err;
      for (int64_t i = 0; i < t.numel(); ++i) {
        double v = t.get(i);
        bool fits = integer ? v >= 0 && v < static_cast<double>(range->second)
                            : std::isfinite(v);
        if (fits)
          continue;
        std::string where =
            "'" + bound.array.file.path() + "' (input '" + input.name +
            "'): row " + std::to_string(row + i / bound.rowElems) + " holds ";
        if (integer)
          return dataError(where + std::to_string(static_cast<int64_t>(v)) +
                           ", outside [0, " + std::to_string(range->second) +
                           "), the range the model reads it in");
        return dataError(where + (std::isnan(v) ? "nan" : "inf") +
                         ": the data must be finite");
      }
    }
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<BatchSource>>
makeArraySource(std::vector<InputSpec> inputs,
                std::vector<ArrayBinding> bindings,
                ArraySourceOptions options) {
  std::vector<BoundArray> arrays;
  // Every binding names a distinct input that exists.
  for (size_t i = 0; i < bindings.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (bindings[j].input == bindings[i].input)
        return dataError("input '" + bindings[i].input +
                         "' is given data twice ('" + bindings[j].path +
                         "' and '" + bindings[i].path + "')");
    llvm::Expected<const InputSpec *> input = findInput(
        inputs, bindings[i].input, "data file '" + bindings[i].path + "'");
    if (!input)
      return input.takeError();
  }
  for (const InputSpec &input : inputs) {
    bool bound = false;
    for (const ArrayBinding &b : bindings)
      bound |= b.input == input.name;
    if (!bound)
      return dataError("input '" + input.name + "' (" + input.type.str() +
                       ") has no data file (bind one with " + input.name +
                       "=FILE.npy)");
    if (input.type.shape.empty() || input.type.shape[0] <= 0)
      return dataError("input '" + input.name + "' is " + input.type.str() +
                       ": a data file feeds only inputs whose first "
                       "dimension is a positive batch size");
    if (input.type.shape[0] != inputs.front().type.shape[0])
      return dataError("inputs '" + inputs.front().name + "' (" +
                       inputs.front().type.str() + ") and '" + input.name +
                       "' (" + input.type.str() +
                       ") disagree on the batch size");
  }
  if (inputs.empty())
    return dataError("the model has no inputs to feed from data files");

  // Read every file in input order and check it against its input.
  int64_t rows = -1;
  std::string rowsFile;
  for (size_t index = 0; index < inputs.size(); ++index) {
    const InputSpec &input = inputs[index];
    const ArrayBinding *binding = nullptr;
    for (const ArrayBinding &b : bindings)
      if (b.input == input.name)
        binding = &b;
    llvm::Expected<NpyArray> array = readNpy(binding->path);
    if (!array)
      return array.takeError();
    llvm::ArrayRef<int64_t> want = input.type.shape;
    llvm::ArrayRef<int64_t> have = array->shape;
    bool shapeFits = have.size() == want.size() && !have.empty() &&
                     have.drop_front() == want.drop_front();
    if (!shapeFits || !npyConvertsExactly(array->dtype, input.type.dtype))
      return dataError("'" + binding->path + "' holds " + array->typeStr() +
                       " but input '" + input.name + "' expects " +
                       batchedTypeStr(input) +
                       (shapeFits ? " (element types differ and the "
                                    "conversion would not be exact)"
                                  : ""));
    int64_t n = have[0];
    if (rows >= 0 && n != rows)
      return dataError("'" + binding->path + "' has " + llvm::Twine(n) +
                       " rows but '" + rowsFile + "' has " + llvm::Twine(rows) +
                       ": every data file needs one row "
                       "per sample");
    rows = n;
    rowsFile = binding->path;
    int64_t rowElems = ir::numElements(want.drop_front()).value_or(0);
    arrays.push_back({index, std::move(*array), rowElems});
  }
  int64_t batch = inputs.front().type.shape[0];
  if (rows < batch)
    return dataError("'" + rowsFile + "' has " + llvm::Twine(rows) +
                     " rows, fewer than one batch of " + llvm::Twine(batch));
  return std::unique_ptr<BatchSource>(std::make_unique<ArraySource>(
      std::move(inputs), std::move(arrays), rows, batch, options));
}

} // namespace mgc::runtime
