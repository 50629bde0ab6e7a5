// -D must name a constant of the file.
// RUN: not mgc compile %s -D NOPE=3 2>&1 | FileCheck --strict-whitespace %s
// RUN: not mgc compile %s -D DD=3 2>&1 | FileCheck --strict-whitespace %s --check-prefix=CLOSE
// CHECK: error: -D NOPE=3: no constant named 'NOPE' in the model file
// CLOSE: error: -D DD=3: no constant named 'DD' in the model file; did you mean 'D'?
const D = 8
model m {
  input x: f32[D]
  output y = relu(x)
}
