// Batch sources: where the input tensors of each training step come from.
// A source produces batch after batch as a map input name -> tensor. Every
// source here is a pure function of (seed, step): batch k is the same
// whether it is reached by k calls to next() or by seek(k), which is how a
// resumed run sees exactly the data of an uninterrupted one.
#pragma once

#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgc::runtime {

using Batch = std::map<std::string, Tensor>;

// A model input as a data source sees it: the full per-step type, whose
// first dimension is the batch (rows per step) for batched inputs.
struct InputSpec {
  std::string name;
  ir::TensorType type;
};

// Rows [begin, end) of an input's first dimension.
struct RowRange {
  int64_t begin = 0, end = 0;
};

class BatchSource {
public:
  virtual ~BatchSource();

  // Makes next() read only rows `rows` of input `name`'s first dimension,
  // leaving the other rows zero: for a process whose devices use only
  // those rows of each batch (a rank's share), which need not be read.
  // By default every row is read.
  virtual void restrictRows(const std::string &name, RowRange rows) {
    rows_[name] = rows;
  }

  // The inputs every batch holds, in the order given at creation.
  virtual const std::vector<InputSpec> &inputs() const = 0;
  // Produces batch number position() into `out` (replacing its contents)
  // and advances. On error the position does not move.
  virtual llvm::Error next(Batch &out) = 0;
  // Makes batch `step` (0-based, counted from the start of training) the
  // next one produced.
  virtual llvm::Error seek(int64_t step) = 0;
  // The number of the batch next() produces.
  virtual int64_t position() const = 0;
  // Batches in one pass over the data, when the data is finite.
  virtual std::optional<int64_t> batchesPerEpoch() const {
    return std::nullopt;
  }
  // Reads every value the source can give, once, and checks it as next()
  // would and more (a file's token outside the vocabulary, an array's
  // integer outside its input's range or a float that is not finite), so
  // that a bad file stops a run before it trains, not in the middle. Call
  // it before next().
  virtual llvm::Error checkEveryValue() { return llvm::Error::success(); }

protected:
  // The rows of `input` (of `n` rows per batch) next() reads.
  RowRange rowsOf(const std::string &input, int64_t n) const;

private:
  std::map<std::string, RowRange> rows_;
};

// A permutation of [0, n), a pure function of (seed, epoch): Fisher-Yates
// driven by counter-based random numbers.
std::vector<int64_t> epochPermutation(int64_t n, uint64_t seed, int64_t epoch);

// A uniform integer in [0, n) from 64 random bits (n > 0).
inline int64_t uniformBelow(uint64_t bits, int64_t n) {
  return static_cast<int64_t>(
      (static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(n)) >> 64);
}

// "f32[B, 784] with B = 64": an input's type with its batch dimension named.
std::string batchedTypeStr(const InputSpec &input);

// Finds an input by name; the error lists the names there are.
llvm::Expected<const InputSpec *>
findInput(const std::vector<InputSpec> &inputs, llvm::StringRef name,
          llvm::StringRef what);

// An error whose message is `msg`.
llvm::Error dataError(const llvm::Twine &msg);

} // namespace mgc::runtime
