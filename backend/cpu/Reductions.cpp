#include "backend/cpu/Reductions.h"

#include "backend/cpu/Elem.h"

#include <algorithm>
#include <cmath>

namespace mgc::backend::cpu {

namespace {

// The accumulator of sums: f32, f64 in their own type, bf16 and f16 in f32
// (rounded once at the end), integers wrapping in unsigned arithmetic.
template <typename S> struct SumOf {
  using A = ComputeOf<S>;
  static A load(S v) { return Elem<S>::load(v); }
  static S store(A v) { return Elem<S>::store(v); }
};
template <> struct SumOf<int32_t> {
  using A = uint32_t;
  static A load(int32_t v) { return static_cast<uint32_t>(v); }
  static int32_t store(A v) { return static_cast<int32_t>(v); }
};
template <> struct SumOf<int64_t> {
  using A = uint64_t;
  static A load(int64_t v) { return static_cast<uint64_t>(v); }
  static int64_t store(A v) { return static_cast<int64_t>(v); }
};

// Element by element in source order, as (s0 + s1) + s2 ...; the loop runs
// over blocks of elements, each source added to the whole block in turn so
// that the inner loops vectorise, and each element still sees the same
// additions in the same order.
template <typename S>
void sumInto(llvm::ArrayRef<const std::byte *> srcs, std::byte *dst,
             int64_t n) {
  using Sum = SumOf<S>;
  using A = typename Sum::A;
  constexpr int64_t kBlock = 1024;
  A acc[kBlock];
  S *d = reinterpret_cast<S *>(dst);
  for (int64_t at = 0; at < n; at += kBlock) {
    int64_t len = std::min(kBlock, n - at);
    const S *first = reinterpret_cast<const S *>(srcs[0]) + at;
    for (int64_t i = 0; i < len; ++i)
      acc[i] = Sum::load(first[i]);
    for (size_t j = 1; j < srcs.size(); ++j) {
      const S *src = reinterpret_cast<const S *>(srcs[j]) + at;
      for (int64_t i = 0; i < len; ++i)
        acc[i] += Sum::load(src[i]);
    }
    for (int64_t i = 0; i < len; ++i)
      d[at + i] = Sum::store(acc[i]);
  }
}

template <typename S>
void maxInto(llvm::ArrayRef<const std::byte *> srcs, std::byte *dst,
             int64_t n) {
  S *d = reinterpret_cast<S *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    S best = reinterpret_cast<const S *>(srcs[0])[i];
    if constexpr (kIsInt<S>) {
      for (size_t j = 1; j < srcs.size(); ++j)
        best = std::max(best, reinterpret_cast<const S *>(srcs[j])[i]);
    } else {
      double b = Elem<S>::load(best);
      for (size_t j = 1; j < srcs.size() && !std::isnan(b); ++j) {
        S v = reinterpret_cast<const S *>(srcs[j])[i];
        double x = Elem<S>::load(v);
        if (x > b || std::isnan(x)) {
          best = v;
          b = x;
        }
      }
    }
    d[i] = best;
  }
}

} // namespace

void sumParts(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
              std::byte *dst, int64_t n) {
  visitDType(dtype, [&]<typename S>() { sumInto<S>(srcs, dst, n); });
}

void maxParts(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
              std::byte *dst, int64_t n) {
  visitDType(dtype, [&]<typename S>() { maxInto<S>(srcs, dst, n); });
}

} // namespace mgc::backend::cpu
