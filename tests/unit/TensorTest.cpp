#include "runtime/Tensor.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace mgc;
using namespace mgc::runtime;

TEST_CASE("tensor storage in its own element type") {
  Tensor t(ir::TensorType(ir::DType::F32, {2, 3}));
  CHECK(t.numel() == 6);
  CHECK(t.nbytes() == 24);
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  for (int64_t i = 0; i < 6; ++i)
    CHECK(t.get(i) == 0.0);
  t.set(4, 1.5);
  CHECK(t.as<float>()[4] == 1.5f);
  Tensor copy = t;
  t.set(4, 2.0);
  CHECK(copy.get(4) == 1.5);
  Tensor ids(ir::TensorType(ir::DType::I64, {3}));
  ids.set(2, -7.9);
  CHECK(ids.as<int64_t>()[2] == -7);
}

TEST_CASE("bf16 and f16 conversions round to nearest even") {
  CHECK(bf16ToFloat(floatToBF16(1.00390625f)) == 1.0f);      // tie -> even
  CHECK(bf16ToFloat(floatToBF16(1.01171875f)) == 1.015625f); // tie -> even (up)
  CHECK(bf16ToFloat(floatToBF16(-3.0f)) == -3.0f);
  CHECK(std::isnan(bf16ToFloat(floatToBF16(NAN))));
  CHECK(f16ToFloat(floatToF16(1.0f)) == 1.0f);
  CHECK(f16ToFloat(floatToF16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(f16ToFloat(floatToF16(1e6f))));
  CHECK(f16ToFloat(floatToF16(5.960464477539063e-08f)) ==
        5.960464477539063e-08f);
  CHECK(f16ToFloat(floatToF16(-0.333251953125f)) == -0.333251953125f);
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) // every finite positive f16
    REQUIRE(floatToF16(f16ToFloat(static_cast<uint16_t>(bits))) == bits);
}

TEST_CASE("host conversions agree with the interpreter's rounding") {
  ir::HostTensor h(ir::TensorType(ir::DType::BF16, {3}),
                   {1.00390625, 0.1, -2.5});
  Tensor t = Tensor::fromHost(h);
  ir::HostTensor back = t.toHost();
  for (int i = 0; i < 3; ++i)
    CHECK(back.data[i] == ir::roundToDType(h.data[i], ir::DType::BF16));
}
