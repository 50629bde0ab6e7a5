// Constant expressions: + - * / and parentheses over integers and floats,
// used in shapes and in expressions; -D overrides them.
// RUN: mgc compile %s --emit=ir | FileCheck %s
// RUN: mgc compile %s --emit=ir -D D=16 -D Eps=0.25 -D Half=1 | FileCheck %s --check-prefix=OVERRIDE
const B = 2, D = 8
const H = D / 2         // an exact integer division stays an integer
const Big = (B + 1) * (D - 2) / 3
const Eps = 1e-3
const Half = 0.5        // a float constant: -D Half=1 makes it 1.0

model consts {
  // CHECK: input %x : f32[2, 8]
  // OVERRIDE: input %x : f32[2, 16]
  input x: f32[B, D]
  // CHECK-NEXT: input %y : f32[6, 4, 2]
  // OVERRIDE-NEXT: input %y : f32[14, 8, 2]
  input y: f32[Big, H, -(-B)]
  // CHECK: constant() {dtype = "f32", value = 0.001} : f32[]
  // OVERRIDE: constant() {dtype = "f32", value = 0.25} : f32[]
  output a = x + Eps
  // CHECK: constant() {dtype = "f32", value = 0.5} : f32[]
  // OVERRIDE: constant() {dtype = "f32", value = 1.0} : f32[]
  output b = x * Half
  output c = y
}
