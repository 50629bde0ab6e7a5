// Element types of the CPU kernels: how each storage type loads into and
// stores from its compute type (bf16 and f16 compute in f32, integers in
// int64), and a dispatch from ir::DType to a template argument. Internal
// to the CPU backend.
#pragma once

#include "ir/Types.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <type_traits>

namespace mgc::backend::cpu {

struct BF16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

template <typename S> struct Elem {
  using C = S; // f32 and f64 compute in their own type
  static C load(S v) { return v; }
  static S store(C v) { return v; }
};
template <> struct Elem<BF16> {
  using C = float;
  static C load(BF16 v) { return runtime::bf16ToFloat(v.bits); }
  static BF16 store(C v) { return {runtime::floatToBF16(v)}; }
};
template <> struct Elem<F16> {
  using C = float;
  static C load(F16 v) { return runtime::f16ToFloat(v.bits); }
  static F16 store(C v) { return {runtime::floatToF16(v)}; }
};
template <> struct Elem<int32_t> {
  using C = int64_t;
  static C load(int32_t v) { return v; }
  static int32_t store(C v) { return static_cast<int32_t>(v); }
};
template <> struct Elem<int64_t> {
  using C = int64_t;
  static C load(int64_t v) { return v; }
  static int64_t store(C v) { return v; }
};

template <typename S> using ComputeOf = typename Elem<S>::C;
template <typename S> constexpr bool kIsInt = std::is_integral_v<S>;

// Calls f.template operator()<S>() with S the storage type of `dtype`.
template <typename F> decltype(auto) visitDType(ir::DType dtype, F &&f) {
  switch (dtype) {
  case ir::DType::F64:
    return f.template operator()<double>();
  case ir::DType::F32:
    return f.template operator()<float>();
  case ir::DType::BF16:
    return f.template operator()<BF16>();
  case ir::DType::F16:
    return f.template operator()<F16>();
  case ir::DType::I32:
    return f.template operator()<int32_t>();
  case ir::DType::I64:
    break;
  }
  return f.template operator()<int64_t>();
}

// Only the floating-point types (integers never reach these kernels: the
// shape rules refuse them).
template <typename F> decltype(auto) visitFloat(ir::DType dtype, F &&f) {
  switch (dtype) {
  case ir::DType::F64:
    return f.template operator()<double>();
  case ir::DType::BF16:
    return f.template operator()<BF16>();
  case ir::DType::F16:
    return f.template operator()<F16>();
  default:
    break;
  }
  return f.template operator()<float>();
}

// An integer id tensor element as int64.
inline int64_t loadId(const std::byte *data, ir::DType dtype, int64_t i) {
  return dtype == ir::DType::I32 ? reinterpret_cast<const int32_t *>(data)[i]
                                 : reinterpret_cast<const int64_t *>(data)[i];
}

} // namespace mgc::backend::cpu
