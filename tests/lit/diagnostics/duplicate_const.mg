// A constant defined twice.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const D = 8
// CHECK: {{.*}}duplicate_const.mg:[[@LINE+2]]:7: error: duplicate definition of constant 'D'
// CHECK: {{.*}}duplicate_const.mg:3:7: note: previous definition is here
const D = 16
model m {
  input x: f32[D]
  output y = relu(x)
}
