#include "runtime/DataSource.h"

#include "support/Random.h"

#include <algorithm>
#include <numeric>

namespace mgc::runtime {

BatchSource::~BatchSource() = default;

RowRange BatchSource::rowsOf(const std::string &input, int64_t n) const {
  auto it = rows_.find(input);
  if (it == rows_.end())
    return {0, n};
  return {std::clamp<int64_t>(it->second.begin, 0, n),
          std::clamp<int64_t>(it->second.end, 0, n)};
}

std::vector<int64_t> epochPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t stream = hashName("data.shuffle") ^ splitmix64(epoch);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = uniformBelow(randomBits(seed, stream, i), i + 1);
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::string batchedTypeStr(const InputSpec &input) {
  const ir::TensorType &t = input.type;
  if (t.shape.empty())
    return t.str();
  std::string s = ir::dtypeName(t.dtype).str() + "[B";
  for (size_t i = 1; i < t.shape.size(); ++i)
    s += ", " + std::to_string(t.shape[i]);
  return s + "] with B = " + std::to_string(t.shape[0]);
}

llvm::Error dataError(const llvm::Twine &msg) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 msg.str().c_str());
}

llvm::Expected<const InputSpec *>
findInput(const std::vector<InputSpec> &inputs, llvm::StringRef name,
          llvm::StringRef what) {
  for (const InputSpec &input : inputs)
    if (input.name == name)
      return &input;
  std::string names;
  for (const InputSpec &input : inputs)
    names += (names.empty() ? "'" : ", '") + input.name + "'";
  return dataError(what + " names input '" + name +
                   "', but the model has no such input (its inputs: " +
                   (names.empty() ? "none" : names) + ")");
}

} // namespace mgc::runtime
